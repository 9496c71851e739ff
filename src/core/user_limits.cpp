#include "core/user_limits.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace carma {

std::optional<LimitRefusal> check_submission_size(const UserLimits& limits,
                                                  const SubmissionSize& size) {
    if (size.array && limits.max_array_size > 0 && size.tasks > limits.max_array_size) {
        return LimitRefusal{413, "max_array_size",
                            fmt::format("the array has {} members; this daemon takes at most {} "
                                        "per array (limits.max_array_size); split it into "
                                        "several arrays",
                                        size.tasks, limits.max_array_size),
                            std::nullopt};
    }
    if (limits.max_submit_bytes_per_task > 0 && size.task_bytes > limits.max_submit_bytes_per_task) {
        return LimitRefusal{413, "max_submit_bytes_per_task",
                            fmt::format("the task's fields (command line, environment, name, "
                                        "files, dependencies) take {} bytes; this daemon takes "
                                        "at most {} per task (limits.max_submit_bytes_per_task); "
                                        "export fewer variables (--export), pass large arguments "
                                        "in a file, or depend on a whole array (12_*)",
                                        size.task_bytes, limits.max_submit_bytes_per_task),
                            std::nullopt};
    }
    if (limits.max_submit_bytes_per_request > 0 &&
        size.tasks * size.task_bytes > limits.max_submit_bytes_per_request) {
        return LimitRefusal{413, "max_submit_bytes_per_request",
                            fmt::format("the submission would store {} tasks of {} bytes each "
                                        "({} MiB); this daemon takes at most {} MiB per "
                                        "submission (limits.max_submit_bytes_per_request); pass "
                                        "large arguments in a file, export fewer variables "
                                        "(--export) or split the array",
                                        size.tasks, size.task_bytes,
                                        size.tasks * size.task_bytes / (1024 * 1024),
                                        limits.max_submit_bytes_per_request / (1024 * 1024)),
                            std::nullopt};
    }
    if (const std::size_t most = limits.max_gpus_per_user;
        most > 0 && static_cast<std::size_t>(std::max(size.gpus, 1)) > most) {
        return LimitRefusal{422, "max_gpus_per_user",
                            fmt::format("the task asks for {} GPUs but limits.max_gpus_per_user "
                                        "lets one user hold at most {} at once, so it could "
                                        "never start; ask for at most {} (--gpus {})",
                                        size.gpus, most, most, most),
                            std::nullopt};
    }
    return std::nullopt;
}

std::optional<LimitRefusal> check_waiting(const UserLimits& limits, std::size_t waiting,
                                          const SubmissionSize& size) {
    if (limits.max_waiting_per_user == 0 || waiting + size.tasks <= limits.max_waiting_per_user) {
        return std::nullopt;
    }
    return LimitRefusal{429, "max_waiting_per_user",
                        fmt::format("you have {} task(s) waiting and this would add {}; at most "
                                    "{} may wait per user (limits.max_waiting_per_user); submit "
                                    "more once some have started",
                                    waiting, size.tasks, limits.max_waiting_per_user),
                        std::nullopt};
}

std::optional<LimitRefusal> SubmitRate::take(uid_t uid, double now) {
    if (!(limits_.submit_rate_per_user > 0)) {
        return std::nullopt;
    }
    const double burst = std::max(1.0, limits_.submit_burst_per_user);
    auto [it, fresh] = buckets_.try_emplace(uid, Bucket{burst, now});
    Bucket& b = it->second;
    if (!fresh) {
        b.tokens = std::min(burst, b.tokens + std::max(0.0, now - b.at) * limits_.submit_rate_per_user);
        b.at = now;
    }
    if (b.tokens >= 1) {
        b.tokens -= 1;
        return std::nullopt;
    }
    const double wait = (1 - b.tokens) / limits_.submit_rate_per_user;
    return LimitRefusal{429, "submit_rate_per_user",
                        fmt::format("too many submissions: at most {:g} per second per user, {:g} "
                                    "at once (limits.submit_rate_per_user, "
                                    "limits.submit_burst_per_user); retry in {:.1f} s, or submit "
                                    "many tasks as one array (--array)",
                                    limits_.submit_rate_per_user, burst, wait),
                        std::ceil(wait * 10) / 10};
}

void RunningUse::hold(std::span<const int> indices) {
    for (int gpu : indices) {
        gpus += held.insert(gpu).second ? 1 : 0;
    }
}

namespace {

// " (GPUs 0, 2)": which GPUs the count is of; "" when not known.
std::string held_text(const RunningUse& use) {
    std::string out;
    for (int gpu : use.held) {
        out += fmt::format("{}{}", out.empty() ? "" : ", ", gpu);
    }
    return out.empty() ? out : " (GPU" + std::string(use.held.size() > 1 ? "s " : " ") + out + ")";
}

}  // namespace

std::optional<std::string> running_limit(const UserLimits& limits, const std::string& user,
                                         const RunningUse& use, int task_gpus) {
    const std::string who = user.empty() ? std::string("the user") : user;
    const auto gpus = static_cast<std::size_t>(std::max(task_gpus, 1));
    if (limits.max_gpus_per_user > 0 && gpus > limits.max_gpus_per_user) {
        // Refused at submission (check_submission_size); a task queued before the limit was
        // lowered waits for it to rise.
        return fmt::format(
            "it asks for {} GPUs, more than max_gpus_per_user ({}) lets any user "
            "hold: it starts only once the limit is raised",
            gpus, limits.max_gpus_per_user);
    }
    if (limits.max_gpus_per_user > 0 && use.gpus + gpus > limits.max_gpus_per_user) {
        return fmt::format("{} is at max_gpus_per_user: {} GPU(s) in use{}, {} asked, limit {}",
                           who, use.gpus, held_text(use), gpus, limits.max_gpus_per_user);
    }
    if (limits.max_running_per_user > 0 && use.tasks + 1 > limits.max_running_per_user) {
        return fmt::format("{} is at max_running_per_user: {} task(s) running, limit {}", who,
                           use.tasks, limits.max_running_per_user);
    }
    return std::nullopt;
}

}  // namespace carma
