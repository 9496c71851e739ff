#pragma once
// Chooses the GPU backend from --gpus: `emulated:4xA100-40GB`, `dcgm`, `nvml`, or `auto`: DCGM
// (SM activity, occupancy and DRAM activity measured), else NVML (with GPM on Hopper and later,
// else utilisation proxies), else, only where no NVIDIA driver is meant to be (see
// nvidia_driver_expected), emulated 4xA100-40GB. Where a driver is meant to be and neither
// library works, `auto` is an error naming the library's error and what to do: real jobs must
// never run on emulated GPUs with made-up UUIDs. The choice and why is logged.
//
// The daemon (`carma serve`) and the node agent (`carma agent`) both open their GPUs here, so it
// sits below both.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "device/gpu_backend.h"

namespace carma::device {

// What chooses and configures the backend: the daemon's and the agent's --gpus and the options
// that go with it.
struct BackendChoice {
    std::string gpus = "auto";  // auto | dcgm | nvml | emulated[:4xA100-40GB]
    std::string dcgm_host;      // a running nv-hostengine (HOST[:PORT]); empty = embedded
    // Emulated GPUs only: how collocated jobs share a GPU, and what they really do
    // (model/world.h).
    std::string sharing = "mps";
    std::string world = "model";
    double world_bias = 0;
    double world_noise = 0;
    std::string state_dir;  // the emulated GPUs' file is kept here
};

// Where to look for signs of an NVIDIA driver. Tests point `root` at a directory of their own
// and `loads` at a stub.
struct DriverProbe {
    std::string root = "/";    // /dev/nvidiactl and /proc/driver/nvidia are looked for under it
    std::string nvml_library;  // CARMA_NVML_LIBRARY's value ("" when unset)
    std::string dcgm_library;  // CARMA_DCGM_LIBRARY's value
    // Whether the library of this name loads (dlopen); unset: never.
    std::function<bool(const std::string&)> loads;
};

// The probe of this machine: "/", the two variables and dlopen.
DriverProbe driver_probe_from_environment();

// Why an NVIDIA driver is meant to be here ("/dev/nvidiactl exists", "CARMA_NVML_LIBRARY names
// X"), or "" when nothing says so: /dev/nvidiactl or /proc/driver/nvidia exists, a library is
// named by CARMA_NVML_LIBRARY or CARMA_DCGM_LIBRARY, or libnvidia-ml.so.1 loads.
std::string nvidia_driver_expected(const DriverProbe& probe);

// `attempts_running`: attempts of the store whose supervisors still run; while any does, a damaged
// emulated-GPU file is an error instead of being re-initialised (EmulatorOptions).
Result<std::unique_ptr<GpuBackend>> open_backend(const BackendChoice& choice, int attempts_running);
// The same with the driver probe given (tests).
Result<std::unique_ptr<GpuBackend>> open_backend(const BackendChoice& choice, int attempts_running,
                                                 const DriverProbe& probe);

// Why CARMA leaves this GPU alone, or "" when it uses it: a pattern of `exclude_gpus` matches
// its index, its UUID, or its name (shell wildcards), MIG mode is on (not supported yet), or the
// backend could not enumerate it (GpuInfo::fault; it is then unhealthy).
std::string exclusion_reason(const GpuInfo& gpu, const std::vector<std::string>& patterns);

// An error naming every GPU and why it is left out, when none is left to schedule on.
Result<void> check_some_gpu_usable(const std::vector<GpuInfo>& gpus,
                                   const std::vector<std::string>& patterns);

// "SMACT dcgm, SMOCC dcgm, DRAMA dcgm, util dcgm, power dcgm, memory dcgm" for one sample.
std::string describe_sources(const GpuSample& sample);

}  // namespace carma::device
