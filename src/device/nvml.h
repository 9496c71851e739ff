#pragma once
// Real NVIDIA GPUs through NVML, loaded at run time with dlopen (no NVIDIA header or library is
// needed to build). The library is libnvidia-ml.so.1, or the file named by CARMA_NVML_LIBRARY
// (tests point it at a fake NVML they build). A missing library or required entry point is an
// error value, never a crash; newer entry points (energy counter, MPS processes, MIG mode, GPM)
// are optional and their absence only leaves what they give unknown.
//
// Where each metric comes from (the sample's `sources` says so per metric):
// - On Hopper and later, NVML GPM measures SM activity, SM occupancy and DRAM bandwidth
//   utilisation (source nvml-gpm; see nvml_gpm.h).
// - Elsewhere plain NVML has no such counters (DCGM's profiling fields do): SMACT is the
//   utilisation rate and DRAMA the memory-controller utilisation, both proxies (source nvml), and
//   SMOCC is unavailable. Where the GPU reports no utilisation (MIG mode, some boards) all three
//   are unavailable: unknown, never 0.
// Processes are the compute processes and the MPS clients, MPS server processes flagged.
// A GPU that cannot be read reports it in its own sample; the others are sampled as usual.

#include <memory>

#include "device/gpu_backend.h"

namespace carma::device {

inline constexpr const char* kNvmlLibraryEnv = "CARMA_NVML_LIBRARY";

Result<std::unique_ptr<GpuBackend>> open_nvml();

}  // namespace carma::device
