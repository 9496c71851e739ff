// Scheduling controls: hold/release, dependencies (--after) and time limits (--time-limit).
// Held and blocked tasks are queued in the store's sense but kept from the scheduler, so no
// policy needs to know about them.

#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"
#include "daemon/daemon.h"
#include "daemon/daemon_api.h"
#include "daemon/task_json.h"

namespace carma::daemon {


api::ApiResult<void> Daemon::check_dependencies(const std::vector<TaskId>& after) {
    for (TaskId dep : after) {
        auto t = store_->task(dep);
        if (!t) {
            return tl::unexpected(store_error(t.error()));
        }
        if (!*t) {
            return api::api_fail(400, fmt::format("dependency task {} does not exist; "
                                                  "`carma queue --all` lists tasks",
                                                  dep));
        }
    }
    return {};
}

void Daemon::admit_to_queue(const store::TaskRow& task) {
    if (task.spec.after.empty()) {
        scheduler_.enqueue(task.id, queued_spec(task), clock_of(task.submitted_at));
        return;
    }
    blocked_.insert(task.id);
    dependencies_due_ = true;
}

void Daemon::resolve_dependencies() {
    if (!dependencies_due_ || blocked_.empty()) {
        return;
    }
    dependencies_due_ = false;
    // A failure makes its own dependents fail: go round until nothing changes.
    for (bool changed = true; changed;) {
        changed = false;
        std::map<TaskId, std::optional<store::TaskRow>> seen;
        auto state_of = [&](TaskId id) -> const std::optional<store::TaskRow>* {
            auto it = seen.find(id);
            if (it == seen.end()) {
                auto t = store_->task(id);
                if (!t) {
                    return nullptr;  // unreadable now: looked at again later
                }
                it = seen.emplace(id, *t).first;
            }
            return &it->second;
        };
        for (auto it = blocked_.begin(); it != blocked_.end();) {
            auto self = store_->task(*it);
            if (!self || !*self || (*self)->state != store::TaskState::Queued) {
                it = self ? blocked_.erase(it) : std::next(it);  // gone, held or cancelled
                continue;
            }
            store::TaskRow task = **self;
            bool ready = true;
            std::string never;
            for (TaskId dep : task.spec.after) {
                const std::optional<store::TaskRow>* d = state_of(dep);
                if (d == nullptr) {
                    ready = false;
                    dependencies_due_ = true;
                    break;
                }
                if (!*d) {
                    never = fmt::format("dependency task {} no longer exists", dep);
                    break;
                }
                const store::TaskState s = (**d).state;
                if (s == store::TaskState::Succeeded) {
                    continue;
                }
                ready = false;
                if (store::is_final(s)) {
                    never = fmt::format("dependency task {} ended {}", dep, store::to_string(s));
                    break;
                }
            }
            if (!never.empty()) {
                task.state = store::TaskState::Failed;
                task.finished_at = unix_now();
                task.message = never + "; this task never started";
                if (auto r = store_->update_task(task); !r) {
                    spdlog::warn("task={}: cannot record that its dependency failed: {}", task.id,
                                 r.error().message);
                    dependencies_due_ = true;
                    ++it;
                    continue;
                }
                event(task.id, "failed", task.message);
                it = blocked_.erase(it);
                changed = true;
                continue;
            }
            if (ready) {
                task.message = fmt::format("dependencies {} succeeded; queued",
                                           fmt::join(task.spec.after, ", "));
                if (auto r = store_->update_task(task); !r) {
                    spdlog::debug("task={}: cannot record its message: {}", task.id,
                                  r.error().message);
                }
                scheduler_.enqueue(task.id, queued_spec(task), clock_of(task.submitted_at));
                event(task.id, "released", task.message);
                it = blocked_.erase(it);
                continue;
            }
            ++it;
        }
    }
}

void Daemon::enforce_time_limits() {
    const double now_unix = unix_now();
    for (auto& [id, live] : live_) {
        if (!live.time_limit_s || live.timed_out ||
            now_unix - live.started_unix < *live.time_limit_s) {
            continue;
        }
        if (auto r = stop_attempt(live.handle); !r) {
            spdlog::warn("task={}: cannot stop it at its time limit: {}", id, r.error().message);
            continue;  // tried again next tick
        }
        live.timed_out = true;
        live.stop_requested = true;
        event(id, "timeout",
              fmt::format("attempt {} reached its time limit of {}; stopping it (SIGTERM, then "
                          "SIGKILL after {})",
                          live.number, format_time_limit(*live.time_limit_s),
                          format_time_limit(config_.kill_grace_s)));
    }
}

api::ApiResult<nlohmann::json> Daemon::hold_task(const api::Caller& caller, std::int64_t id,
                                                 bool hold) {
    if (caller.read_only) {
        return api::api_fail(403, "TCP clients of this daemon may not hold or release tasks; use "
                                  "the Unix socket or set tcp_run_as");
    }
    std::lock_guard lock(mu_);
    auto task = load_task(id);
    if (!task) {
        return tl::unexpected(task.error());
    }
    if (caller.uid != 0 && caller.uid != task->uid) {
        return api::api_fail(403, fmt::format("task {} belongs to {}; only its owner or root may "
                                              "{} it",
                                              id, task->user, hold ? "hold" : "release"));
    }
    const store::TaskState s = task->state;
    if (hold) {
        if (s == store::TaskState::Held) {
            return api::api_fail(409, fmt::format("task {} is already held; `carma release {}` "
                                                  "lets it run",
                                                  id, id));
        }
        if (s != store::TaskState::Queued) {
            return api::api_fail(409, fmt::format("task {} is {}; only a queued task can be held{}",
                                                  id, store::to_string(s),
                                                  s == store::TaskState::Running
                                                      ? " (`carma cancel` stops a running one)"
                                                      : ""));
        }
        task->state = store::TaskState::Held;
        task->message = fmt::format("held by {}; `carma release {}` lets it run", caller.user, id);
    } else {
        if (s != store::TaskState::Held) {
            return api::api_fail(409, fmt::format("task {} is {}, not held; only a held task can be "
                                                  "released",
                                                  id, store::to_string(s)));
        }
        task->state = store::TaskState::Queued;
        task->message = fmt::format("released by {}", caller.user);
    }
    if (auto r = store_->update_task(*task); !r) {
        return tl::unexpected(store_error(r.error()));
    }
    if (hold) {
        scheduler_.cancel(id);
        blocked_.erase(id);
        waiting_reasons_.erase(id);
    } else {
        admit_to_queue(*task);
    }
    event(id, hold ? "held" : "released", task->message);
    return task_to_json(*task);
}

}  // namespace carma::daemon
