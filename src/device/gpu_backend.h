#pragma once
// The one interface the daemon sees GPUs through. Implementations: emulated GPUs (shared state on
// this machine that carma-fakejob processes attach to) and NVML (loaded with dlopen). The scheduler
// only ever sees samples through MetricWindow.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"

namespace carma::device {

struct GpuInfo {
    int index = 0;
    std::string uuid;   // what CUDA_VISIBLE_DEVICES carries
    std::string name;   // "A100-40GB (emulated)", "NVIDIA A100-SXM4-40GB"
    MiB total_mib = 0;  // what processes can allocate
};

struct GpuProcess {
    int pid = 0;
    MiB used_mib = 0;
};

struct GpuSample {
    int index = 0;
    MiB free_mib = 0;
    MiB used_mib = 0;
    double util = 0;    // 0..1
    double smact = 0;   // 0..1
    double smocc = 0;   // 0..1
    double drama = 0;   // 0..1
    double power_w = 0;
    double energy_j = 0;  // cumulative since the backend started counting
    std::vector<GpuProcess> processes;
    std::string error;    // non-empty when this GPU could not be read; the rest is then stale
};

class GpuBackend {
public:
    virtual ~GpuBackend() = default;
    virtual std::string name() const = 0;  // "emulated:4xA100-40GB", "nvml"
    virtual const std::vector<GpuInfo>& gpus() const = 0;
    virtual Result<std::vector<GpuSample>> sample() = 0;
    // Environment variables a task needs to reach these GPUs (beyond CUDA_VISIBLE_DEVICES): the
    // emulated backend names its state file here.
    virtual std::vector<std::pair<std::string, std::string>> task_environment() const { return {}; }
};

}  // namespace carma::device
