#pragma once
// The server beside its GPUs: CPU cores and host memory as request dimensions (Slurm's
// `-c/--cpus-per-task` and `--mem`), what each node has of them, and which cores an attempt
// gets. Pure: the daemon fills HostView from its configuration and its running attempts, the
// simulator from its options and its running tasks; Scheduler::step packs every dimension with
// the same code in both.

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/task.h"
#include "core/units.h"

namespace carma {

// The most cores one task may ask for: beyond any server made, far from int's range.
inline constexpr int kMaxCpusPerTask = 4096;

// What one node has for tasks: the admin's reserve for the system and the daemon is not in it.
struct HostView {
    std::string node;  // "" for the one server; the same names as GpuView::node
    int cpus_total = 0;
    int cpus_free = 0;
    MiB mem_total_mib = 0;
    MiB mem_free_mib = 0;
};

// Whether a task asks for any host resource at all: one that asks for none (the simulator's
// traces without those columns) fits anywhere.
inline bool asks_host(const TaskSpec& task) { return task.cpus > 0 || task.host_mem_mib > 0; }

inline bool host_fits(const TaskSpec& task, const HostView& host) {
    return task.cpus <= host.cpus_free && task.host_mem_mib <= host.mem_free_mib;
}

// What the task waits for on this node, naming the dimension and what is free, e.g. "8 cores:
// 6 of 32 free" or "64 GiB of host memory: 20 GiB of 250 GiB free"; "" when it fits.
std::string host_shortfall(const TaskSpec& task, const HostView& host);

// Takes (or, with sign -1, gives back) the task's cores and memory on the node.
void take_host(HostView& host, const TaskSpec& task, int sign = 1);

// The largest node in each dimension, for what can ever fit.
struct HostSummary {
    bool any = false;  // no hosts: host resources are not limited
    int most_cpus = 0;
    MiB most_mem_mib = 0;
    bool several = false;
};
HostSummary summarize_hosts(std::span<const HostView> hosts);

// Whether the task could ever run here: more cores or host memory than any node has is refused
// with the limit named and what to ask for. A task asking for nothing, or no hosts, always fits.
Result<void> check_host_feasible(const TaskSpec& task, const HostSummary& hosts);

// Of `usable` cores (ascending ids), the `n` lowest not in `held`; fewer when not enough are free.
std::vector<int> pick_cores(std::span<const int> usable, const std::set<int>& held, int n);

// Linux's cpu list syntax ("0-3,8,10-11"), as in /sys/devices/system/cpu/online and cpusets;
// the error names the part that is wrong.
Result<std::vector<int>> parse_cpu_list(std::string_view text);
std::string format_cpu_list(std::span<const int> cpus);

}  // namespace carma
