#pragma once
// Chooses the GPU backend from --gpus: `emulated:4xA100-40GB`, `nvml`, or `auto` (NVML when an
// NVIDIA driver with GPUs is present, else emulated 4xA100-40GB, which is logged).

#include <memory>

#include "daemon/config.h"
#include "device/gpu_backend.h"

namespace carma::daemon {

Result<std::unique_ptr<device::GpuBackend>> open_backend(const DaemonConfig& config);

}  // namespace carma::daemon
