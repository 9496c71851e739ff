#include "daemon/live_attempt.h"

#include <algorithm>
#include <utility>

namespace carma::daemon {

LiveAttempt reattached_attempt(const store::TaskRow& task, const store::AttemptRow& attempt,
                               double started_clock, std::string mps_user) {
    LiveAttempt live;
    live.task = task.id;
    live.array = task.spec.array;
    live.number = attempt.number;
    live.user = task.user;
    live.gpus = attempt.gpus;
    live.host = HeldHost{task.spec.cpus, task.spec.host_mem_mib, attempt.cores};
    live.handle = exec::LaunchHandle{attempt.shim_pid, attempt.dir, attempt.node};
    live.settled = true;
    live.peak_mib = attempt.peak_mib;
    for (const auto& [gpu, mib] : attempt.peak_mib) {
        live.seen_on.insert(gpu);  // seen before the restart: not charged as unseen again
    }
    live.energy_j = attempt.energy_j;
    live.learned = task.spec.learned;
    live.exclusive = task.spec.exclusive;
    live.max_slowdown = task.spec.max_slowdown;
    live.gpu_milli = task.spec.gpu_milli;
    live.requeue = task.spec.requeue;
    live.recovered = attempt.recovered;
    live.nice = task.spec.nice;
    live.charged_gpu_s = attempt.charged_gpu_s.value_or(0);
    live.sharing_known = false;
    live.mps_user = std::move(mps_user);
    live.started_clock = started_clock;
    live.started_unix = attempt.started_at;
    live.time_limit_s = task.spec.time_limit_s;
    live.launch_unconfirmed = !attempt.node.empty() && attempt.shim_pid == 0;
    return live;
}

ResidentView resident_view_of(const LiveAttempt& live) {
    ResidentView r;
    r.task = live.task;
    r.activity = live.learned.activity.value_or(0.6);
    r.need_mib = live.learned.need_mib
                     ? std::optional<MiB>(*live.learned.need_mib + live.learned.margin_mib)
                     : std::nullopt;
    if (live.learned.duration_s) {
        r.expected_end = live.started_clock + *live.learned.duration_s;
    }
    r.exclusive = live.exclusive;
    r.max_slowdown = live.max_slowdown;
    r.gpu_milli = live.gpu_milli;
    return r;
}

std::vector<GpuView> views_with(std::vector<GpuView> views, std::span<const LiveAttempt> placed) {
    for (const LiveAttempt& live : placed) {
        for (GpuView& v : views) {
            if (std::find(live.gpus.begin(), live.gpus.end(), v.index) != live.gpus.end()) {
                v.has_processes = true;
                if (!live.mps_user.empty()) {
                    v.mps_user = live.mps_user;
                }
                v.residents.push_back(resident_view_of(live));
            }
        }
    }
    return views;
}

std::vector<GpuView> views_without(std::vector<GpuView> views, const LiveAttempt& gone,
                                   const std::map<TaskId, LiveAttempt>& live,
                                   const std::vector<GpuState>& gpus) {
    for (GpuView& v : views) {
        const auto before = v.residents.size();
        std::erase_if(v.residents, [&](const ResidentView& r) { return r.task == gone.task; });
        if (v.residents.size() == before) {
            continue;
        }
        // What the monitor will read once its memory is freed.
        if (const auto held = gone.held_now.find(v.index); held != gone.held_now.end()) {
            v.stats.available_mib += held->second;
        }
        // Processes CARMA did not start keep it busy, whatever memory they report.
        const auto idx = static_cast<std::size_t>(v.index);
        v.has_processes = !v.residents.empty() || (idx < gpus.size() && !gpus[idx].foreign.empty());
        v.mps_user.clear();
        for (const ResidentView& r : v.residents) {
            if (const auto other = live.find(r.task);
                other != live.end() && !other->second.mps_user.empty()) {
                v.mps_user = other->second.mps_user;
            }
        }
    }
    return views;
}

}  // namespace carma::daemon
