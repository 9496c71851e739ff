// Sampling and health: each tick's GPU samples go into the monitor windows, a GPU that stops
// answering becomes unhealthy, live attempts are found on their GPUs, and the scheduler gets its
// view of every GPU.

#include "daemon/daemon.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/controls.h"
#include "daemon/foreign.h"
#include "device/backend_choice.h"
#include "exec/proc_tree.h"

namespace carma::daemon {

void Daemon::apply_samples(Result<std::vector<device::GpuSample>> samples) {
    if (!samples) {
        spdlog::warn("cannot sample GPUs: {}", samples.error().message);
        for (std::size_t i = 0; i < gpu_state_.size(); ++i) {
            note_missing_sample(i, samples.error().message);
        }
        last_samples_.clear();
        return;
    }
    last_samples_ = *samples;
    for (const device::GpuSample& s : last_samples_) {
        if (s.index < 0 || static_cast<std::size_t>(s.index) >= windows_.size()) {
            continue;
        }
        const auto idx = static_cast<std::size_t>(s.index);
        if (std::optional<std::string> problem = sample_problem(s, config_.time_scale)) {
            note_missing_sample(idx, *problem);
            continue;
        }
        GpuState& state = gpu_state_[idx];
        if (state.note_answered()) {
            event(0, "gpu-healthy",
                  fmt::format("GPU {} answers again; it takes tasks once its window has refilled",
                              s.index));
            spdlog::info("GPU {} answers again", s.index);
        }
        MetricSample m;
        m.free_mib = s.free_mib;
        m.smact = s.smact;
        m.smocc = s.smocc;
        m.drama = s.drama;
        m.util = s.util;
        m.power_w = s.power_w;
        m.sources = s.sources;
        windows_[idx].push(m);
        // Which rule the risk filter applies follows from the metrics this GPU really gives;
        // say so whenever it changes (at start, and when e.g. profiling becomes unavailable).
        // Not from a GPU's first sample alone: GPM's activity is a difference of two of its
        // samples, so the first one has none, and on an H200 that logged "no SM activity
        // counters ... use a Hopper GPU" half a second before the rule the GPU really has.
        const MetricWindow& window = windows_[idx];
        if (window.size() < std::min<std::size_t>(2, window.capacity())) {
            continue;
        }
        std::string rule = describe_rule(window.stats(), config_.risk);
        if (rule != state.rule_text) {
            spdlog::info("GPU {}: {}; risk rule {}", s.index, device::describe_sources(s), rule);
            state.rule_text = std::move(rule);
        }
    }
    // History older than retention_days goes, once an hour (and on the first tick).
    if (config_.retention_days > 0 && ticks_ % 3600 == 1) {
        const double before = unix_now() - config_.retention_days * 86400.0;
        if (auto dropped = store_->prune_history(before); !dropped) {
            spdlog::warn("cannot drop old history: {}", dropped.error().message);
        } else if (*dropped > 0) {
            spdlog::info("dropped {} rows (GPU samples, events, finished tasks and their "
                         "attempts) older than {} days",
                         *dropped, config_.retention_days);
        }
    }
    // Downsampled history: one row per GPU every 10 samples. Unknown metrics are stored as NULL.
    if (ticks_ % 10 == 1) {
        std::vector<store::GpuSampleRow> rows;
        const double t = unix_now();
        const double nan = std::nan("");
        for (const device::GpuSample& s : last_samples_) {
            if (!s.error.empty()) {
                continue;
            }
            rows.push_back(store::GpuSampleRow{t, s.index, s.free_mib, s.used_mib,
                                               s.util.value_or(nan), s.smact.value_or(nan),
                                               s.smocc.value_or(nan), s.drama.value_or(nan),
                                               s.power_w.value_or(nan), s.energy_j.value_or(nan)});
        }
        if (auto r = store_->add_gpu_samples(rows); !r) {
            spdlog::warn("cannot store GPU samples: {}", r.error().message);
        }
    }
}

// A failed or stale read. A few in a row make the GPU unhealthy: its window is dropped (old
// free memory must not steer placement) and its running tasks are reported, not killed.
void Daemon::note_missing_sample(std::size_t gpu, const std::string& why) {
    GpuState& state = gpu_state_[gpu];
    if (!state.note_missing(why, !state.excluded.empty())) {
        return;
    }
    windows_[gpu] = MetricWindow(config_.window);
    std::vector<TaskId> tasks;
    for (const auto& [id, live] : live_) {
        if (std::find(live.gpus.begin(), live.gpus.end(), static_cast<int>(gpu)) !=
            live.gpus.end()) {
            tasks.push_back(id);
        }
    }
    const std::string message = fmt::format(
        "GPU {} is unhealthy: {} ({} failed reads in a row); nothing is placed on it until it "
        "answers again{}",
        gpu, why, state.missing,
        tasks.empty() ? std::string()
                      : fmt::format("; task(s) {} on it are left running", fmt::join(tasks, ", ")));
    spdlog::warn("{}", message);
    event(0, "gpu-unhealthy", message);
    for (TaskId id : tasks) {
        event(id, "gpu-unhealthy", message);
    }
}

// Finds each live task's processes (its group, its session, every descendant: ranks that call
// setsid included) on its GPUs. A GPU's warm-up ends when the task is seen on that GPU; the
// memory its processes hold there is the attempt's per-GPU peak.
void Daemon::notice_sightings(const std::vector<exec::ProcEntry>& table) {
    std::set<pid_t> ours;  // every live attempt's processes: the rest on a GPU is foreign
    for (auto& [id, live] : live_) {
        live.held_now.clear();
        live.crowded_now.clear();
        const std::set<pid_t> members = attempt_members(live, table);
        ours.insert(members.begin(), members.end());
        if (members.empty()) {
            continue;
        }
        for (const device::GpuSample& s : last_samples_) {
            if (!s.error.empty() ||
                std::find(live.gpus.begin(), live.gpus.end(), s.index) == live.gpus.end()) {
                continue;
            }
            bool here = false;
            MiB held = 0;
            double activity = 0;
            bool crowded = false;
            for (const device::GpuProcess& p : s.processes) {
                if (!p.mps_server && members.contains(static_cast<pid_t>(p.pid))) {
                    here = true;
                    held += p.used_mib;
                    activity += p.activity.value_or(0);
                } else if (!p.mps_server) {
                    crowded = true;
                }
            }
            if (!here) {
                continue;
            }
            if (crowded) {
                live.crowded_now.insert(s.index);
            }
            live.activity_now[s.index] = activity;  // its share of the GPU's energy
            live.held_now[s.index] = held;
            if (live.seen_on.insert(s.index).second && !live.settled) {
                scheduler_.task_seen_on(id, s.index, now());
            }
            MiB& peak = live.peak_mib[s.index];
            if (held > peak) {
                peak = held;
                live.peak_changed = true;
            }
        }
        if (live.seen_on.size() == live.gpus.size()) {
            live.settled = true;
        }
        // The peak is written every few seconds while it grows, so a restart loses little.
        if (live.peak_changed && ticks_ % 5 == 0) {
            if (auto r = store_->set_attempt_peak(id, live.number, live.peak_mib); r) {
                live.peak_changed = false;
            }
        }
    }
    notice_foreign(ours);
}

std::set<pid_t> Daemon::attempt_members(const LiveAttempt& live,
                                         const std::vector<exec::ProcEntry>& table) const {
    if (!live.handle.node.empty()) {
        if (!hub_ || live.handle.attempt_dir.empty()) {
            return {};
        }
        return hub_->attempt(live.handle.node,
                             cluster::attempt_name_of(live.handle.attempt_dir))
            .members;
    }
    if (table.empty()) {
        return {};
    }
    auto pgid = exec::task_pgid(live.handle.attempt_dir);
    if (!pgid) {
        return {};
    }
    return exec::task_processes(table, *pgid);
}

void Daemon::grow_gpus() {
    hub_backend_->refresh();
    const std::vector<device::GpuInfo>& gpus = backend_->gpus();
    for (std::size_t i = windows_.size(); i < gpus.size(); ++i) {
        const device::GpuInfo& g = gpus[i];
        windows_.emplace_back(config_.window);
        GpuState state;
        state.excluded = device::exclusion_reason(g, config_.exclude_gpus);
        gpu_state_.push_back(std::move(state));
        event(0, "gpu-added",
              fmt::format("GPU {} joins: GPU {} of node {} ({})", g.index, g.node_index, g.node,
                          g.name));
    }
}

std::string Daemon::schedulable_reason(std::size_t gpu) const {
    const GpuState& state = gpu_state_[gpu];
    if (hub_) {
        if (std::string why = hub_->unschedulable_reason(backend_->gpus()[gpu].node);
            !why.empty()) {
            return why;
        }
    }
    if (state.unhealthy) {
        return "unhealthy: " + state.last_error;
    }
    if (state.missing > 0) {
        return "its last read failed: " + state.last_error;
    }
    if (!windows_[gpu].full()) {
        return fmt::format("its monitor window is filling ({}/{} samples)", windows_[gpu].size(),
                           windows_[gpu].capacity());
    }
    return {};
}

// The GPUs the scheduler may consider: every GPU not left out, each with why it cannot take a
// task right now, if it cannot.
std::vector<GpuView> Daemon::gpu_views() const {
    std::vector<GpuView> views;
    // A node whose agent is not root starts only its own user's tasks (core/agent_user.h).
    std::map<std::string, std::string> agent_users;
    auto agent_user_of = [&](const std::string& node) -> const std::string& {
        auto [it, added] = agent_users.try_emplace(node);
        if (added && hub_) {
            if (const std::optional<uid_t> uid = hub_->agent_uid(node); uid && *uid != 0) {
                it->second = user_of_uid(*uid);
            }
        }
        return it->second;
    };
    for (const device::GpuInfo& g : backend_->gpus()) {
        const auto idx = static_cast<std::size_t>(g.index);
        if (!gpu_state_[idx].excluded.empty()) {
            continue;
        }
        GpuView v;
        v.index = g.index;
        v.node = g.node;
        if (!g.node.empty()) {
            v.agent_user = agent_user_of(g.node);
        }
        v.total_mib = g.total_mib;
        v.stats = windows_[idx].stats();
        v.unschedulable_reason = schedulable_reason(idx);
        v.schedulable = v.unschedulable_reason.empty();
        for (const device::GpuSample& s : last_samples_) {
            if (s.index == g.index) {
                // MPS servers are infrastructure: with MPS on they sit on every GPU.
                v.has_processes = std::any_of(s.processes.begin(), s.processes.end(),
                                              [](const device::GpuProcess& p) {
                                                  return !p.mps_server;
                                              });
            }
        }
        // Memory and activity of processes CARMA did not start are taken (daemon/foreign.h).
        v.foreign_mib = foreign_mib(gpu_state_[idx].foreign);
        v.foreign_activity = gpu_state_[idx].foreign.empty()
                                 ? std::optional<double>(std::nullopt)
                                 : foreign_activity(gpu_state_[idx].foreign)
                                       .value_or(v.stats.smact.known > 0 ? v.stats.smact.mean
                                                                         : v.stats.util.mean);
        // A GPU running one of our attempts is never idle, even before (or without) its process
        // showing up there: the exclusive path must not stack tasks on it. Its attempts are the
        // residents `carma` plans with (their learned figures, never their measurements).
        for (const auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), g.index) != live.gpus.end()) {
                v.has_processes = true;
                if (!live.mps_user.empty()) {
                    v.mps_user = live.mps_user;
                }
                v.residents.push_back(resident_view_of(live));
            }
        }
        views.push_back(std::move(v));
    }
    return views;
}
}  // namespace carma::daemon
