#pragma once
// Chooses the GPU backend from --gpus: `emulated:4xA100-40GB`, `dcgm`, `nvml`, or `auto`: DCGM
// (SM activity, occupancy and DRAM activity measured), else NVML (with GPM on Hopper and later,
// else utilisation proxies), else emulated 4xA100-40GB. The choice and why is logged.

#include <memory>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "device/gpu_backend.h"

namespace carma::daemon {

// `attempts_running`: attempts of the store whose supervisors still run; while any does, a damaged
// emulated-GPU file is an error instead of being re-initialised (device::EmulatorOptions).
Result<std::unique_ptr<device::GpuBackend>> open_backend(const DaemonConfig& config,
                                                         int attempts_running);

// Why CARMA leaves this GPU alone, or "" when it uses it: a pattern of `exclude_gpus` matches
// its index, its UUID, or its name (shell wildcards), or MIG mode is on (not supported yet).
std::string exclusion_reason(const device::GpuInfo& gpu, const std::vector<std::string>& patterns);

// An error naming every GPU and why it is left out, when none is left to schedule on.
Result<void> check_some_gpu_usable(const std::vector<device::GpuInfo>& gpus,
                                   const std::vector<std::string>& patterns);

// "SMACT dcgm, SMOCC dcgm, DRAMA dcgm, util dcgm, power dcgm, memory dcgm" for one sample.
std::string describe_sources(const device::GpuSample& sample);

}  // namespace carma::daemon
