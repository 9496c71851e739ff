// POST /v1/tasks and POST /v1/estimate: a submission checked (rate, size, what this server can
// run, the paths as the submitter sees them), learned from history, stored (an array in one
// transaction) and queued; an estimate answers the same body from history without storing it.

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/array_throttle.h"
#include "core/fingerprint.h"
#include "core/output_pattern.h"
#include "core/python_command.h"
#include "core/text.h"
#include "daemon/daemon.h"
#include "daemon/daemon_api.h"
#include "daemon/estimate.h"
#include "daemon/task_json.h"
#include "exec/as_user.h"

namespace carma::daemon {

namespace {

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

api::ApiError limit_error(const LimitRefusal& r) {
    return api::ApiError{r.status, r.message, r.retry_after_s};
}

// sbatch's --output/--error: the directories the shim will create the files in, as the
// submitter may use them. Unchecked, a missing `logs/` failed the task only at launch, after its
// wait, and its dependants with it.
std::optional<api::ApiError> check_output_dirs(const exec::UserIdentity& who,
                                               const store::TaskRow& t) {
    const std::vector<OutputDirectory> dirs =
        output_directories(t.spec.output, t.spec.error, t.spec.name, t.user, t.workdir);
    if (dirs.empty()) {
        return std::nullopt;
    }
    std::vector<std::string> paths;
    for (const OutputDirectory& d : dirs) {
        paths.push_back(d.dir);
    }
    auto access = exec::check_writable_dirs_as(who, paths);
    if (!access) {
        return api::ApiError{500, access.error().message};
    }
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        const OutputDirectory& d = dirs[i];
        const std::string what = fmt::format("{} {}: directory {}", d.option, d.pattern, d.dir);
        switch ((*access)[i]) {
            case exec::DirAccess::Writable:
                break;
            case exec::DirAccess::Missing:
                return api::ApiError{400, fmt::format("{} does not exist; create it first "
                                                      "(mkdir -p {}), then submit again",
                                                      what, d.dir)};
            case exec::DirAccess::NotADirectory:
                return api::ApiError{400, fmt::format("{} is not a directory; choose another "
                                                      "path for the file",
                                                      what)};
            case exec::DirAccess::NoAccess:
                return api::ApiError{400, fmt::format("{} is not writable by you ({}); choose a "
                                                      "directory of yours",
                                                      what, t.user)};
        }
    }
    return std::nullopt;
}

}  // namespace

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
    std::vector<GpuCapacity> caps;
    {
        // Under the lock: across nodes each tick replaces the GPU list as agents come and go.
        std::lock_guard lock(mu_);
        for (const device::GpuInfo& g : backend_->gpus()) {
            caps.push_back(GpuCapacity{g.index, g.total_mib});
        }
    }
    // Across nodes, none may have reported yet: what fits is decided once they have.
    auto ok = caps.empty() && hub_ ? Result<void>{} : check_feasible(t.spec, caps);
    if (!ok) {
        return api::api_fail(ok.error().code == ErrorCode::Infeasible ? 422 : 400,
                             ok.error().message);
    }
    apply_host_defaults(t.spec, config_.host);
    // What can ever fit: the server's totals (host_ is fixed after start; no lock needed).
    std::vector<HostView> whole;
    if (host_) {
        whole.push_back(host_view(*host_, {}));
    }
    if (auto fits = check_host_feasible(t.spec, summarize_hosts(whole)); !fits) {
        return api::api_fail(422, fits.error().message);
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
    // A Python command's script, as the submitter may read it: a missing one would otherwise be
    // queued, wait for a GPU and fail at once with "can't open file".
    std::string script;
    if (const std::optional<std::string> s = python_script(t.spec.command); s && !s->empty()) {
        script = s->front() == '/' ? *s : t.workdir + "/" + *s;
    }
    auto found = exec::check_paths_as(who, t.workdir,
                                      command_candidates(t.spec.command.front(), path, t.workdir),
                                      env_bin, script);
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
    if (auto refused = check_output_dirs(who, t); refused) {
        return tl::unexpected(*refused);
    }
    if (!found->script_ok) {
        return api::api_fail(400, fmt::format("python script {} does not exist, is not a file, or "
                                              "you may not read it; the task would fail at once "
                                              "with \"can't open file\" (a relative script is "
                                              "relative to the working directory {})",
                                              script, t.workdir));
    }
    return t;
}

