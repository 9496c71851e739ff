// The start of an attempt: the scheduler's decisions, each recorded in the store (prepare),
// started without the lock (start) and its result taken in (complete).

#include "daemon/daemon.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"
#include "core/output_pattern.h"
#include "core/python_env.h"
#include "daemon/task_environment.h"
#include "exec/as_user.h"

namespace carma::daemon {

namespace fs = std::filesystem;

namespace {

// After an attempt could not be started for a reason of this machine (disk full), decisions
// pause this many periods before the task is tried again.
constexpr double kLaunchRetryPeriods = 5;

// Waiting tasks whose reason is rewritten per tick, at most (one store write each).
constexpr std::size_t kWaitingReasonsPerTick = 32;

}  // namespace

std::vector<Daemon::PreparedLaunch> Daemon::decide() {
    std::vector<PreparedLaunch> launches;
    const std::vector<GpuView> views = gpu_views();
    // Decisions wait until the monitor has a full window somewhere, as the paper's monitor does;
    // after that each GPU takes tasks once its own window is full.
    const bool all_filling = std::all_of(views.begin(), views.end(), [&](const GpuView& v) {
        const auto idx = static_cast<std::size_t>(v.index);
        return !windows_[idx].full() && !gpu_state_[idx].unhealthy;
    });
    if (all_filling) {
        pending_reason_ = kFillingFirstWindow;
        return launches;
    }
    if (now() < launch_backoff_until_) {
        return launches;  // the last launch failed for a reason of this machine: give it a moment
    }
    stand_users();
    StepResult step = scheduler_.step(views, host_views(), now());
    pending_reason_ = step.pending_reason;
    for (const Rejection& r : step.rejected) {
        auto t = store_->task(r.task);
        if (!t || !*t) {
            continue;
        }
        store::TaskRow row = **t;
        row.state = store::TaskState::Rejected;
        row.finished_at = unix_now();
        row.message = r.reason;
        if (auto u = store_->update_task(row); !u) {
            // Still queued in the store, so queued in the scheduler: rejected again next tick.
            spdlog::warn("task={}: cannot record its rejection: {}; will retry", row.id,
                         u.error().message);
            scheduler_.return_to_front(row.id, queued_spec(row), false);
            continue;
        }
        event(row.id, "rejected", r.reason);
        forfeit_room(row.id, "rejected");
        dependencies_due_ = true;
        throttle_due_ = true;
    }
    for (const Placement& p : step.placed) {
        if (auto l = prepare_launch(p)) {
            launches.push_back(std::move(*l));
        }
    }
    // Every task a round looked at and left waiting carries its own reason (carma); written
    // when it changes, a bounded number per tick.
    std::size_t written = 0;
    for (const Waiting& w : step.waiting) {
        if (written >= kWaitingReasonsPerTick || (step.pending_task && w.task == *step.pending_task)) {
            continue;
        }
        std::string& last = waiting_reasons_[w.task];
        if (last == w.reason) {
            continue;
        }
        if (auto t = store_->task(w.task); t && *t && !store::is_final((*t)->state)) {
            store::TaskRow row = **t;
            row.message = w.reason;
            if (store_->update_task(row)) {
                last = w.reason;
                ++written;
            }
        }
    }
    if (waiting_reasons_.size() > 4 * kWaitingReasonsPerTick + step.waiting.size()) {
        waiting_reasons_.clear();  // forget tasks that have left the queue
    }
    if (step.pending_task) {
        // The probe sees the GPUs as this round left them, its placements on them.
        std::vector<LiveAttempt> placed;
        for (const PreparedLaunch& l : launches) {
            placed.push_back(l.live);
        }
        maybe_preempt(*step.pending_task, views, placed);
    }
    if (step.pending_task) {
        auto t = store_->task(*step.pending_task);
        if (t && *t && (*t)->message != step.pending_reason) {
            store::TaskRow row = **t;
            row.message = step.pending_reason;
            if (auto u = store_->update_task(row); !u) {
                // Only the message is lost; it is written again on the next tick.
                spdlog::debug("task={}: cannot record why it waits: {}", row.id,
                              u.error().message);
            }
        }
    }
    return launches;
}

// A placed task whose attempt could not be prepared or started for a reason of this machine
// (disk full, no fork, the shim missing) keeps its place at the front of its queue and is tried
// again; only a request that can never start (InvalidArgument) fails the task.
void Daemon::postpone_launch(const Placement& p, const std::string& why) {
    auto t = store_->task(p.task);
    TaskSpec spec;
    if (t && *t) {
        spec = queued_spec(**t);
        store::TaskRow row = **t;
        row.state = p.recovered ? store::TaskState::Recovering : store::TaskState::Queued;
        row.message = fmt::format("could not start an attempt ({}); it keeps its place and is "
                                  "tried again",
                                  why);
        if (auto r = store_->update_task(row); !r) {
            spdlog::warn("task={}: {}", p.task, r.error().message);
        }
    } else {
        // Cannot even read it: the store still says it waits, so a restart queues it again.
        spdlog::error("task={} was placed but cannot be read from the store: {}", p.task,
                      t ? "no such task" : t.error().message);
        scheduler_.task_exited(p.task);
        return;
    }
    launching_host_.erase(p.task);
    scheduler_.return_to_front(p.task, std::move(spec), p.recovered);
    spdlog::warn("task={}: could not start an attempt: {}; will retry", p.task, why);
    launch_backoff_until_ = now() + kLaunchRetryPeriods;
}

// Records the attempt before anything starts: a restart then knows an attempt may exist (see
// restore()). Without that record nothing may start.
std::optional<Daemon::PreparedLaunch> Daemon::prepare_launch(const Placement& p) {
    auto t = store_->task(p.task);
    if (!t || !*t) {
        postpone_launch(p, t ? "not in the store" : t.error().message);
        return std::nullopt;
    }
    PreparedLaunch l;
    l.placement = p;
    l.task = **t;
    store::TaskRow& task = l.task;
    task.attempts += 1;
    LiveAttempt& live = l.live;
    live.task = task.id;
    live.array = task.spec.array;
    live.number = task.attempts;
    live.user = task.user;
    live.gpus = p.gpus;
    live.host = HeldHost{task.spec.cpus, task.spec.host_mem_mib, {}};
    live.learned = task.spec.learned;
    live.exclusive = task.spec.exclusive;
    live.max_slowdown = task.spec.max_slowdown;
    live.gpu_milli = task.spec.gpu_milli;
    live.requeue = task.spec.requeue;
    live.recovered = p.recovered;
    live.nice = task.spec.nice;
    live.mps_user = mps_user_of(task, p.gpus, std::string());
    live.started_clock = now();
    live.time_limit_s = task.spec.time_limit_s;
    // All of a placement's GPUs are on one node (core/policy.h); on a node its agent makes the
    // attempt directory, named like this, under its own state directory.
    const std::string node =
        p.gpus.empty() ? p.node : backend_->gpus()[static_cast<std::size_t>(p.gpus.front())].node;
    if (host_ && node.empty()) {
        const std::vector<HeldHost> held = held_host();
        live.host.cores = attempt_cores(*host_, held, live.host.cpus);
        if (live.host.cores.empty()) {
            // Only a task on the shared cores meets this (the scheduler counted the others'):
            // every core is some task's own and none is reserved.
            postpone_launch(p, "no core is free for its cpuset: every core is held by a task "
                               "that asked -c, and host.reserved_cores is 0");
            return std::nullopt;
        }
    }
    const std::string dir =
        node.empty() ? fmt::format("{}/attempts/{}/{}", config_.state_dir, task.id, live.number)
                     : cluster::attempt_name(task.id, live.number);
    std::error_code ec;
    if (node.empty()) {
        fs::create_directories(fs::path(dir).parent_path(), ec);
    }

    store::AttemptRow& attempt = l.attempt;
    attempt.node = node;
    attempt.slurm_job = hub_ && !node.empty() ? hub_->slurm_job(node) : "";
    attempt.task = task.id;
    attempt.number = live.number;
    attempt.gpus = p.gpus;
    attempt.cores = live.host.cores;
    attempt.dir = dir;
    attempt.started_at = unix_now();
    live.started_unix = attempt.started_at;
    attempt.recovered = p.recovered;
    task.state = store::TaskState::Running;
    task.message =
        p.gpus.empty()
            ? fmt::format("running on {}, no GPU{}", cores_text(live.host),
                          node.empty() ? "" : " of node " + node)
            : fmt::format("running on GPU {}{}{}", fmt::join(p.gpus, ","),
                          node.empty() ? "" : " of node " + node, p.exclusive ? "" : " (shared)");
    if (node.empty() && !fences_.enabled()) {
        task.message += std::string("; ") + kUnfencedNote;
    }
    if (auto r = store_->begin_attempt(attempt, task); !r) {
        postpone_launch(p, r.error().message);
        return std::nullopt;
    }

    exec::LaunchRequest& req = l.request;
    req.argv = task.spec.command;
    req.script = task.spec.script;
    req.script_arg = task.spec.script_arg;
    req.workdir = task.workdir;
    req.env = attempt_environment(task, live, p);
    req.uid = task.uid;
    req.gid = task.gid;
    req.switch_user = ::geteuid() == 0 && task.uid != 0;
    if (req.switch_user) {
        req.groups = exec::supplementary_groups(task.user, task.gid);
    }
    req.attempt_dir = dir;
    req.kill_grace_s = config_.kill_grace_s;
    for (const device::TaskFile& f : backend_->task_files()) {
        req.files.push_back(exec::TaskFile{f.path, f.env});
    }
    const OutputFiles copies =
        output_files(task.spec.output, task.spec.error,
                     OutputNames{task.id, task.spec.array, task.spec.name, task.user},
                     task.workdir);
    req.stdout_copy = copies.stdout_path;
    req.stderr_copy = copies.stderr_path;
    req.append_copies = live.number > 1;  // later attempts add to what the first one wrote
    if (fences_.enabled() && node.empty() && host_) {
        std::vector<std::string> other_gpu_files;
        for (const device::GpuInfo& g : backend_->gpus()) {
            if (!g.device_file.empty() &&
                std::find(p.gpus.begin(), p.gpus.end(), g.index) == p.gpus.end()) {
                other_gpu_files.push_back(g.device_file);
            }
        }
        req.fence = attempt_fence(fences_, config_.host, task.id, live.number, live.host.cores,
                                  memory_fence_mib(*host_, config_.host, live.host.memory_mib),
                                  other_gpu_files);
    }
    launching_host_[task.id] = live.host;
    return l;
}

Result<exec::LaunchHandle> Daemon::start_attempt(const PreparedLaunch& launch) {
    if (launch.attempt.node.empty()) {
        return exec::launch(launch.request, config_.shim_path);
    }
    if (!hub_) {
        return fail(ErrorCode::Io, "this daemon does not listen for agents");
    }
    return hub_->launch(launch.attempt.node, launch.request);
}

void Daemon::complete_launch(PreparedLaunch l, Result<exec::LaunchHandle> handle) {
    const bool stop_requested = launching_[l.task.id];
    launching_.erase(l.task.id);
    launching_host_.erase(l.task.id);
    const Placement& p = l.placement;
    store::TaskRow& task = l.task;
    store::AttemptRow& attempt = l.attempt;
    LiveAttempt& live = l.live;
    if (!handle) {
        attempt.ended_at = unix_now();
        attempt.outcome = "not-started";
        if (auto u = store_->update_attempt(attempt); !u) {
            spdlog::warn("task={}: {}", task.id, u.error().message);
        }
        if (stop_requested) {
            // Cancelled while it was being started, and it never started: nothing to retry.
            task.state = store::TaskState::Cancelled;
            task.finished_at = unix_now();
            task.message = "cancelled while it was being started; it did not start";
        } else if (handle.error().code != ErrorCode::InvalidArgument) {
            // Half-written attempt directories must not stand in the way of the next attempt.
            std::error_code ec;
            if (attempt.node.empty()) {
                fs::remove_all(attempt.dir, ec);
            }
            postpone_launch(p, handle.error().message);
            return;
        } else {
            task.state = store::TaskState::Failed;
            task.finished_at = unix_now();
            task.message = "could not launch: " + handle.error().message;
        }
        if (auto r = store_->update_task(task); !r) {
            spdlog::warn("task={}: {}", task.id, r.error().message);
        }
        scheduler_.task_exited(task.id);
        dependencies_due_ = true;
        throttle_due_ = true;
        event(task.id, std::string(store::to_string(task.state)), task.message);
        mail_about(task, MailMoment::Ended);
        return;
    }
    live.handle = *handle;
    attempt.shim_pid = handle->shim_pid;
    attempt.dir = handle->attempt_dir;  // on a node: where its agent put it
    if (auto u = store_->update_attempt(attempt); !u) {
        // shim.pid in the attempt directory says the same; restore() reads it from there.
        spdlog::warn("task={}: cannot record its supervisor's pid: {}", task.id,
                     u.error().message);
    }
    if (stop_requested) {
        if (auto r = stop_attempt(live.handle); !r) {
            spdlog::warn("task={}: cannot stop it: {}", task.id, r.error().message);
        }
        live.stop_requested = true;
    }
    live_[task.id] = live;
    ++attempts_total_;
    if (live.number == 1) {
        wait_seconds_.observe(attempt.started_at - task.submitted_at);
        mail_about(task, MailMoment::Began);
    }
    // It made room for itself (fair-share preemption) until now, as its `placed` event says to a
    // restarted daemon (preemption_events.h); a postponed launch still waits for that room.
    preemption_budget_.head_started(task.id);
    told_budget_spent_.erase(task.id);
    event(task.id, "placed",
          p.gpus.empty()
              ? fmt::format("attempt {} on {}, no GPU{}", live.number, cores_text(live.host),
                            attempt.node.empty() ? "" : " of node " + attempt.node)
              : fmt::format("attempt {} on GPU {}{}{}{}", live.number, fmt::join(p.gpus, ","),
                            attempt.node.empty() ? "" : " of node " + attempt.node,
                            p.exclusive ? " (idle)" : " (collocated)",
                            p.recovered ? ", recovered from out-of-memory" : ""));
}

std::vector<HeldHost> Daemon::held_host() const {
    std::vector<HeldHost> held;
    for (const auto& [id, live] : live_) {
        if (live.handle.node.empty()) {
            held.push_back(live.host);
        }
    }
    for (const auto& [id, h] : launching_host_) {
        held.push_back(h);
    }
    return held;
}

void Daemon::reshape_shared_cores() {
    if (!host_ || !fences_.enabled()) {
        return;
    }
    const std::vector<int> shared = attempt_cores(*host_, held_host(), 0);
    if (shared.empty()) {
        return;  // none to give: they stay where they are until a core is free again
    }
    for (auto& [id, live] : live_) {
        if (live.host.cpus > 0 || !live.handle.node.empty() || live.host.cores == shared) {
            continue;
        }
        if (auto moved = set_fence_cores(fences_, id, live.number, shared); !moved) {
            // Its cgroup is gone (it is ending) or predates fences: not tried again.
            spdlog::debug("task={}: {}", id, moved.error().message);
        }
        live.host.cores = shared;
    }
}

std::vector<HostView> Daemon::host_views() const {
    if (!host_) {
        return {};
    }
    const std::vector<HeldHost> held = held_host();
    return {host_view(*host_, held)};
}

TaskSpec Daemon::queued_spec(const store::TaskRow& task) const {
    bind_correction(task);
    TaskSpec spec = task.spec;
    spec.mps_user = !mps_.empty() && spec.gpus == 1 ? task.user : std::string();
    spec.user = task.user;  // the account fair share charges and orders by
    return spec;
}

std::string Daemon::mps_user_of(const store::TaskRow& task, const std::vector<int>& gpus,
                                const std::string& node) const {
    return node.empty() && gpus.size() == 1 && mps_.contains(gpus[0]) ? task.user
                                                                       : std::string();
}

// What the environment's pure rule (daemon/task_environment.h) needs, looked up here: the
// account, the GPUs' UUIDs, and under --mps the control daemon the task will be a client of.
EnvList Daemon::attempt_environment(const store::TaskRow& task, const LiveAttempt& live,
                                    const Placement& placement) {
    AttemptPlace place;
    std::vector<MiB> totals;
    for (int g : placement.gpus) {
        const device::GpuInfo& gpu = backend_->gpus()[static_cast<std::size_t>(g)];
        place.gpu_uuids.push_back(gpu.uuid);
        totals.push_back(gpu.total_mib);
    }
    place.attempt = live.number;
    place.time_scale = config_.time_scale;
    place.backend_env = backend_->task_environment();
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(task.uid, &pw, buf, sizeof buf, &found) == 0 && found) {
        place.home = found->pw_dir;
        place.shell = found->pw_shell;
    }
    if (!mps_.empty()) {
        const auto control = placement.gpus.size() == 1 ? mps_.find(placement.gpus[0])
                                                        : mps_.end();
        if (control != mps_.end()) {
            place.mps_pipe_dir = control->second.pipe_dir();
            place.mps_limits = mps_memory_limits(
                task.spec, scheduler_.config().policy,
                scheduler_.config().placement.memory.estimator, placement.recovered, totals,
                config_.memory_margin_mib);
        } else {
            place.mps_off_dir = mps_off_dir_;
        }
    }
    return task_environment(task, place);
}

}  // namespace carma::daemon
