#pragma once
// The one interface the daemon sees GPUs through. Implementations: emulated GPUs (shared state on
// this machine that carma-fakejob processes attach to), NVML (with GPM where the GPU has it) and
// DCGM, both loaded with dlopen. The scheduler only ever sees samples through MetricWindow.
//
// Every metric of a sample says where it came from (core/metric_source.h); one no source can give
// is std::nullopt with source Unavailable: unknown, never 0.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include "core/metric_source.h"
#include "core/result.h"
#include "core/units.h"

namespace carma::device {

struct GpuInfo {
    int index = 0;
    std::string uuid;   // what CUDA_VISIBLE_DEVICES carries
    std::string name;   // "A100-40GB (emulated)", "NVIDIA A100-SXM4-40GB"
    MiB total_mib = 0;  // what processes can allocate
    bool mig_enabled = false;  // MIG mode on: CARMA cannot place on it (not supported yet)
    // Across nodes (`carma agent`): the node it is in and its index there; `index` is then the
    // server's own numbering. "" and == index on a single server.
    std::string node;
    int node_index = 0;
    // Why the backend cannot use this GPU at all (it failed to enumerate: fell off the bus, no
    // permission); empty when it can. Such a GPU keeps its place in the numbering, is marked
    // unhealthy and is left out; the others are scheduled.
    std::string fault;
    bool emulated = false;  // not real hardware: tasks get made-up UUIDs
    // Its character device (/dev/nvidiaN), which a task on other GPUs is fenced off; "" where
    // the backend cannot say (emulated GPUs, DCGM).
    std::string device_file;
};

struct GpuProcess {
    int pid = 0;
    MiB used_mib = 0;         // 0 where the driver will not say (no privilege)
    bool mps_server = false;  // an MPS server process: infrastructure, never a task's
    // 0..1, the share of the GPU's SMs this process kept busy lately (its SM activity); unknown
    // where the backend cannot tell processes apart. Shares the GPU's energy among attempts
    // (core/energy_split.h).
    std::optional<double> activity;
};

struct GpuSample {
    int index = 0;
    MiB free_mib = 0;
    MiB used_mib = 0;
    std::optional<double> util;      // 0..1, GPU utilisation
    std::optional<double> smact;     // 0..1, SM active; from Nvml: the utilisation rate (proxy)
    std::optional<double> smocc;     // 0..1, SM occupancy
    std::optional<double> drama;     // 0..1, DRAM active; from Nvml: memory-controller rate (proxy)
    std::optional<double> power_w;
    std::optional<double> energy_j;  // cumulative since the backend started counting
    MetricSources sources;           // where each of the above came from
    // How old the freshest reading in this sample is, as far as the backend knows (DCGM values
    // carry their own timestamps); the daemon treats a sample older than a few periods as missing.
    double age_s = 0;
    std::vector<GpuProcess> processes;  // MPS servers included, flagged
    std::string error;    // non-empty when this GPU could not be read; the rest is then stale
};

// A file a task needs open read-write to reach the GPUs, handed over by the launcher as an open
// descriptor whose number is in the environment variable `env` (the file itself stays closed to
// the task's user).
struct TaskFile {
    std::string path;
    std::string env;
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
    // Files every task gets an open descriptor of (see TaskFile): the emulated backend's state
    // file, which only the daemon's user may open by name.
    virtual std::vector<TaskFile> task_files() const { return {}; }
};

}  // namespace carma::device
