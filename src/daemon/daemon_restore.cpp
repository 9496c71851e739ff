// Restart safety (daemon.h): on start, waiting tasks go back to the scheduler and live attempts
// are re-attached to, with the exits that happened while the daemon was away recorded.

#include "daemon/daemon.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"

namespace carma::daemon {

namespace fs = std::filesystem;

Result<void> Daemon::restore() {
    std::lock_guard lock(mu_);
    auto tasks = store_->tasks(/*include_final=*/false);
    if (!tasks) {
        return tl::unexpected(tasks.error());
    }
    auto open = store_->open_attempts();
    if (!open) {
        return tl::unexpected(open.error());
    }
    if (config_.preemption.enabled) {
        restore_preemption_budget();
    }
    std::map<TaskId, store::AttemptRow> open_by_task;
    for (const store::AttemptRow& a : *open) {
        open_by_task[a.task] = a;
    }
    int requeued = 0, reattached = 0;
    for (store::TaskRow& t : *tasks) {
        // History may have grown while it waited (or the row predates schema 3).
        if (Learned fresh = learn(t); !same_learned(fresh, t.spec.learned)) {
            t.spec.learned = std::move(fresh);
            if (auto r = store_->update_task(t); !r) {
                spdlog::warn("task={}: cannot record what was learned of it: {}", t.id,
                             r.error().message);
            }
        }
        switch (t.state) {
            case store::TaskState::Queued:
                // Waiting time counts from submission, across restarts (carma's bounded wait);
                // after a preemption from its end, so that it still waits behind the task it
                // made room for (core/preemption.h).
                if (auto at = preempted_at(t); at && t.spec.dependencies.empty()) {
                    scheduler_.enqueue(t.id, queued_spec(t), clock_of(*at));
                } else {
                    admit_to_queue(t);
                }
                if (config_.preemption.enabled) {
                    restore_room_made(t);
                }
                ++requeued;
                break;
            case store::TaskState::Recovering:
                scheduler_.enqueue_recovery(t.id, queued_spec(t), clock_of(t.submitted_at));
                ++requeued;
                break;
            case store::TaskState::Running: {
                auto it = open_by_task.find(t.id);
                if (it == open_by_task.end()) {
                    // The daemon stopped between the decision and the launch: nothing ran.
                    t.state = store::TaskState::Queued;
                    t.message = "re-queued after a daemon restart (it had not started)";
                    if (auto r = store_->update_task(t); !r) {
                        return tl::unexpected(r.error());
                    }
                    scheduler_.enqueue(t.id, queued_spec(t));
                    ++requeued;
                    break;
                }
                store::AttemptRow& a = it->second;
                bind_correction(t);
                LiveAttempt live = reattached_attempt(t, a, clock_of(a.started_at),
                                                      mps_user_of(t, a.gpus, a.node));
                // A preemption under way when the daemon stopped still queues the task again
                // (its stop is sent again at the first tick: restop_preempted); one being
                // cancelled is never chosen for a preemption.
                if (live.requeue) {
                    const StopUnderWay stop = stop_recorded(*store_, t.id, a.number);
                    live.preempted = stop == StopUnderWay::Preempting;
                    live.stop_requested = stop == StopUnderWay::Cancelling;
                }
                if (!a.node.empty()) {
                    if (hub_) {
                        hub_->expect(a.node, cluster::attempt_name_of(a.dir));
                    } else {
                        spdlog::warn("task={}: attempt {} runs on node {}, but this daemon was "
                                     "started without --agents; it is followed again once the "
                                     "daemon runs with --agents",
                                     t.id, a.number, a.node);
                    }
                    live_[t.id] = live;
                    ++reattached;
                    break;
                }
                if (live.handle.shim_pid == 0) {
                    std::ifstream pidfile(a.dir + "/shim.pid");
                    pidfile >> live.handle.shim_pid;
                }
                // Put back what has not run: recorded, but the launch never happened or was cut
                // short by the daemon's death before the task started (and now never will).
                auto requeue = [&](const char* why) -> Result<void> {
                    if (auto r = requeue_not_started(
                            t, a, fmt::format("re-queued after a daemon restart ({})", why));
                        !r) {
                        return r;
                    }
                    ++requeued;
                    return {};
                };
                if (!fs::exists(a.dir)) {
                    if (auto r = requeue("its launch had not happened"); !r) {
                        return r;
                    }
                    break;
                }
                if (live.handle.shim_pid == 0 && !exec::read_exit(a.dir)) {
                    const exec::InterruptedLaunch settled = exec::settle_interrupted_launch(a.dir);
                    if (!settled.started) {
                        if (auto r = requeue("it was being started and had not started"); !r) {
                            return r;
                        }
                        break;
                    }
                    live.handle.shim_pid = settled.shim_pid;
                }
                live_[t.id] = live;
                ++reattached;
                break;
            }
            default:
                break;
        }
    }
    event(0, "daemon-started",
          fmt::format("policy {} on {}; {} waiting task(s) re-queued, {} running attempt(s) "
                      "re-attached",
                      config_.policy, backend_->name(), requeued, reattached));
    spdlog::info("restored state: {} waiting task(s), {} running attempt(s)", requeued,
                 reattached);
    return {};
}
}  // namespace carma::daemon
