// The end of an attempt: exits collected from the supervisors (or the nodes' reports), each
// classified and recorded, and its task finished, retried or queued again.

#include "daemon/daemon.h"

#include <signal.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"
#include "core/exit_classify.h"
#include "core/failure_reason.h"
#include "core/oom_report.h"
#include "daemon/attempt_end.h"
#include "exec/proc_tree.h"

namespace carma::daemon {

Result<void> Daemon::requeue_not_started(store::TaskRow& task, store::AttemptRow& attempt,
                                         const std::string& why) {
    attempt.ended_at = unix_now();
    attempt.outcome = "not-started";
    task.state = attempt.recovered ? store::TaskState::Recovering : store::TaskState::Queued;
    task.message = why;
    if (auto r = store_->end_attempt(attempt, task); !r) {
        return r;
    }
    if (attempt.recovered) {
        scheduler_.enqueue_recovery(task.id, queued_spec(task));
    } else {
        scheduler_.enqueue(task.id, queued_spec(task));
    }
    return {};
}

void Daemon::collect_exits() {
    struct Ended {
        TaskId id = 0;
        std::optional<exec::ExitRecord> record;
        std::string tail;
        bool lost = false;
    };
    std::vector<Ended> ended;
    std::vector<TaskId> never_received;  // restored launches their node does not know
    for (auto& [id, live] : live_) {
        const std::string& node = live.handle.node;
        if (node.empty()) {
            if (exec::read_exit(live.handle.attempt_dir) || !exec::shim_alive(live.handle)) {
                // Read again: the shim may have written its record between the two checks.
                ended.push_back(Ended{id, exec::read_exit(live.handle.attempt_dir),
                                      exec::read_tail(live.handle.attempt_dir + "/stderr.log",
                                                64 * 1024),
                                      false});
            }
            continue;
        }
        if (!hub_) {
            continue;
        }
        const cluster::RemoteAttempt a =
            hub_->attempt(node, cluster::attempt_name_of(live.handle.attempt_dir));
        if (a.state == cluster::RemoteAttempt::State::Running ||
            a.state == cluster::RemoteAttempt::State::Ended) {
            live.launch_unconfirmed = false;
        }
        switch (a.state) {
            case cluster::RemoteAttempt::State::Running: break;
            case cluster::RemoteAttempt::State::Ended:
                // Stopped by its agent because the allocation ends, not by anyone here: lost
                // with the node, and queued again.
                ended.push_back(Ended{id, a.exit, a.stderr_tail,
                                      hub_->ending(node) && a.exit && a.exit->cancel_requested &&
                                          !live.stop_requested});
                break;
            case cluster::RemoteAttempt::State::Vanished:
                if (live.launch_unconfirmed && !live.stop_requested) {
                    never_received.push_back(id);
                    break;
                }
                ended.push_back(Ended{id, std::nullopt, a.stderr_tail, hub_->ending(node)});
                break;
            case cluster::RemoteAttempt::State::Unknown:
                if (hub_->lost(node) && live.stop_requested) {
                    // Asked to stop, and its node is gone: it ended as asked, not lost.
                    ended.push_back(Ended{id, exec::ExitRecord{true, std::nullopt, SIGTERM, true,
                                                               unix_now(), ""},
                                          "", false});
                } else if (hub_->lost(node)) {
                    ended.push_back(Ended{id, std::nullopt, "", true});
                }
                break;
        }
    }
    for (const Ended& e : ended) {
        LiveAttempt& live = live_.at(e.id);
        if (auto done = finish_attempt(live, e.record ? &*e.record : nullptr, e.tail, e.lost);
            !done) {
            // Said once, then once a minute of ticks: a full disk must not also flood the log.
            if (live.unstored_ends++ % 60 == 0) {
                spdlog::warn("task={}: {}; tried again every tick", e.id, done.error().message);
            }
            continue;
        }
        if (!live.handle.node.empty() && hub_) {
            hub_->forget(live.handle.node, cluster::attempt_name_of(live.handle.attempt_dir));
        }
        live_.erase(e.id);
    }
    for (TaskId id : never_received) {
        if (auto done = requeue_unreceived(live_.at(id)); !done) {
            spdlog::warn("task={}: {}; tried again next tick", id, done.error().message);
            continue;
        }
        live_.erase(id);
    }
}

// The node reports and does not know the attempt, whose launch the server was waiting on when
// it died: the command never reached the agent, so nothing ran (a launch the agent did receive
// shows in its reports until the server forgets it).
Result<void> Daemon::requeue_unreceived(const LiveAttempt& live) {
    auto task = store_->task(live.task);
    if (!task) {
        return tl::unexpected(task.error());
    }
    auto attempts = store_->attempts(live.task);
    if (!attempts) {
        return tl::unexpected(attempts.error());
    }
    auto attempt = std::find_if(attempts->begin(), attempts->end(), [&](const auto& a) {
        return a.number == live.number;
    });
    if (!task->has_value() || attempt == attempts->end()) {
        return fail(ErrorCode::NotFound,
                    fmt::format("attempt {} of task {} is not in the store", live.number,
                                live.task));
    }
    const std::string why = fmt::format(
        "re-queued: node {} never received attempt {} (the server restarted while launching it)",
        live.handle.node, live.number);
    if (auto r = requeue_not_started(**task, *attempt, why); !r) {
        return r;
    }
    event(live.task, std::string(store::to_string((*task)->state)), why);
    spdlog::info("task={}: {}", live.task, why);
    hub_->forget(live.handle.node, cluster::attempt_name_of(live.handle.attempt_dir));
    return {};
}

Result<void> Daemon::stop_attempt(const exec::LaunchHandle& handle) {
    if (handle.node.empty()) {
        return exec::request_stop(handle);
    }
    if (!hub_) {
        return fail(ErrorCode::Io, fmt::format("the attempt runs on node {}, and this daemon does "
                                               "not listen for agents (--agents)",
                                               handle.node));
    }
    // Queued for the node's agent; delivered when it next reports, however long it was away.
    hub_->stop(handle.node, cluster::attempt_name_of(handle.attempt_dir));
    return {};
}

// The end is stored first and only then acted on: if the store refuses (disk full), the attempt
// stays live, the scheduler still holds the task, and the next tick tries again.
Result<void> Daemon::finish_attempt(const LiveAttempt& live, const exec::ExitRecord* record,
                                    const std::string& stderr_tail, bool node_lost) {
    auto task_r = store_->task(live.task);
    if (!task_r) {
        return fail(task_r.error().code,
                    "its attempt ended but the task cannot be read: " + task_r.error().message);
    }
    if (!*task_r) {
        spdlog::error("task={} ended but is not in the store", live.task);
        scheduler_.task_exited(live.task);
        return {};
    }
    store::TaskRow task = **task_r;
    const AttemptEnd end =
        attempt_end(record, AttemptWatch{live.stop_requested, live.timed_out, live.preempted,
                                         live.time_limit_s, live.started_unix});
    if (end.record_missing && live.handle.node.empty()) {
        // The supervisor died without a record (e.g. SIGKILL); its task may still run unwatched.
        // (On a node, its agent does the same.)
        // Its group, and ranks that left it (the supervisor that would have killed them is gone);
        // only processes still marked as this attempt's, since the pgid may have been reused.
        if (auto pgid = exec::task_pgid(live.handle.attempt_dir); pgid && *pgid > 1) {
            for (pid_t p : exec::task_processes(exec::read_process_table(), *pgid)) {
                if (exec::carries_attempt(p, live.task, live.number)) {
                    ::kill(p, SIGKILL);
                }
            }
        }
        // Its cgroup too, and whatever is left in it (the supervisor would have removed it).
        if (auto gone = discard_attempt_fence(fences_, live.task, live.number); !gone) {
            spdlog::warn("task={}: {}", live.task, gone.error().message);
        }
    }
    const AttemptOutcome outcome =
        node_lost ? AttemptOutcome::Lost : classify_attempt(end, stderr_tail);
    // A run that dies of out-of-memory within a second or two may never be sampled holding its
    // memory (on an H200 under MPS one was seen at 14 MiB; its error said 4.03 GiB): what its
    // framework's error says it held counts too, so it is not "unobserved" and its relaunch
    // plans from the real figure.
    std::map<int, MiB> peak_mib = live.peak_mib;
    if (outcome == AttemptOutcome::OutOfMemory) {
        peak_mib = raise_by_reported(std::move(peak_mib), live.gpus,
                                     reported_oom_usage(stderr_tail));
    }

    auto attempts = store_->attempts(task.id);
    if (!attempts) {
        return fail(attempts.error().code,
                    "cannot read its attempts: " + attempts.error().message);
    }
    std::optional<store::AttemptRow> ended;
    for (const store::AttemptRow& a : *attempts) {
        if (a.number == live.number) {
            ended = a;
            ended->ended_at = record && record->ended_at > 0 ? record->ended_at : unix_now();
            ended->peak_mib = peak_mib;
            ended->energy_j = live.energy_j;
            ended->charged_gpu_s = live.charged_gpu_s;
            ended->outcome = std::string(to_string(outcome));
            ended->exit_code = end.exit_code;
            ended->signal = end.signal;
            constexpr std::int64_t kMiB = 1024 * 1024;
            if (record != nullptr && record->cpu_s) {
                ended->total_cpu_s = record->cpu_s;
            }
            if (record != nullptr && record->max_rss_bytes) {
                ended->max_rss_mib = *record->max_rss_bytes / kMiB;
            }
        }
    }
    if (ended && end.started && outcome == AttemptOutcome::Succeeded) {
        ended->slowdown = observed_slowdown(task, *ended, live);
    }
    // Before learn() below: an out-of-memory end raises the lower bound the relaunch plans with.
    // Recording the same attempt again (a retried end) replaces its row.
    if (ended && end.started) {
        record_history(task, *ended, live);
    }

    std::optional<std::string> lost_node;
    if (node_lost) {
        const std::string job = hub_ ? hub_->slurm_job(live.handle.node) : std::string();
        lost_node = fmt::format("node {}{}", live.handle.node,
                                job.empty() ? "" : " (Slurm job " + job + " ended)");
    }
    std::string how = how_it_ended(end, record);
    // The task's own words for why it failed ("ModuleNotFoundError: ..."), so that the queue,
    // `show`, `acct`, `top` and the page say it; before, they said "exit code 2" and the reason
    // was only in `carma logs --stderr`.
    if (end.started &&
        (outcome == AttemptOutcome::Failed || outcome == AttemptOutcome::OutOfMemory)) {
        if (const std::string why = last_meaningful_line(stderr_tail); !why.empty()) {
            how += ": " + why;
        }
        if (const std::string fenced = fence_denial(stderr_tail);
            !fenced.empty() && fences_.enabled()) {
            how += " (" + fenced + ")";
        }
    }
    if (outcome == AttemptOutcome::Cancelled) {
        // As Slurm's "CANCELLED by UID": who stopped it (the cancel left its name in the
        // message), not the status SIGTERM left behind ("exit code 143").
        constexpr std::string_view kBy = "stop requested by ";
        how = task.message.starts_with(kBy)
                  ? fmt::format("cancelled by {}", task.message.substr(kBy.size()))
                  : std::string("cancelled on request");
    }
    // Preempted attempts were CARMA's doing: they use up none of the task's attempts.
    const auto preempted_before = static_cast<int>(
        std::count_if(attempts->begin(), attempts->end(), [&](const store::AttemptRow& a) {
            return a.number != live.number && a.outcome == to_string(AttemptOutcome::Preempted);
        }));
    const TaskAfterAttempt after = task_after_attempt(
        outcome, end, std::move(how), live.number, task.attempts - preempted_before,
        task.max_attempts, config_.retry_failures, lost_node, live.time_limit_s, live.recovered);
    if (after.relaunch) {
        task.spec.learned = learn(task);  // an out-of-memory crash has just raised its lower bound
    }
    task.state = after.state;
    task.message = after.message;
    if (after.ended) {
        task.finished_at = unix_now();
        dependencies_due_ = true;
        throttle_due_ = true;
    }
    // The attempt's end and the task's new state in one transaction: apart, a daemon killed
    // between them would leave a running task without an open attempt, which a restart re-queues
    // (and so runs twice).
    auto stored = ended ? store_->end_attempt(*ended, task) : store_->update_task(task);
    if (!stored) {
        return fail(stored.error().code, fmt::format("cannot record that attempt {} ended: {}",
                                                     live.number, stored.error().message));
    }
    scheduler_.task_exited(live.task);
    if (after.requeue && after.state == store::TaskState::Recovering) {
        scheduler_.enqueue_recovery(task.id, queued_spec(task));
    } else if (after.requeue) {
        scheduler_.enqueue(task.id, queued_spec(task));
    } else if (after.relaunch) {
        scheduler_.enqueue_recovery(task.id, queued_spec(task));
    }
    if (outcome == AttemptOutcome::OutOfMemory) {
        ++oom_total_;
        for (int g : live.gpus) {
            ++oom_by_gpu_[g];
        }
    }
    if (ended) {
        run_seconds_.observe(*ended->ended_at - ended->started_at);
    }
    // --mail-type REQUEUE: a relaunch after a crash, and a preemption's requeue.
    if (after.ended || after.relaunch || outcome == AttemptOutcome::Preempted) {
        mail_about(task, after.ended ? MailMoment::Ended : MailMoment::Relaunched);
    }
    event(task.id,
          node_lost                                ? "lost"
          : outcome == AttemptOutcome::OutOfMemory ? "oom"
          : outcome == AttemptOutcome::HostOutOfMemory ? "host-oom"
          : outcome == AttemptOutcome::Preempted   ? "preempted"
                                                   : "exited",
          fmt::format("attempt {}: {} ({})", live.number, to_string(outcome), after.how));
    return {};
}
}  // namespace carma::daemon
