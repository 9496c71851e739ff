// The daemon's answers to API requests (api::Service). Each takes the daemon's lock only for the
// short time it reads or changes shared state.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/fingerprint.h"
#include "core/text.h"
#include "daemon/daemon.h"
#include "daemon/estimate.h"
#include "daemon/task_json.h"
#include "exec/as_user.h"

namespace carma::daemon {

namespace {

// The nodes' controls (drain, give up): root or the daemon's own user.
api::ApiResult<void> may_control_nodes(const api::Caller& caller, const char* what) {
    if (!caller.read_only && (caller.uid == 0 || caller.uid == ::geteuid())) {
        return {};
    }
    return api::api_fail(403, fmt::format("only root or the daemon's own user may {}", what));
}

bool may_manage(const api::Caller& caller, const store::TaskRow& task) {
    return !caller.read_only && (caller.uid == 0 || caller.uid == task.uid);
}

// A TCP client of a root daemon acts as tcp_run_as; without it, as nobody who may act.
api::ApiResult<void> may_act(const api::Caller& caller, const char* what) {
    if (!caller.read_only) {
        return {};
    }
    return api::api_fail(403, fmt::format("TCP clients of this daemon may not {}: it runs as "
                                          "root and tcp_run_as is not set; set tcp_run_as "
                                          "(--tcp-run-as USER) to the unprivileged user that "
                                          "TCP-submitted tasks run as, or use the Unix socket",
                                          what));
}

// Where the command may be: itself when it names a path (relative to the working directory),
// else each directory of the PATH it will run with.
std::vector<std::string> command_candidates(const std::string& command,
                                            const std::string& path_list,
                                            const std::string& workdir) {
    if (command.find('/') != std::string::npos) {
        return {command.front() == '/' ? command : workdir + "/" + command};
    }
    std::vector<std::string> out;
    for (const std::string& dir : split_list(path_list, ':')) {
        if (!dir.empty()) {
            out.push_back(dir + "/" + command);
        }
    }
    return out;
}

api::ApiError store_error(const Error& e) { return api::ApiError{500, e.message}; }

api::ApiError limit_error(const LimitRefusal& r) {
    return api::ApiError{r.status, r.message, r.retry_after_s};
}

}  // namespace

api::ApiResult<void> Daemon::admit(const api::Caller& caller) {
    if (caller.via_tcp || ::geteuid() == 0 || caller.uid == ::geteuid()) {
        return {};
    }
    return api::api_fail(403, fmt::format("this CARMA daemon runs as uid {} and serves only that "
                                          "user; ask its owner or use a daemon running as root",
                                          ::geteuid()));
}

api::ApiResult<store::TaskRow> Daemon::load_task(std::int64_t id) {
    auto t = store_->task(id);
    if (!t) {
        return tl::unexpected(store_error(t.error()));
    }
    if (!*t) {
        return api::api_fail(404, fmt::format("no task with id {}; `carma queue --all` lists "
                                              "tasks",
                                              id));
    }
    return **t;
}

api::ApiResult<store::TaskRow> Daemon::parse_submission(const api::Caller& caller,
                                                        store::TaskRow parsed) {
    store::TaskRow t = std::move(parsed);
    t.uid = caller.uid;
    t.gid = caller.gid;
    t.user = caller.user;
    t.submitted_at = unix_now();
    if (t.state != store::TaskState::Held) {
        t.state = store::TaskState::Queued;
    }
    if (t.max_attempts == 0) {
        t.max_attempts = config_.max_attempts;
    }
    std::vector<GpuCapacity> caps;
    for (const device::GpuInfo& g : backend_->gpus()) {
        caps.push_back(GpuCapacity{g.index, g.total_mib});
    }
    // Across nodes, none may have reported yet: what fits is decided once they have.
    auto ok = caps.empty() && hub_ ? Result<void>{} : check_feasible(t.spec, caps);
    if (!ok) {
        return api::api_fail(ok.error().code == ErrorCode::Infeasible ? 422 : 400,
                             ok.error().message);
    }
    // The PATH the task will run with: the Python environment's bin first, as activation does.
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& [k, v] : t.env) {
        if (k == "PATH") {
            path = v;
        }
    }
    const std::string& env_prefix = !t.spec.conda.empty() ? t.spec.conda : t.spec.venv;
    const std::string env_bin = env_prefix.empty() ? "" : env_prefix + "/bin";
    if (!env_bin.empty()) {
        path = env_bin + ":" + path;
    }
    // With the submitter's rights: what they cannot reach reads as missing, so a root daemon
    // does not reveal what exists inside directories they may not read.
    const exec::UserIdentity who{caller.uid, caller.gid,
                                 exec::supplementary_groups(caller.user, caller.gid)};
    auto found = exec::check_paths_as(who, t.workdir,
                                      command_candidates(t.spec.command.front(), path, t.workdir),
                                      env_bin);
    if (!found) {
        return api::api_fail(500, found.error().message);
    }
    if (!found->workdir_ok) {
        return api::api_fail(400, fmt::format("working directory {} does not exist, is not a "
                                              "directory, or you may not enter it",
                                              t.workdir));
    }
    if (!found->env_bin_ok) {
        return api::api_fail(400, fmt::format("{} environment {} has no bin directory you may "
                                              "enter; check the path (`conda env list`, or the "
                                              "directory `python3 -m venv` created)",
                                              t.spec.conda.empty() ? "virtual" : "conda",
                                              env_prefix));
    }
    if (!found->command_ok) {
        return api::api_fail(400, fmt::format("command '{}' not found or not executable by you "
                                              "(searched {}); give an absolute path or declare "
                                              "PATH with --env",
                                              t.spec.command.front(),
                                              t.spec.command.front().find('/') != std::string::npos
                                                  ? "that path"
                                                  : path));
    }
    return t;
}