api::ApiResult<nlohmann::json> Daemon::submit(const api::Caller& caller,
                                              const nlohmann::json& body) {
    if (auto ok = may_act(caller, "submit tasks"); !ok) {
        return tl::unexpected(ok.error());
    }
    // The cheap refusals first: a flood costs the daemon a token-bucket lookup per request.
    // The limits as they are now, copied under the lock a reload changes them under.
    UserLimits limits;
    int max_attempts = 0;
    {
        std::lock_guard lock(limits_mu_);
        if (auto refused = submit_rate_.take(caller.uid, steady_now())) {
            return tl::unexpected(limit_error(*refused));
        }
        limits = config_.limits;
        max_attempts = config_.max_attempts;
    }
    auto parsed = task_from_submission(body);
    if (!parsed) {
        return tl::unexpected(parsed.error());
    }
    if (parsed->spec.nice < 0 && caller.uid != 0) {
        // As Slurm: a negative nice raises a task above others' of the same standing.
        return api::api_fail(403, fmt::format("only root may give a negative nice ({}); a "
                                              "positive one lowers your task's priority",
                                              parsed->spec.nice));
    }
    auto array = array_from_submission(body);
    if (!array) {
        return tl::unexpected(array.error());
    }
    const std::vector<int>& indices = array->indices;
    auto warnings = warnings_from_submission(body);
    if (!warnings) {
        return tl::unexpected(warnings.error());
    }
    const SubmissionSize size{std::max<std::size_t>(1, indices.size()), submission_bytes(*parsed),
                              !indices.empty(), parsed->spec.gpus};
    if (auto refused = check_submission_size(limits, size)) {
        return tl::unexpected(limit_error(*refused));
    }
    if (parsed->max_attempts == 0) {
        parsed->max_attempts = max_attempts;
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
    if (task->spec.mail_types != 0) {
        if (auto ok = check_mail(caller, task->spec); !ok) {
            return tl::unexpected(ok.error());
        }
    }
    auto deps = check_dependencies(std::move(task->spec.dependencies), *task, !indices.empty());
    if (!deps) {
        return tl::unexpected(deps.error());
    }
    task->spec.dependencies = std::move(*deps);
    if (task->state == store::TaskState::Held) {
        task->message = "held at submission; `carma release` lets it run";
    } else if (!task->spec.dependencies.empty()) {
        task->message = describe_waiting(task->spec.dependencies);
    } else {
        // Until a round looks at it, `carma queue` would show "-": say why nothing is known yet.
        task->message = ticks_ == 0 || pending_reason_ == kFillingFirstWindow
                            ? fmt::format("waiting for the first scheduling round: {}",
                                          kFillingFirstWindow)
                            : std::string("not yet considered: waiting for the next scheduling "
                                          "round");
    }
    if (array->max_running > 0) {
        // Read back by every member (Store::insert_array keeps it): the daemon holds those beyond
        // it out of the queue (admit_to_queue).
        task->spec.array = ArrayMember{0, 0, array->max_running};
        if (task->state != store::TaskState::Held && task->spec.dependencies.empty()) {
            task->message = throttle_reason(array->max_running);  // until it is let in
        }
    }
    std::vector<TaskId> ids;
    if (indices.empty()) {
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
        auto inserted = store_->insert_array(*task, indices);
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
        if (!indices.empty()) {
            member.spec.array = ArrayMember{ids.front(), indices[i], array->max_running};
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
            // What the task file's reader noticed (a .rad file's lines it does not read), kept
            // with the task after the submit's terminal has closed; an array's with its first
            // member (its id), not 10,000 times over.
            for (const std::string& w : *warnings) {
                submitted.push_back(store::EventRow{0, unix_now(), member.id, "warning", w});
            }
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
    if (!indices.empty()) {
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
    in.fingerprint = store::fingerprint_of(task);
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

}  // namespace carma::daemon
