// Scheduling controls: hold/release, dependencies (--after, --dependency) and time limits
// (--time-limit).
// Held and blocked tasks are queued in the store's sense but kept from the scheduler, so no
// policy needs to know about them.

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"
#include "core/dependency.h"
#include "daemon/daemon.h"
#include "daemon/daemon_api.h"
#include "daemon/task_json.h"

namespace carma::daemon {


namespace {

TargetEnd target_end(store::TaskState s) {
    if (s == store::TaskState::Succeeded) {
        return TargetEnd::Succeeded;
    }
    return store::is_final(s) ? TargetEnd::Unsuccessful : TargetEnd::NotYet;
}

// The label a never-satisfied dependency's message names: the task that decided it, as views
// write ids ("12", "13_4").
std::string decided_label(const Dependency& d, const std::vector<store::ArrayMemberRow>& members,
                          std::size_t at) {
    if (d.on.plain()) {
        return fmt::format("task {}", d.on.id);
    }
    return fmt::format("task {}_{}", d.on.id, members[at].index);
}

}  // namespace

api::ApiResult<std::vector<Dependency>> Daemon::check_dependencies(std::vector<Dependency> deps,
                                                                   const store::TaskRow& task,
                                                                   bool is_array) {
    const auto singleton = std::find_if(deps.begin(), deps.end(), [](const Dependency& d) {
        return d.type == DependencyType::Singleton;
    });
    if (singleton != deps.end()) {
        if (is_array) {
            return api::api_fail(400, "singleton with an array: its members share one name, and "
                                      "would not wait for each other; submit the runs one by one "
                                      "with singleton, or the array without it");
        }
        std::erase_if(deps,
                      [](const Dependency& d) { return d.type == DependencyType::Singleton; });
        // Slurm: it starts once every earlier task of the same user and name has ended. Those
        // are known now; the ones submitted later wait for this one in their turn.
        constexpr std::size_t kPage = 1000;
        TaskId after = 0;
        for (;;) {
            auto page = store_->tasks(false, after, kPage);
            if (!page) {
                return tl::unexpected(store_error(page.error()));
            }
            for (const store::TaskRow& t : *page) {
                const Dependency on{DependencyType::AfterAny, TaskRef::of(t.id)};
                if (t.uid == task.uid && t.spec.name == task.spec.name &&
                    std::find(deps.begin(), deps.end(), on) == deps.end()) {
                    deps.push_back(on);
                }
            }
            if (page->size() < kPage) {
                break;
            }
            after = page->back().id;
        }
    }
    for (Dependency& d : deps) {
        const std::string label = format_task_ref(d.on);
        if (d.on.plain()) {
            auto t = store_->task(d.on.id);
            if (!t) {
                return tl::unexpected(store_error(t.error()));
            }
            if (!*t) {
                return api::api_fail(400, fmt::format("dependency task {} does not exist; "
                                                      "`carma queue --all` lists tasks",
                                                      label));
            }
            // As Slurm reads afterok:ARRAY_ID: the array's id stands for every member.
            const std::optional<ArrayMember>& array = (**t).spec.array;
            d.on.whole_array = array && array->id == d.on.id;
            continue;
        }
        auto members = store_->array_members(d.on.id);
        if (!members) {
            return tl::unexpected(store_error(members.error()));
        }
        const bool found =
            d.on.whole_array ? !members->empty()
                             : std::any_of(members->begin(), members->end(),
                                           [&](const store::ArrayMemberRow& m) {
                                               return m.index == *d.on.array_index;
                                           });
        if (!found) {
            return api::api_fail(400, fmt::format("dependency {} does not exist: {}; `carma "
                                                  "queue --all --array` lists arrays' members",
                                                  label,
                                                  members->empty()
                                                      ? fmt::format("{} is not an array", d.on.id)
                                                      : fmt::format("array {} has no index {}",
                                                                    d.on.id, *d.on.array_index)));
        }
    }
    return deps;
}

void Daemon::admit_to_queue(const store::TaskRow& task) {
    if (task.spec.dependencies.empty()) {
        enqueue_free(task);
        return;
    }
    blocked_.insert(task.id);
    dependencies_due_ = true;
}

void Daemon::enqueue_free(const store::TaskRow& task) {
    if (task.spec.array && task.spec.array->max_running > 0) {
        Throttled& t = throttled_[task.spec.array->id];
        t.max_running = task.spec.array->max_running;
        t.held.push_back(HeldMember{task.id, task.spec.array->index});
        throttle_due_ = true;
        return;
    }
    scheduler_.enqueue(task.id, queued_spec(task), clock_of(task.submitted_at));
}

bool Daemon::drop_throttled(TaskId id) {
    for (auto it = throttled_.begin(); it != throttled_.end(); ++it) {
        auto& held = it->second.held;
        const auto m = std::find_if(held.begin(), held.end(),
                                    [&](const HeldMember& h) { return h.id == id; });
        if (m != held.end()) {
            held.erase(m);
            if (held.empty()) {
                throttled_.erase(it);
            }
            return true;
        }
    }
    return false;
}

void Daemon::release_throttled() {
    if (!throttle_due_ || throttled_.empty()) {
        return;
    }
    throttle_due_ = false;
    for (auto it = throttled_.begin(); it != throttled_.end();) {
        const TaskId array_id = it->first;
        std::vector<HeldMember>& held = it->second.held;
        auto members = store_->array_members(array_id);
        if (!members) {
            throttle_due_ = true;  // looked at again next tick
            ++it;
            continue;
        }
        // Active: let in and not yet ended (waiting in the scheduler, running, relaunching).
        std::set<TaskId> waiting_here;
        for (const HeldMember& h : held) {
            waiting_here.insert(h.id);
        }
        std::size_t active = 0;
        for (const store::ArrayMemberRow& m : *members) {
            const bool live = m.state == store::TaskState::Queued ||
                              m.state == store::TaskState::Recovering ||
                              m.state == store::TaskState::Running;
            if (live && !waiting_here.contains(m.id) && !blocked_.contains(m.id)) {
                ++active;
            }
        }
        for (TaskId id : members_to_admit(it->second.max_running, active, held)) {
            std::erase_if(held, [&](const HeldMember& h) { return h.id == id; });
            auto row = store_->task(id);
            if (!row || !*row || (**row).state != store::TaskState::Queued) {
                continue;  // gone, held or ended meanwhile
            }
            store::TaskRow& task = **row;
            if (task.message == throttle_reason(it->second.max_running)) {
                task.message = "queued (a slot of its array is free)";
                if (auto r = store_->update_task(task); !r) {
                    spdlog::debug("task={}: cannot record its message: {}", id, r.error().message);
                }
            }
            scheduler_.enqueue(id, queued_spec(task), clock_of(task.submitted_at));
        }
        it = held.empty() ? throttled_.erase(it) : std::next(it);
    }
}

std::optional<DependencyJudgement> Daemon::judge(const Dependency& d, std::string& never) {
    std::vector<TargetEnd> ends;
    std::vector<store::ArrayMemberRow> members;
    if (d.on.plain()) {
        auto t = store_->task(d.on.id);
        if (!t) {
            return std::nullopt;  // unreadable now: looked at again later
        }
        if (!*t) {
            never = fmt::format("dependency task {} no longer exists", d.on.id);
            return DependencyJudgement{DependencyVerdict::Never, {}};
        }
        members.push_back({d.on.id, 0, (**t).state});
    } else {
        auto all = store_->array_members(d.on.id);
        if (!all) {
            return std::nullopt;
        }
        for (const store::ArrayMemberRow& m : *all) {
            if (d.on.whole_array || m.index == d.on.array_index) {
                members.push_back(m);
            }
        }
        if (members.empty()) {
            never = fmt::format("dependency {} no longer exists", format_task_ref(d.on));
            return DependencyJudgement{DependencyVerdict::Never, {}};
        }
    }
    for (const store::ArrayMemberRow& m : members) {
        ends.push_back(target_end(m.state));
    }
    const DependencyJudgement j = judge_dependency(d.type, ends);
    if (j.verdict == DependencyVerdict::Never) {
        never = j.decided_by
                    ? fmt::format("dependency {} ended {}", decided_label(d, members, *j.decided_by),
                                  store::to_string(members[*j.decided_by].state))
                    : fmt::format("dependency {} succeeded, and {} waits for one that did not",
                                  d.on.plain() ? fmt::format("task {}", d.on.id)
                                               : format_task_ref(d.on),
                                  format_dependency(d));
    }
    return j;
}

void Daemon::resolve_dependencies() {
    if (!dependencies_due_ || blocked_.empty()) {
        return;
    }
    dependencies_due_ = false;
    // A failure makes its own dependents fail: go round until nothing changes.
    for (bool changed = true; changed;) {
        changed = false;
        // Many tasks may wait for one array: each dependency is looked up once a round.
        std::map<std::string, std::pair<std::optional<DependencyJudgement>, std::string>> seen;
        for (auto it = blocked_.begin(); it != blocked_.end();) {
            auto self = store_->task(*it);
            if (!self || !*self || (*self)->state != store::TaskState::Queued) {
                it = self ? blocked_.erase(it) : std::next(it);  // gone, held or cancelled
                continue;
            }
            store::TaskRow task = **self;
            bool ready = true;
            std::string never;
            for (const Dependency& dep : task.spec.dependencies) {
                const std::string key = format_dependency(dep);
                auto found = seen.find(key);
                if (found == seen.end()) {
                    std::string why;
                    auto j = judge(dep, why);
                    found = seen.emplace(key, std::pair{j, why}).first;
                }
                const std::optional<DependencyJudgement>& j = found->second.first;
                never = found->second.second;
                if (!j) {
                    ready = false;
                    dependencies_due_ = true;
                    break;
                }
                if (j->verdict == DependencyVerdict::Never) {
                    break;
                }
                ready = ready && j->verdict == DependencyVerdict::Satisfied;
            }
            if (!never.empty()) {
                // As CARMA ends a task whose dependency failed: Slurm's DependencyNeverSatisfied,
                // but ended with the reason instead of left pending for someone to notice.
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
                mail_about(task, MailMoment::Ended);
                it = blocked_.erase(it);
                changed = true;
                continue;
            }
            if (ready) {
                std::vector<std::string> names;
                for (const Dependency& dep : task.spec.dependencies) {
                    names.push_back(format_dependency(dep));
                }
                task.message = fmt::format("dependencies {} hold; queued", fmt::join(names, ", "));
                if (auto r = store_->update_task(task); !r) {
                    spdlog::debug("task={}: cannot record its message: {}", task.id,
                                  r.error().message);
                }
                enqueue_free(task);
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
        forfeit_room(id, "held");
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
        drop_throttled(id);
        throttle_due_ = true;  // a member let in and now held frees its array's slot
        waiting_reasons_.erase(id);
    } else {
        admit_to_queue(*task);
    }
    event(id, hold ? "held" : "released", task->message);
    return task_to_json(*task);
}

}  // namespace carma::daemon
