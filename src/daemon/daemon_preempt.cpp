// Fair-share preemption in the daemon (`preemption: true`; core/preemption.h): after a round that
// left an under-served user's task waiting, stop one --requeue attempt of an over-served user
// whose end lets that task start, and queue its task again. The rule and the search are core's,
// the same the simulator runs; here are the daemon's views of what runs, and the stop. Runs with
// the daemon's lock held.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/carma_probe.h"
#include "core/controls.h"
#include "core/exit_classify.h"
#include "daemon/daemon.h"
#include "daemon/preemption_events.h"

namespace carma::daemon {

namespace {

// Whether the daemon can send an attempt its stop and learn of its end: not one on a node while
// it listens for no agents (restored after a restart without --agents; followed again once it
// does). Such an attempt is no candidate, and one being stopped holds up no other preemption.
bool reachable(const LiveAttempt& live, bool agents) {
    return live.handle.node.empty() || agents;
}

}  // namespace

bool Daemon::preempting_now() const {
    const bool agents = hub_ != nullptr;
    return std::any_of(live_.begin(), live_.end(), [&](const auto& kv) {
        return kv.second.preempted && reachable(kv.second, agents);
    });
}

void Daemon::maybe_preempt(TaskId head, const std::vector<GpuView>& round_views,
                           std::span<const LiveAttempt> placed) {
    const SchedulerConfig& sc = scheduler_.config();
    // One stop at a time: the next round sees the freed GPU before another task is stopped.
    if (!config_.preemption.enabled || !sc.policy.carma || !sc.carma.fair_share ||
        preemption_budget_.made_room_for(head) || preempting_now()) {
        return;
    }
    const double clock = now();
    // A task on the recovery queue (an out-of-memory relaunch) waits for an idle GPU, which no
    // stop of a shared GPU's task gives it; it has no fair-share priority.
    const std::optional<double> head_priority = scheduler_.priority(head, clock);
    if (!head_priority) {
        return;
    }
    auto row = store_->task(head);
    if (!row || !*row) {
        return;
    }
    const TaskSpec head_spec = queued_spec(**row);
    // Priced by user, not by task (core/preemption_budget.h): a new waiting task is no new
    // licence to stop someone, so a user whose stops are spent makes none, whatever task waits.
    preemption_budget_.forget_before(clock);
    if (!preemption_budget_.may_stop_for(head_spec.user, clock)) {
        if (told_budget_spent_.insert(head).second) {
            event(head, kPreemptionBudgetEvent,
                  fmt::format("no running task is stopped for this task for now: {}'s waiting "
                              "tasks had {} stops made for them within the last {} "
                              "(preempt_max_stops per preempt_stops_window); it waits for GPUs "
                              "to free as tasks end",
                              head_spec.user, preemption_budget_.stops_for(head_spec.user, clock),
                              format_time_limit(config_.preemption.stops_window_s)));
        }
        return;
    }
    // The GPUs as the round left them.
    const std::vector<GpuView> views =
        placed.empty() ? round_views : views_with(round_views, placed);
    const UserStandings& standings = scheduler_.standings();
    const PriorityWeights weights{sc.carma.fair_share_weight, sc.carma.age_weight};
    MiB usable = 0;
    for (const GpuView& v : views) {
        usable = std::max(usable, v.total_mib);
    }
    std::vector<RunningAttempt> running;
    std::set<std::string> users{head_spec.user};
    // What the round just placed counts at what it is expected to be charged; too young to stop.
    for (const LiveAttempt& p : placed) {
        users.insert(p.user);
        running.push_back(RunningAttempt{p.task, p.user, clock, charge_rate_of(p), false, false});
    }
    for (const auto& [id, live] : live_) {
        users.insert(live.user);
        // One already stopping (a cancel), perhaps never started or out of reach frees nothing new.
        // Its priority once stopped: price_stops below.
        RunningAttempt& a = running.emplace_back(RunningAttempt{
            id, live.user, live.started_clock, charge_rate_of(live), live.requeue,
            !live.stop_requested && !live.launch_unconfirmed && reachable(live, hub_ != nullptr)});
        a.recovered = live.recovered;
        a.nice = live.nice;
    }
    for (const auto& [user, standing] : standings) {
        users.insert(user);
    }
    const ShareTable shares = build_share_table(config_.shares, groups_.groups(), users);
    const PreemptionAsk ask{
        head_spec.user,
        expected_charge_rate(head_spec.learned, usable, std::max(head_spec.gpus, 1),
                             sc.policy.task_reserved_share(head_spec)),
        *head_priority};
    const auto head_standing = standings.find(head_spec.user);
    price_stops(running, ask, head_standing != standings.end() ? head_standing->second.factor : 1,
                ledger_, shares, clock, config_.fairshare_horizon_s, weights);
    const auto victim =
        choose_preemption(ask, std::move(running), shares, clock, config_.preemption,
                          [&](TaskId v) { return head_would_start_without(head_spec, v, views); });
    if (!victim) {
        return;
    }
    LiveAttempt& live = live_.at(*victim);
    // What the stop costs the attempt: what it was charged since it started, lost unless it
    // checkpoints. Owed by the head until it starts; charged to its owner if it never does.
    const double lost =
        lost_gpu_s(live.charged_gpu_s, clock - live.started_clock, charge_rate_of(live));
    // Recorded before the stop: a daemon that dies in between still queues the task again after
    // its restart (stop_before_restart), and one that cannot record it does not stop it.
    const std::string message = fmt::format(
        "{}stopped (SIGTERM, then SIGKILL after {}) so that task {} of {} can start: {} is "
        "over-served under fair share; it will be queued again",
        preempting_words(live.number), format_time_limit(config_.kill_grace_s), head,
        head_spec.user, live.user);
    // The head's event is read back after a restart (made_room_before_restart): it stops no
    // second task. Both or neither: a stop the head does not know of would let it stop another.
    std::vector<store::EventRow> events(2);
    events[0].task = *victim;
    events[0].kind = kPreemptingEvent;
    events[0].message = message;
    events[1].task = head;
    events[1].kind = kRoomMadeEvent;
    events[1].message = room_made_words(live.number, *victim, live.user, lost);
    if (auto r = record_events(std::move(events)); !r) {
        spdlog::warn("task={}: cannot record its preemption, so it is not stopped: {}", *victim,
                     r.error().message);
        return;
    }
    preemption_budget_.record(StopMade{clock, head_spec.user, head, *victim, live.user, lost});
    live.preempted = true;
    live.stop_requested = true;
    if (auto r = stop_attempt(live.handle); !r) {
        // Sent again at the next tick by restop_preempted.
        spdlog::warn("task={}: cannot stop it for fair share yet: {}", *victim, r.error().message);
        live.stop_requested = false;
    }
}

void Daemon::restop_preempted() {
    for (auto& [id, live] : live_) {
        if (live.preempted && !live.stop_requested && reachable(live, hub_ != nullptr)) {
            if (auto r = stop_attempt(live.handle); r) {
                live.stop_requested = true;
            } else {
                spdlog::warn("task={}: cannot stop it for fair share yet: {}", id,
                             r.error().message);
            }
        }
    }
}

bool Daemon::head_would_start_without(const TaskSpec& head, TaskId victim,
                                      std::vector<GpuView> views) const {
    const double clock = now();
    for (GpuView& v : views) {
        v.locked = scheduler_.warmup().locked(v.index, clock);
    }
    const SchedulerConfig& sc = scheduler_.config();
    return carma_would_start(sc.policy, head,
                             views_without(std::move(views), live_.at(victim), live_, gpu_state_),
                             sc.placement, sc.carma);
}

std::optional<double> Daemon::preempted_at(const store::TaskRow& task) {
    if (!task.spec.requeue || task.attempts == 0) {
        return std::nullopt;
    }
    auto attempts = store_->attempts(task.id);
    if (!attempts || attempts->empty() ||
        attempts->back().outcome != to_string(AttemptOutcome::Preempted)) {
        return std::nullopt;
    }
    return attempts->back().ended_at;
}

void Daemon::forfeit_room(TaskId head, const char* how) {
    told_budget_spent_.erase(head);
    const std::optional<StopMade> stop = preemption_budget_.head_forfeited(head);
    if (!stop || !(stop->lost_gpu_s > 0)) {
        return;
    }
    // Baiting (submit, wait for a stop, cancel, repeat) now costs the baiter the work it
    // destroyed: their factor falls as the victim's would have risen.
    ledger_.add(stop->user, stop->lost_gpu_s, now());
    save_usage();
    const std::string victim =
        stop->victim != 0 ? fmt::format("task {} of {}", stop->victim, stop->victim_user)
                          : std::string("a task");
    event(head, kPreemptionChargedEvent,
          fmt::format("{} before it started, after {} was stopped so that it could start: {} is "
                      "charged the {:.1f} GPU-s of work that stop lost (fair share)",
                      how, victim, stop->user, stop->lost_gpu_s));
    spdlog::info("task={}: {} before it started after a preemption for it; {} charged {:.1f} "
                 "GPU-s",
                 head, how, stop->user, stop->lost_gpu_s);
}

// The stops of the window, as their room-made events say (the window on the scheduler clock is
// window / time_scale seconds of real time).
void Daemon::restore_preemption_budget() {
    const double since = unix_now() - config_.preemption.stops_window_s / config_.time_scale;
    const std::vector<std::string> kinds{kRoomMadeEvent};
    auto made = store_->events_since(since, kinds, 100000);
    if (!made) {
        spdlog::warn("cannot read the preemptions of the last {}, so each user's count of stops "
                     "starts from none: {}",
                     format_time_limit(config_.preemption.stops_window_s), made.error().message);
        return;
    }
    std::map<TaskId, std::string> owners;
    for (const store::EventRow& e : *made) {
        auto owner = owners.find(e.task);
        if (owner == owners.end()) {
            auto row = store_->task(e.task);
            if (!row || !*row) {
                continue;
            }
            owner = owners.emplace(e.task, (**row).user).first;
        }
        preemption_budget_.remember(StopMade{clock_of(e.time), owner->second, e.task, 0, "",
                                             lost_gpu_s_in(e.message).value_or(0)});
    }
}

void Daemon::restore_room_made(const store::TaskRow& task) {
    if (auto room = room_made_recorded(*store_, task.id)) {
        preemption_budget_.owe(StopMade{clock_of(room->time), task.user, task.id, 0, "",
                                        lost_gpu_s_in(room->message).value_or(0)});
    }
}

}  // namespace carma::daemon
