#pragma once
// Real NVIDIA GPUs through NVML, loaded at run time with dlopen (no NVIDIA header or library is
// needed to build). The library is libnvidia-ml.so.1, or the file named by CARMA_NVML_LIBRARY
// (tests point it at a fake NVML they build). A missing library or entry point is an error
// value, never a crash. NVML has no SM activity/occupancy or DRAM activity counters (those need
// DCGM profiling): SMACT is approximated by the utilisation rate and DRAMA by the memory
// utilisation rate, SMOCC is reported as 0 — say so wherever these numbers are shown.

#include <memory>

#include "device/gpu_backend.h"

namespace carma::device {

inline constexpr const char* kNvmlLibraryEnv = "CARMA_NVML_LIBRARY";

Result<std::unique_ptr<GpuBackend>> open_nvml();

}  // namespace carma::device