api::ApiResult<nlohmann::json> Daemon::submit(const api::Caller& caller,
                                              const nlohmann::json& body) {
    if (auto ok = may_act(caller, "submit tasks"); !ok) {
        return tl::unexpected(ok.error());
    }
    // The cheap refusals first: a flood costs the daemon a token-bucket lookup per request.
    {
        std::lock_guard lock(limits_mu_);
        if (auto refused = submit_rate_.take(caller.uid, steady_now())) {
            return tl::unexpected(limit_error(*refused));
        }
    }
    auto parsed = task_from_submission(body);
    if (!parsed) {
        return tl::unexpected(parsed.error());
    }
    auto indices = array_from_submission(body);
    if (!indices) {
        return tl::unexpected(indices.error());
    }
    const SubmissionSize size{std::max<std::size_t>(1, indices->size()),
                              submission_bytes(*parsed), !indices->empty()};
    if (auto refused = check_submission_size(config_.limits, size)) {
        return tl::unexpected(limit_error(*refused));
    }
    auto task = parse_submission(caller, std::move(*parsed));
    if (!task) {
        return tl::unexpected(task.error());
    }
    task->spec.learned = learn(*task);
    std::lock_guard lock(mu_);
    // Counted under the lock that inserts, so two submissions at once cannot both squeeze in.
    if (config_.limits.max_waiting_per_user > 0) {
        auto waiting = store_->waiting_count(caller.uid);
        if (!waiting) {
            return tl::unexpected(store_error(waiting.error()));
        }
        if (auto refused = check_waiting(config_.limits, *waiting, size)) {
            return tl::unexpected(limit_error(*refused));
        }
    }
    if (auto deps = check_dependencies(task->spec.after); !deps) {
        return tl::unexpected(deps.error());
    }
    if (task->state == store::TaskState::Held) {
        task->message = "held at submission; `carma release` lets it run";
    } else if (!task->spec.after.empty()) {
        task->message = fmt::format("waits for task(s) {} to succeed",
                                    fmt::join(task->spec.after, ", "));
    }
    std::vector<TaskId> ids;
    if (indices->empty()) {
        auto id = store_->insert_task(*task);
        if (id) {
            ids.push_back(*id);
        } else {
            return api::api_fail(507, fmt::format("the task could not be stored, so it was not "
                                                  "accepted: {}; free space in the daemon's "
                                                  "state directory and submit again",
                                                  id.error().message));
        }
    } else {
        auto inserted = store_->insert_array(*task, *indices);
        if (!inserted) {
            // All or nothing: one transaction.
            return api::api_fail(507, fmt::format("the array could not be stored, so none of it "
                                                  "was accepted: {}; free space in the daemon's "
                                                  "state directory and submit again",
                                                  inserted.error().message));
        }
        ids = std::move(*inserted);
    }
    nlohmann::json answer;
    // An array's events in one transaction (10,000 of them one by one held the lock for
    // seconds), each with the command shortened as every event is.
    const std::string command =
        shortened(fmt::format("{}", fmt::join(task->spec.command, " ")), kMaxEventBytes / 2);
    std::vector<store::EventRow> submitted;
    submitted.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        store::TaskRow member = *task;
        member.id = ids[i];
        if (!indices->empty()) {
            member.spec.array = ArrayMember{ids.front(), (*indices)[i]};
        }
        if (member.state == store::TaskState::Queued) {
            admit_to_queue(member);
        }
        submitted.push_back(store::EventRow{
            0, unix_now(), member.id, "submitted",
            fmt::format("by {} (uid {}): {} GPU(s), {}{}", member.user, member.uid,
                        member.spec.gpus, command,
                        member.spec.array
                            ? fmt::format(" (array {} index {})", member.spec.array->id,
                                          member.spec.array->index)
                            : std::string())});
        if (i == 0) {
            answer = task_to_json(member);
        }
    }
    if (auto r = store_->add_events(submitted); !r) {
        spdlog::warn("cannot record the submission events of task(s) {}..{}: {}", ids.front(),
                     ids.back(), r.error().message);
    }
    spdlog::info("task={} submitted by {} (uid {}){}", ids.front(), task->user, task->uid,
                 ids.size() > 1 ? fmt::format(": an array of {} ({}..{})", ids.size(),
                                              ids.front(), ids.back())
                                : std::string());
    if (!indices->empty()) {
        answer["array_tasks"] = ids;
    }
    return answer;
}

