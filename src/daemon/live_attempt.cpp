#include "daemon/live_attempt.h"

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
    live.handle = exec::LaunchHandle{attempt.shim_pid, attempt.dir, attempt.node};
    live.settled = true;
    live.peak_mib = attempt.peak_mib;
    live.energy_j = attempt.energy_j;
    live.learned = task.spec.learned;
    live.exclusive = task.spec.exclusive;
    live.max_slowdown = task.spec.max_slowdown;
    live.requeue = task.spec.requeue;
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

}  // namespace carma::daemon
