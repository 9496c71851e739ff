#pragma once
// The daemon's own server beside its GPUs (core/host.h): which cores and how much host memory
// tasks may hold, read once at start; each submission's defaults; what the live attempts hold
// now, as the scheduler's HostView; and which cores an attempt gets.

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/host.h"
#include "core/result.h"
#include "core/task.h"
#include "daemon/host_config.h"

namespace carma::daemon {

struct HostResources {
    std::vector<int> reserved_cores;  // the system's and the daemon's (and the shared pool's)
    std::vector<int> task_cores;      // what tasks may hold as their own, ascending
    MiB memory_mib = 0;               // the host's memory less the reserve
};

// The split of the daemon's cores (its own affinity: a container's cpuset counts) and the host's
// memory by the config. Pure; `cores` ascending.
HostResources split_host(std::vector<int> cores, MiB memory_total_mib, const HostConfig& config);
// Reads them from this machine: sched_getaffinity and /proc/meminfo.
Result<HostResources> read_host_resources(const HostConfig& config);

// A submission's cores and host memory where it did not say (HostConfig's defaults).
void apply_host_defaults(TaskSpec& spec, const HostConfig& config);

// What one attempt holds, live or being launched.
struct HeldHost {
    int cpus = 0;           // cores of its own (its `cores`); 0: it runs on the shared cores
    MiB memory_mib = 0;     // reserved host memory
    std::vector<int> cores;  // its cpuset
};

// The server as the scheduler sees it: tasks' cores and memory, less what `held` holds.
HostView host_view(const HostResources& host, std::span<const HeldHost> held);

// The cores of an attempt that asks for `cpus` of its own: the lowest not held; of one that asks
// none: the shared cores (the reserved ones and those no attempt holds as its own). Empty when
// no core is there to give (an attempt never starts with an empty cpuset).
std::vector<int> attempt_cores(const HostResources& host, std::span<const HeldHost> held,
                               int cpus);

// For messages: "2 cores (4-5)", "the shared cores (0,3)".
std::string cores_text(const HeldHost& held);

// The memory fence of an attempt: what it reserved, else the default limit (0 there: all of
// the tasks' memory).
MiB memory_fence_mib(const HostResources& host, const HostConfig& config, MiB reserved_mib);

}  // namespace carma::daemon