// Read-only: the body is checked as a submission's is (shape only: nothing runs, so the paths
// are not looked at) and answered from the caller's own history.
api::ApiResult<nlohmann::json> Daemon::estimate(const api::Caller& caller,
                                                const nlohmann::json& body) {
    auto parsed = task_from_submission(body);
    if (!parsed) {
        return tl::unexpected(parsed.error());
    }
    store::TaskRow task = std::move(*parsed);
    task.uid = caller.uid;
    task.gid = caller.gid;
    task.user = caller.user;
    EstimateInput in;
    in.fingerprint = fingerprint_task(task.uid, task.spec.command, task.spec.gpus);
    in.family = command_family(task.spec.command);
    const int newest = static_cast<int>(knowledge_config().max_runs);
    auto mine = store_->command_history(in.fingerprint.exact, newest);
    if (!mine) {
        return tl::unexpected(store_error(mine.error()));
    }
    auto kin = store_->family_history(in.fingerprint.family, in.fingerprint.exact, newest);
    if (!kin) {
        return tl::unexpected(store_error(kin.error()));
    }
    in.command = std::move(*mine);
    in.family_runs = std::move(*kin);
    // From the very rows shown, so the answer explains itself.
    task.spec.learned = derive_knowledge(task.spec, store::run_facts(in.command),
                                         store::run_facts(in.family_runs),
                                         task.spec.time_limit_s,
                                         knowledge_config());
    in.spec = task.spec;
    in.speed_correction = correction_json(in.fingerprint.family);
    nlohmann::json answer = estimate_to_json(in);
    answer["user"] = caller.user;
    answer["uid"] = caller.uid;
    return answer;
}

