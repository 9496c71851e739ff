// The per-task requests: GET /v1/tasks and /v1/tasks/ID (the environment only to its owner and
// root), cancelling a task (its attempt stopped, or taken from the queue) and reading an
// attempt's logs.

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "daemon/daemon_api.h"
#include "daemon/task_json.h"

namespace carma::daemon {

namespace {

bool may_manage(const api::Caller& caller, const store::TaskRow& task) {
    return !caller.read_only && (caller.uid == 0 || caller.uid == task.uid);
}

// A task's environment often carries tokens and keys: only its owner and root see it; everyone
// else sees the rest of the task (the queue stays public, as squeue's is).
nlohmann::json visible_task_json(const api::Caller& caller, const store::TaskRow& task) {
    nlohmann::json j = task_to_json(task);
    if (caller.uid != 0 && caller.uid != task.uid) {
        j.erase("env");
        j.erase("explicit_env");
    }
    return j;
}

}  // namespace

api::ApiResult<std::string> Daemon::list_tasks(const api::Caller& caller,
                                               const api::TaskListQuery& query) {
    auto tasks = store_->tasks(query.include_final, query.page.after, query.page.limit);
    if (!tasks) {
        return tl::unexpected(store_error(tasks.error()));
    }
    // Read after the tasks: a task listed as running has its attempt by then (an attempt and
    // its task are written in one transaction).
    std::vector<TaskId> ids;
    ids.reserve(tasks->size());
    for (const store::TaskRow& t : *tasks) {
        ids.push_back(t.id);
    }
    auto starts = store_->latest_attempt_starts(ids);
    if (!starts) {
        return tl::unexpected(store_error(starts.error()));
    }
    const std::map<TaskId, std::string> unknown = tasks_on_unreachable_nodes();
    // Under `carma`, each waiting task's priority (fair share, age, nice): the order it waits in.
    std::map<TaskId, double> priorities;
    {
        std::lock_guard lock(mu_);
        const double clock = now();
        for (TaskId id : ids) {
            if (const std::optional<double> p = scheduler_.priority(id, clock)) {
                priorities[id] = *p;
            }
        }
    }
    // One task's JSON tree at a time, appended as text: the peak stays one task plus the answer.
    std::string out = "{\"tasks\":[";
    for (std::size_t i = 0; i < tasks->size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        nlohmann::json j = visible_task_json(caller, (*tasks)[i]);
        const auto start = starts->find((*tasks)[i].id);
        j["started_at"] = start != starts->end() ? nlohmann::json(start->second) : nullptr;
        const auto priority = priorities.find((*tasks)[i].id);
        j["priority"] = priority != priorities.end() ? nlohmann::json(priority->second) : nullptr;
        mark_unknown(j, unknown);
        out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    out += "],\"next\":";
    out += next_page_json(tasks->size(), tasks->empty() ? 0 : tasks->back().id, query.page);
    out += '}';
    return out;
}

api::ApiResult<std::int64_t> Daemon::array_member(const api::Caller&, std::int64_t array_id,
                                                   int index) {
    auto members = store_->array_members(array_id);
    if (!members) {
        return tl::unexpected(store_error(members.error()));
    }
    for (const store::ArrayMemberRow& m : *members) {
        if (m.index == index) {
            return m.id;
        }
    }
    return api::api_fail(404, members->empty()
                                  ? fmt::format("no task {}_{}: {} is not an array's id; `carma "
                                                "queue --all --array` lists arrays' members",
                                                array_id, index, array_id)
                                  : fmt::format("no task {}_{}: array {} has no index {}; `carma "
                                                "queue --all --array` lists its members",
                                                array_id, index, array_id, index));
}

api::ApiResult<nlohmann::json> Daemon::show_task(const api::Caller& caller, std::int64_t id) {
    auto task = load_task(id);
    if (!task) {
        return tl::unexpected(task.error());
    }
    nlohmann::json j = visible_task_json(caller, *task);
    // The copied script, as sbatch's `scontrol write batch_script`: to its owner and root only,
    // since a script may hold what its environment would.
    if (!task->spec.script.empty() && (caller.uid == 0 || caller.uid == task->uid)) {
        j["script"]["text"] = task->spec.script;
    }
    auto attempts = store_->attempts(id);
    if (!attempts) {
        return tl::unexpected(store_error(attempts.error()));
    }
    nlohmann::json list = nlohmann::json::array();
    for (const store::AttemptRow& a : *attempts) {
        list.push_back(attempt_to_json(a));
    }
    j["attempt_list"] = list;
    j["started_at"] = attempts->empty() ? nlohmann::json(nullptr)
                                        : nlohmann::json(attempts->back().started_at);
    {
        std::lock_guard lock(mu_);
        const std::optional<double> priority = scheduler_.priority(task->id, now());
        j["priority"] = priority ? nlohmann::json(*priority) : nlohmann::json(nullptr);
    }
    mark_unknown(j, tasks_on_unreachable_nodes());
    return j;
}

api::ApiResult<nlohmann::json> Daemon::cancel_task(const api::Caller& caller, std::int64_t id) {
    if (auto ok = may_act(caller, "cancel tasks"); !ok) {
        return tl::unexpected(ok.error());
    }
    std::lock_guard lock(mu_);
    auto task = load_task(id);
    if (!task) {
        return tl::unexpected(task.error());
    }
    if (!may_manage(caller, *task)) {
        return api::api_fail(403, fmt::format("task {} belongs to {}; only its owner or root may "
                                              "cancel it",
                                              id, task->user));
    }
    if (store::is_final(task->state)) {
        return api::api_fail(409, fmt::format("task {} has already ended ({})", id,
                                              store::to_string(task->state)));
    }
    if (task->state == store::TaskState::Running) {
        if (auto it = live_.find(id); it != live_.end()) {
            if (auto r = stop_attempt(it->second.handle); !r) {
                return api::api_fail(500, "cannot stop task: " + r.error().message);
            }
            it->second.stop_requested = true;
            it->second.preempted = false;  // the user's cancel wins over a requeue under way
        } else if (auto l = launching_.find(id); l != launching_.end()) {
            l->second = true;  // stopped as soon as its start completes (Daemon::tick)
        }
        task->message = fmt::format("stop requested by {}", caller.user);
        if (auto r = store_->update_task(*task); !r) {
            // The stop itself is under way; only the message could not be kept.
            spdlog::warn("task={}: cannot record the stop request: {}", id, r.error().message);
        }
        event(id, "cancel-requested", task->message);
        return task_to_json(*task);
    }
    scheduler_.cancel(id);
    blocked_.erase(id);
    drop_throttled(id);
    forfeit_room(id, "cancelled");
    dependencies_due_ = true;
    throttle_due_ = true;
    task->state = store::TaskState::Cancelled;
    task->finished_at = unix_now();
    task->message = fmt::format("cancelled by {} before it started", caller.user);
    if (auto r = store_->update_task(*task); !r) {
        return tl::unexpected(store_error(r.error()));
    }
    event(id, "cancelled", task->message);
    mail_about(*task, MailMoment::Ended);
    return task_to_json(*task);
}

api::ApiResult<api::LogSlice> Daemon::task_logs(const api::Caller& caller, std::int64_t id,
                                                bool stderr_stream, int attempt,
                                                std::uint64_t offset) {
    if (auto ok = may_act(caller, "read logs"); !ok) {
        return tl::unexpected(ok.error());
    }
    auto task = load_task(id);
    if (!task) {
        return tl::unexpected(task.error());
    }
    if (!may_manage(caller, *task)) {
        return api::api_fail(403, fmt::format("task {} belongs to {}; only its owner or root may "
                                              "read its logs",
                                              id, task->user));
    }
    api::LogSlice chunk;
    chunk.task_state = std::string(store::to_string(task->state));
    auto attempts = store_->attempts(id);
    if (!attempts) {
        return tl::unexpected(store_error(attempts.error()));
    }
    if (attempts->empty()) {
        return chunk;  // not started yet: no log
    }
    const store::AttemptRow* chosen = &attempts->back();
    if (attempt > 0) {
        chosen = nullptr;
        for (const store::AttemptRow& a : *attempts) {
            if (a.number == attempt) {
                chosen = &a;
            }
        }
        if (!chosen) {
            return api::api_fail(404, fmt::format("task {} has no attempt {} (it has {})", id,
                                                  attempt, attempts->size()));
        }
    }
    // A remote attempt's logs are the server's own copy, streamed in by its agent: a path a node
    // reported is never opened. A local one is the attempt's own file, and never a link a task
    // may have put in its place.
    std::string path;
    if (!chosen->node.empty()) {
        if (!hub_) {
            return chunk;
        }
        path = hub_->log_file(chosen->node, cluster::attempt_name_of(chosen->dir), stderr_stream);
    } else {
        path = chosen->dir + (stderr_stream ? "/stderr.log" : "/stdout.log");
    }
    if (path.empty()) {
        return chunk;
    }
    auto slice = exec::read_slice(path, offset, 1 << 20);
    if (!slice) {
        if (slice.error().code == ErrorCode::Forbidden) {
            return api::api_fail(409, fmt::format("the log of task {}: {}", id,
                                                  slice.error().message));
        }
        return chunk;
    }
    chunk.size = slice->size;
    chunk.text = std::move(slice->data);
    return chunk;
}

}  // namespace carma::daemon
