#pragma once
// What `carma serve` is told about the server beside its GPUs (config section `host:` and the
// top-level `fences:`): the admin's reserve for the system and the daemon, the defaults of a
// task that does not say (Slurm's DefCpuPerTask and DefMemPerCPU), the billing weight of a core,
// and whether tasks run fenced in cgroups. Parsed here so config.cpp only routes to it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/result.h"
#include "core/units.h"

namespace carma::daemon {

struct HostConfig {
    // The first N online cores, and this much host memory, are never handed to tasks.
    int reserved_cores = 1;
    MiB reserved_memory_mib = 1024;
    // A task without -c: this many cores of its own; 0: none of its own, it runs on the shared
    // cores (the reserved ones and those no task holds), as a Kubernetes pod without a CPU
    // request does.
    int default_cpus_per_task = 0;
    // A task without --mem: this much host memory per core it asked for (Slurm's DefMemPerCPU);
    // 0, or a task without cores of its own: it reserves none and is fenced at
    // default_mem_limit.
    MiB default_mem_per_cpu_mib = 0;
    // The fence of a task that reserved no memory; 0: the host's memory less the reserve.
    MiB default_mem_limit_mib = 0;
    // GPU-seconds a CPU-only task is charged per core-second (Slurm's TRESBillingWeights
    // "CPU=..." against "GRES/gpu=1").
    double cpu_billing_weight = 0.0625;
    // Processes (and threads) one attempt may have at once.
    int pids_max = 16384;
    // auto | v1 | v2 | off: the cgroup hierarchy tasks are fenced in; auto finds the one this
    // machine has and refuses to start without one; off runs tasks unfenced, said on each.
    std::string fences = "auto";
    // The subtree the daemon owns: v1, a name under each controller's mount ("carma"); v2, a
    // cgroup directory ("" is carma-tasks beside the daemon's own cgroup, which systemd's
    // Delegate=yes gives it).
    std::string cgroup_root;
};

// Keys of the `host:` section, for config_keys() (without the "host." prefix).
struct HostConfigKey {
    const char* key;
    const char* help;
};
const std::vector<HostConfigKey>& host_config_keys();

// Reads the `host:` section into `out`; errors name the file, the line and the key.
Result<void> parse_host_config(const YAML::Node& v, const std::string& source, HostConfig& out);
// `fences:`
Result<void> parse_fences(const YAML::Node& v, const std::string& source, HostConfig& out);
// The YAML value of "host.KEY" or "fences" as config_yaml writes it; nullopt for other keys.
std::optional<std::string> host_yaml_value(const HostConfig& c, std::string_view key);
// Checks values that parse alone cannot (ranges), naming the key.
Result<void> check_host_config(const HostConfig& c);

}  // namespace carma::daemon