namespace {

// A task's environment often carries tokens and keys: only its owner and root see it; everyone
// else sees the rest of the task (the queue stays public, as squeue's is).
nlohmann::json visible_task_json(const api::Caller& caller, const store::TaskRow& task) {
    nlohmann::json j = task_to_json(task);
    if (caller.uid != 0 && caller.uid != task.uid) {
        j.erase("env");
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
    // One task's JSON tree at a time, appended as text: the peak stays one task plus the answer.
    std::string out = "{\"tasks\":[";
    for (std::size_t i = 0; i < tasks->size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        nlohmann::json j = visible_task_json(caller, (*tasks)[i]);
        const auto start = starts->find((*tasks)[i].id);
        j["started_at"] = start != starts->end() ? nlohmann::json(start->second) : nullptr;
        mark_unknown(j, unknown);
        out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    out += "],\"next\":";
    out += next_page_json(tasks->size(), tasks->empty() ? 0 : tasks->back().id, query.page);
    out += '}';
    return out;
}

api::ApiResult<nlohmann::json> Daemon::show_task(const api::Caller& caller, std::int64_t id) {
    auto task = load_task(id);
    if (!task) {
        return tl::unexpected(task.error());
    }
    nlohmann::json j = visible_task_json(caller, *task);
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
    dependencies_due_ = true;
    task->state = store::TaskState::Cancelled;
    task->finished_at = unix_now();
    task->message = fmt::format("cancelled by {} before it started", caller.user);
    if (auto r = store_->update_task(*task); !r) {
        return tl::unexpected(store_error(r.error()));
    }
    event(id, "cancelled", task->message);
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

nlohmann::json Daemon::gpu_health_json(std::size_t gpu) const {
    const GpuState& state = gpu_state_[gpu];
    std::string health = "ok";
    std::string reason;
    if (!state.excluded.empty()) {
        // A GPU the backend could not enumerate is broken, not merely left out by choice.
        health = backend_->gpus()[gpu].fault.empty() ? "excluded" : "unhealthy";
        reason = state.excluded;
    } else if (state.unhealthy) {
        health = "unhealthy";
        reason = state.last_error;
    } else if (state.missing > 0) {
        health = "stale";
        reason = "last read failed: " + state.last_error;
    } else if (!windows_[gpu].full()) {
        health = "filling";
        reason = schedulable_reason(gpu);
    }
    return {{"state", health}, {"reason", reason}};
}

api::ApiResult<nlohmann::json> Daemon::nodes(const api::Caller&) {
    if (!hub_) {
        return nlohmann::json{{"agents", nullptr}, {"nodes", nlohmann::json::array()}};
    }
    std::map<std::string, int> running;
    {
        std::lock_guard lock(mu_);
        for (const auto& [id, live] : live_) {
            if (!live.handle.node.empty()) {
                running[live.handle.node] += 1;
            }
        }
    }
    nlohmann::json list = nlohmann::json::array();
    for (const cluster::NodeInfo& n : hub_->nodes()) {
        auto or_null = [](const std::string& s) {
            return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
        };
        list.push_back({{"node", n.node},
                        {"state", n.state},
                        {"slurm_job", or_null(n.slurm_job)},
                        {"host", or_null(n.host)},
                        {"backend", or_null(n.backend)},
                        {"gpus", n.gpus},
                        {"running", running[n.node]},
                        {"first_seen", n.first_seen > 0 ? nlohmann::json(n.first_seen)
                                                        : nlohmann::json(nullptr)},
                        {"last_seen", n.last_seen > 0 ? nlohmann::json(n.last_seen)
                                                      : nlohmann::json(nullptr)}});
    }
    return nlohmann::json{{"agents", hub_->address()},
                          {"auth", hub_->auth_mode() == cluster::auth::Mode::Munge ? "munge"
                                                                                   : "token"},
                          {"server_uid", ::geteuid()},
                          {"nodes", list}};
}

api::ApiResult<nlohmann::json> Daemon::drain_nodes(const api::Caller& caller,
                                                   const nlohmann::json& body) {
    if (auto ok = may_control_nodes(caller, "drain nodes"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (!hub_) {
        return api::api_fail(409, "this daemon schedules no nodes (it was started without "
                                  "--agents)");
    }
    const bool by_node = body.is_object() && body.contains("node") && body["node"].is_string();
    const bool by_job =
        body.is_object() && body.contains("slurm_job") && body["slurm_job"].is_string();
    if (by_node == by_job) {
        return api::api_fail(400, "name what to drain: {\"node\": \"n1\"} or "
                                  "{\"slurm_job\": \"417\"}");
    }
    const std::vector<std::string> drained =
        hub_->drain(by_node ? body["node"].get<std::string>() : "",
                    by_job ? body["slurm_job"].get<std::string>() : "");
    if (drained.empty()) {
        return api::api_fail(404, fmt::format("no node of {} reports to this daemon; see "
                                              "`carma slurm status` or GET /v1/nodes",
                                              body.dump()));
    }
    {
        std::lock_guard lock(mu_);
        event(0, "nodes-draining",
              fmt::format("node(s) {} take no new tasks; their running tasks finish",
                          fmt::join(drained, ", ")));
    }
    return nlohmann::json{{"draining", drained}};
}

api::ApiResult<nlohmann::json> Daemon::declare_node_lost(const api::Caller& caller,
                                                         const nlohmann::json& body) {
    if (auto ok = may_control_nodes(caller, "give a node up"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (!hub_) {
        return api::api_fail(409, "this daemon schedules no nodes (it was started without "
                                  "--agents)");
    }
    if (!body.is_object() || !body.contains("node") || !body["node"].is_string()) {
        return api::api_fail(400, "name the node: {\"node\": \"n1\"}");
    }
    const std::string node = body["node"].get<std::string>();
    if (auto r = hub_->declare_lost(node); !r) {
        return api::api_fail(r.error().code == ErrorCode::NotFound ? 404 : 409,
                             r.error().message);
    }
    {
        std::lock_guard lock(mu_);
        event(0, "node-lost",
              fmt::format("node {} given up by {}: its tasks end as lost and are queued again",
                          node, caller.user));
    }
    return nlohmann::json{{"lost", node}};
}

std::map<TaskId, std::string> Daemon::tasks_on_unreachable_nodes() {
    std::map<TaskId, std::string> out;
    if (!hub_) {
        return out;
    }
    std::set<std::string> unreachable;
    for (const cluster::NodeInfo& n : hub_->nodes()) {
        if (n.state == "unreachable") {
            unreachable.insert(n.node);
        }
    }
    if (unreachable.empty()) {
        return out;
    }
    std::lock_guard lock(mu_);
    for (const auto& [id, live] : live_) {
        if (unreachable.contains(live.handle.node)) {
            out.emplace(id, live.handle.node);
        }
    }
    return out;
}

void Daemon::mark_unknown(nlohmann::json& task,
                          const std::map<TaskId, std::string>& unknown) const {
    auto it = unknown.find(task.value("id", TaskId{0}));
    if (it == unknown.end() || task.value("state", "") != "running") {
        return;
    }
    task["state"] = "unknown";
    task["message"] = fmt::format("node {} is unreachable: whether the task still runs is not "
                                  "known; it is kept until the node reports again or `carma "
                                  "nodes lost {}` gives it up",
                                  it->second, it->second);
}

api::ApiResult<nlohmann::json> Daemon::gpus(const api::Caller&) {
    std::lock_guard lock(mu_);
    return nlohmann::json{{"backend", backend_->name()}, {"gpus", gpus_json()}};
}

nlohmann::json Daemon::gpus_json() {
    nlohmann::json list = nlohmann::json::array();
    const double t = now();
    for (const device::GpuInfo& g : backend_->gpus()) {
        const auto idx = static_cast<std::size_t>(g.index);
        const WindowStats w = windows_[idx].stats();
        auto stat = [](const SeriesStats& s) {
            if (s.known == 0) {
                return nlohmann::json(nullptr);  // no sample in the window had it
            }
            return nlohmann::json{{"mean", s.mean}, {"median", s.median}, {"p95", s.p95},
                                  {"ema", s.ema},   {"risk", s.risk},    {"known", s.known}};
        };
        nlohmann::json gj = {{"index", g.index},
                             {"uuid", g.uuid},
                             {"name", g.name},
                             {"total_mib", g.total_mib},
                             {"mig", g.mig_enabled}};
        if (!g.node.empty()) {  // scheduling over nodes: which node, and its index there
            gj["node"] = g.node;
            gj["node_index"] = g.node_index;
        }
        // Unknown metrics are null, never 0.
        auto value = [](const std::optional<double>& v) {
            return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
        };
        bool has_processes = false;
        for (const device::GpuSample& s : last_samples_) {
            if (s.index == g.index) {
                gj["free_mib"] = s.free_mib;
                gj["used_mib"] = s.used_mib;
                gj["util"] = value(s.util);
                gj["smact"] = value(s.smact);
                gj["smocc"] = value(s.smocc);
                gj["drama"] = value(s.drama);
                gj["power_w"] = value(s.power_w);
                gj["energy_j"] = value(s.energy_j);
                gj["error"] = s.error;
                gj["sources"] = {{"memory", to_string(s.sources.memory)},
                                 {"util", to_string(s.sources.util)},
                                 {"smact", to_string(s.sources.smact)},
                                 {"smocc", to_string(s.sources.smocc)},
                                 {"drama", to_string(s.sources.drama)},
                                 {"power", to_string(s.sources.power)},
                                 {"energy", to_string(s.sources.energy)}};
                nlohmann::json procs = nlohmann::json::array();
                for (const device::GpuProcess& p : s.processes) {
                    procs.push_back({{"pid", p.pid}, {"used_mib", p.used_mib},
                                     {"mps_server", p.mps_server}});
                    has_processes = has_processes || !p.mps_server;
                }
                label_foreign(procs, gpu_state_[idx].foreign);
                gj["processes"] = procs;
            }
        }
        gj["foreign"] = foreign_json(gpu_state_[idx].foreign);
        gj["foreign_mib"] = foreign_mib(gpu_state_[idx].foreign);
        gj["emulated"] = g.emulated;
        gj["health"] = gpu_health_json(idx);
        gj["available_mib"] = w.available_mib;
        gj["window"] = {{"samples", w.samples},
                        {"capacity", windows_[idx].capacity()},
                        {"smact", stat(w.smact)},
                        {"smocc", stat(w.smocc)},
                        {"drama", stat(w.drama)},
                        {"util", stat(w.util)}};
        const bool high = is_high_risk(w, config_.risk, has_processes);
        gj["risk"] = {{"high", high},
                      {"rule", to_string(risk_rule(w))},
                      {"rule_text", describe_rule(w, config_.risk)},
                      {"reason", high ? describe_risk(w, config_.risk) : std::string()}};
        gj["locked"] = scheduler_.warmup().locked(g.index, t);
        nlohmann::json tasks = nlohmann::json::array();
        for (const auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), g.index) != live.gpus.end()) {
                tasks.push_back(id);
            }
        }
        gj["tasks"] = tasks;
        list.push_back(gj);
    }
    return list;
}

api::ApiResult<nlohmann::json> Daemon::events(const api::Caller&, std::int64_t after,
                                              std::int64_t task, int limit) {
    auto rows = store_->events(after, task, std::clamp(limit, 1, 10000));
    if (!rows) {
        return tl::unexpected(store_error(rows.error()));
    }
    nlohmann::json list = nlohmann::json::array();
    for (const store::EventRow& e : *rows) {
        list.push_back({{"id", e.id},
                        {"time", e.time},
                        // Daemon-level events belong to no task.
                        {"task", e.task == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.task)},
                        {"kind", e.kind},
                        {"message", e.message}});
    }
    return nlohmann::json{{"events", list}};
}

api::ApiResult<nlohmann::json> Daemon::status(const api::Caller&) {
    std::lock_guard lock(mu_);
    return nlohmann::json{{"version", "0.1.0"},
                          {"policy", config_.policy},
                          {"backend", backend_->name()},
                          {"time_scale", config_.time_scale},
                          {"queued", scheduler_.main_queue().size()},
                          {"recovering", scheduler_.recovery_queue().size()},
                          {"running", live_.size() + launching_.size()},
                          {"pending_reason", pending_reason_}};
}

std::string Daemon::metrics() {
    // Counted by the store, not by reading every task: /metrics is scraped every few seconds.
    std::map<std::string, std::size_t> by_state;
    if (auto counts = store_->state_counts(); counts) {
        for (const auto& [state, n] : *counts) {
            by_state[std::string(store::to_string(state))] = n;
        }
    }
    std::lock_guard lock(mu_);
    std::string out;
    out += "# HELP carma_tasks Tasks known to the daemon by state.\n# TYPE carma_tasks gauge\n";
    for (const char* s : {"queued", "recovering", "running", "succeeded", "failed", "cancelled",
                          "lost", "rejected"}) {
        out += fmt::format("carma_tasks{{state=\"{}\"}} {}\n", s, by_state[s]);
    }
    out += "# HELP carma_oom_crashes_total Attempts that ended out of GPU memory since start.\n"
           "# TYPE carma_oom_crashes_total counter\n";
    out += fmt::format("carma_oom_crashes_total {}\n", oom_total_);
    out += "# HELP carma_attempts_total Attempts started since start.\n"
           "# TYPE carma_attempts_total counter\n";
    out += fmt::format("carma_attempts_total {}\n", attempts_total_);
    // An unknown value is left out rather than exported as 0.
    auto gauge = [&](const char* name, const char* help, auto value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
        for (const device::GpuSample& s : last_samples_) {
            if (const std::optional<double> v = value(s)) {
                out += fmt::format("{}{{gpu=\"{}\"}} {}\n", name, s.index, *v);
            }
        }
    };
    gauge("carma_gpu_memory_used_bytes", "GPU memory in use.",
          [](const device::GpuSample& s) {
              return std::optional<double>(static_cast<double>(s.used_mib) * 1048576.0);
          });
    gauge("carma_gpu_smact", "SM active ratio (last sample).",
          [](const device::GpuSample& s) { return s.smact; });
    gauge("carma_gpu_power_watts", "Board power (last sample).",
          [](const device::GpuSample& s) { return s.power_w; });
    out += "# HELP carma_gpu_energy_joules_total Energy since the backend started counting.\n"
           "# TYPE carma_gpu_energy_joules_total counter\n";
    for (const device::GpuSample& s : last_samples_) {
        if (s.energy_j) {
            out += fmt::format("carma_gpu_energy_joules_total{{gpu=\"{}\"}} {}\n", s.index,
                               *s.energy_j);
        }
    }
    return out;
}

}  // namespace carma::daemon
