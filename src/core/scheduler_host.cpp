// Scheduler::step's host dimensions (core/host.h, core/scheduler.h): which nodes have room for
// a task's cores and host memory, CPU-only placements, and what a waiting carma head keeps.

#include <algorithm>

#include <fmt/format.h>

#include "core/scheduler.h"

namespace carma {

Result<void> Scheduler::feasible(const TaskSpec& spec, const CapacitySummary& capacity,
                                 MemoryKnowledge knowledge) const {
    if (auto ok = check_feasible(spec, capacity, knowledge); !ok) {
        return ok;
    }
    return check_host_feasible(spec, host_summary_);
}

std::string Scheduler::node_of(std::span<const int> gpus) const {
    if (gpus.empty()) {
        return {};
    }
    for (const GpuView& g : scratch_) {
        if (g.index == gpus.front()) {
            return g.node;
        }
    }
    return {};
}

bool Scheduler::host_ok(const TaskSpec& spec, int host, bool behind_head) const {
    if (host < 0 || !asks_host(spec)) {
        return true;
    }
    const std::vector<HostView>& hosts =
        behind_head && !spare_hosts_.empty() ? spare_hosts_ : hosts_;
    return host_fits(spec, hosts[static_cast<std::size_t>(host)]);
}

int Scheduler::pick_host(const TaskSpec& spec, bool behind_head, std::string* why) const {
    if (hosts_.empty()) {
        return -1;
    }
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
        if (host_ok(spec, static_cast<int>(h), behind_head)) {
            return static_cast<int>(h);
        }
    }
    if (why != nullptr) {
        *why = host_wait(spec, behind_head);
    }
    return kNoHostFits;
}

std::string Scheduler::host_wait(const TaskSpec& spec, bool behind_head) const {
    if (hosts_.empty() || !asks_host(spec)) {
        return {};
    }
    const std::vector<HostView>& hosts =
        behind_head && !spare_hosts_.empty() ? spare_hosts_ : hosts_;
    // A GPU task may start only where its GPUs are: nodes without a GPU do not count for it, and
    // a GPU on a node whose host is not limited always has room.
    const bool on_gpus = spec.gpus > 0;
    if (on_gpus && std::find(gpu_host_.begin(), gpu_host_.end(), -1) != gpu_host_.end()) {
        return {};
    }
    const HostView* closest = nullptr;
    for (std::size_t h = 0; h < hosts.size(); ++h) {
        if (on_gpus && std::find(gpu_host_.begin(), gpu_host_.end(), static_cast<int>(h)) ==
                           gpu_host_.end()) {
            continue;
        }
        if (host_fits(spec, hosts[h])) {
            return {};
        }
        if (closest == nullptr || hosts[h].cpus_free > closest->cpus_free) {
            closest = &hosts[h];
        }
    }
    if (closest == nullptr) {
        return {};  // no node holds its GPUs: the GPU path says what it waits for
    }
    std::string why = host_shortfall(spec, *closest);
    if (behind_head && !spare_hosts_.empty() && host_fits(spec, hosts_[static_cast<std::size_t>(
                                                                     closest - hosts.data())])) {
        why += " once the task ahead has its share";
    }
    return why;
}

void Scheduler::mask_hosts(const TaskSpec& spec, bool behind_head,
                           std::vector<char>& allowed) const {
    if (hosts_.empty() || !asks_host(spec)) {
        return;
    }
    for (std::size_t i = 0; i < allowed.size() && i < gpu_host_.size(); ++i) {
        if (!host_ok(spec, gpu_host_[i], behind_head)) {
            allowed[i] = 0;
        }
    }
}

void Scheduler::reserve_host_for(const TaskSpec& head, std::span<const char> shadow) {
    spare_hosts_.clear();
    if (hosts_.empty() || !asks_host(head)) {
        return;
    }
    spare_hosts_ = hosts_;
    // Where the head will start: its reserved GPUs' node; with none reserved (a CPU-only head,
    // or no start predictable), any node, so each keeps its share.
    std::vector<char> keep(hosts_.size(), 0);
    bool any = false;
    for (std::size_t i = 0; i < shadow.size() && i < gpu_host_.size(); ++i) {
        if (shadow[i] != 0 && gpu_host_[i] >= 0) {
            keep[static_cast<std::size_t>(gpu_host_[i])] = 1;
            any = true;
        }
    }
    for (std::size_t h = 0; h < spare_hosts_.size(); ++h) {
        if (!any || keep[h] != 0) {
            take_host(spare_hosts_[h], head);
        }
    }
}

void Scheduler::commit_host_only(const QueuedTask& task, int host) {
    if (task.spec.gpus == 0 && has_running_limits(config_.limits)) {
        round_use_[task.spec.user].tasks += 1;
    }
    if (host < 0) {
        return;
    }
    const auto h = static_cast<std::size_t>(host);
    take_host(hosts_[h], task.spec);
    if (!spare_hosts_.empty()) {
        take_host(spare_hosts_[h], task.spec);
    }
    ++epoch_;  // what turned a class down may not any more
}

}  // namespace carma
