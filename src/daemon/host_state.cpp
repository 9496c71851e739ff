#include "daemon/host_state.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace carma::daemon {

HostResources split_host(std::vector<int> cores, MiB memory_total_mib, const HostConfig& config) {
    HostResources h;
    std::sort(cores.begin(), cores.end());
    const auto reserved =
        std::min(cores.size(), static_cast<std::size_t>(std::max(config.reserved_cores, 0)));
    h.reserved_cores.assign(cores.begin(), cores.begin() + static_cast<std::ptrdiff_t>(reserved));
    h.task_cores.assign(cores.begin() + static_cast<std::ptrdiff_t>(reserved), cores.end());
    h.memory_mib = std::max<MiB>(0, memory_total_mib - config.reserved_memory_mib);
    return h;
}

Result<HostResources> read_host_resources(const HostConfig& config) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) {
        return fail(ErrorCode::Io, "cannot read the daemon's CPU affinity (sched_getaffinity)");
    }
    std::vector<int> cores;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) {
            cores.push_back(c);
        }
    }
    std::ifstream meminfo("/proc/meminfo");
    std::string line;
    MiB total = 0;
    while (std::getline(meminfo, line)) {
        if (line.rfind("MemTotal:", 0) == 0) {
            std::istringstream in(line.substr(9));
            long long kib = 0;
            in >> kib;
            total = static_cast<MiB>(kib / 1024);
        }
    }
    if (total <= 0) {
        return fail(ErrorCode::Io, "cannot read the host's memory (MemTotal in /proc/meminfo)");
    }
    return split_host(std::move(cores), total, config);
}

void apply_host_defaults(TaskSpec& spec, const HostConfig& config) {
    if (spec.cpus == 0) {
        spec.cpus = config.default_cpus_per_task;
    }
    if (spec.host_mem_mib == 0 && spec.cpus > 0) {
        spec.host_mem_mib = config.default_mem_per_cpu_mib * spec.cpus;
    }
}

HostView host_view(const HostResources& host, std::span<const HeldHost> held) {
    HostView v;
    v.cpus_total = static_cast<int>(host.task_cores.size());
    v.cpus_free = v.cpus_total;
    v.mem_total_mib = host.memory_mib;
    v.mem_free_mib = host.memory_mib;
    for (const HeldHost& h : held) {
        v.cpus_free -= h.cpus;
        v.mem_free_mib -= h.memory_mib;
    }
    return v;
}

std::vector<int> attempt_cores(const HostResources& host, std::span<const HeldHost> held,
                               int cpus) {
    std::set<int> taken;
    for (const HeldHost& h : held) {
        if (h.cpus > 0) {
            taken.insert(h.cores.begin(), h.cores.end());
        }
    }
    if (cpus > 0) {
        std::vector<int> own = pick_cores(host.task_cores, taken, cpus);
        return static_cast<int>(own.size()) == cpus ? own : std::vector<int>{};
    }
    std::vector<int> shared = host.reserved_cores;
    for (const int c : host.task_cores) {
        if (!taken.contains(c)) {
            shared.push_back(c);
        }
    }
    std::sort(shared.begin(), shared.end());
    return shared;
}

std::string cores_text(const HeldHost& held) {
    const std::string list =
        held.cores.empty() ? std::string() : " (" + format_cpu_list(held.cores) + ")";
    if (held.cpus > 0) {
        return fmt::format("{} core{}{}", held.cpus, held.cpus == 1 ? "" : "s", list);
    }
    return "the shared cores" + list;
}

MiB memory_fence_mib(const HostResources& host, const HostConfig& config, MiB reserved_mib) {
    if (reserved_mib > 0) {
        return reserved_mib;
    }
    return config.default_mem_limit_mib > 0 ? config.default_mem_limit_mib : host.memory_mib;
}

}  // namespace carma::daemon
