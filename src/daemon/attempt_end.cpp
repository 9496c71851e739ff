#include "daemon/attempt_end.h"

#include <utility>

#include <fmt/format.h>

#include "core/controls.h"
#include "core/units.h"

namespace carma::daemon {

AttemptEnd attempt_end(const exec::ExitRecord* record, const AttemptWatch& watch) {
    AttemptEnd end;
    if (!record) {
        end.record_missing = true;
        return end;
    }
    end.started = record->started;
    end.exit_code = record->exit_code;
    end.signal = record->signal;
    end.memory_fence_hit = record->memory_fence_hit;
    // A preemption's stop is no cancel: an attempt that ended before it arrived ended as it did.
    end.cancel_requested = record->cancel_requested || (watch.stop_requested && !watch.preempted);
    // After a restart the flag is gone; an attempt stopped once it had run its limit was
    // stopped for it.
    end.time_limit_reached =
        watch.timed_out || (record->cancel_requested && watch.time_limit_s &&
                            record->ended_at - watch.started_unix >= *watch.time_limit_s);
    // Only where the stop reached it (an attempt that ended on its own first ended as it did),
    // and not past its time limit, which ends the task.
    end.preempted = watch.preempted && record->cancel_requested && !end.time_limit_reached;
    return end;
}

std::string how_it_ended(const AttemptEnd& end, const exec::ExitRecord* record) {
    if (!end.started) {
        return record && !record->error.empty() ? record->error : "could not start";
    }
    if (end.memory_fence_hit && record != nullptr) {
        constexpr std::int64_t kMiB = 1024 * 1024;
        const std::string limit = record->memory_limit_bytes
                                      ? format_mib(*record->memory_limit_bytes / kMiB)
                                      : std::string("its limit");
        const std::string peak = record->max_rss_bytes
                                     ? ", peak " + format_mib(*record->max_rss_bytes / kMiB)
                                     : std::string();
        return fmt::format("the kernel stopped it at its host-memory limit of {}{}; ask for more "
                           "with --mem (e.g. --mem {}MiB)",
                           limit, peak,
                           record->memory_limit_bytes ? 2 * (*record->memory_limit_bytes / kMiB)
                                                      : 4096);
    }
    if (end.exit_code) {
        return fmt::format("exit code {}", *end.exit_code);
    }
    if (end.signal) {
        return fmt::format("killed by signal {}", *end.signal);
    }
    return "its supervisor vanished without an exit record";
}

TaskAfterAttempt task_after_attempt(AttemptOutcome outcome, const AttemptEnd& end, std::string how,
                                    int number, int attempts, int max_attempts, bool retry_failures,
                                    const std::optional<std::string>& lost_node,
                                    std::optional<double> time_limit_s, bool recovered) {
    TaskAfterAttempt after;
    const bool retryable = outcome == AttemptOutcome::OutOfMemory ||
                           (outcome == AttemptOutcome::Failed && retry_failures && end.started);
    if (lost_node) {
        // Not the task's doing: it goes back to the queue it came from, whatever its attempts.
        after.state = recovered ? store::TaskState::Recovering : store::TaskState::Queued;
        after.how = "lost with " + *lost_node;
        after.message = fmt::format("attempt {} {}; {}", number, after.how,
                                    recovered ? "relaunching on idle GPUs" : "queued again");
        after.requeue = true;
        return after;
    }
    if (outcome == AttemptOutcome::Preempted) {
        // Not the task's doing either: queued again, its attempts left as they were.
        after.state = store::TaskState::Queued;
        after.how = "stopped for fair share";
        after.message =
            fmt::format("attempt {} was {} (preempted); queued again", number, after.how);
        after.requeue = true;
        return after;
    }
    if (retryable && attempts < max_attempts) {
        after.state = store::TaskState::Recovering;
        after.message = fmt::format("attempt {} {} ({}); relaunching on idle GPUs", number,
                                    outcome == AttemptOutcome::OutOfMemory
                                        ? "ran out of GPU memory"
                                        : "failed",
                                    how);
        after.relaunch = true;
        after.how = std::move(how);
        return after;
    }
    switch (outcome) {
        case AttemptOutcome::Succeeded: after.state = store::TaskState::Succeeded; break;
        case AttemptOutcome::Cancelled: after.state = store::TaskState::Cancelled; break;
        case AttemptOutcome::Lost: after.state = store::TaskState::Lost; break;
        case AttemptOutcome::Timeout: after.state = store::TaskState::Timeout; break;
        default: after.state = store::TaskState::Failed; break;
    }
    if (outcome == AttemptOutcome::Timeout && time_limit_s) {
        how = "stopped at its time limit of " + format_time_limit(*time_limit_s);
    }
    if (outcome == AttemptOutcome::Succeeded) {
        after.message = "succeeded";
    } else if (outcome == AttemptOutcome::Cancelled && how.starts_with("cancelled ")) {
        after.message = fmt::format("{} while attempt {} ran", how, number);  // "cancelled by bob"
    } else {
        after.message = fmt::format("{} after {} attempt(s): {}", to_string(outcome), attempts,
                                    how);
    }
    after.ended = true;
    after.how = std::move(how);
    return after;
}

}  // namespace carma::daemon
