// Fair share in a simulated run (sim/simulation.h): every attempt is charged, per GPU-second it
// is GPU-active, the larger of its share of the GPU's memory (its peak in the world over the
// GPU's usable memory) and its share of the GPU's SM activity (its solo SM activity times the
// speed it runs at among its co-runners), or the whole GPU when it runs alone by request
// (`--exclusive`, `--max-slowdown` under a paper policy) or under a policy that never shares.
// Charges go into a UsageLedger (core/fair_share.h); with several users under `carma`, every
// tick gives the scheduler each user's fair-share factor, which counts what the running tasks
// will be charged over the fair-share horizon (a task still starting at what it is expected to
// be charged, from what the policy learned of it).

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/carma_probe.h"
#include "sim/simulation.h"

namespace carma::sim::engine {

namespace {

// The report's usage series keep a point at most every this many seconds per user.
constexpr double kUsagePointS = 60;

}  // namespace

void Simulation::charge(SimTask& t) {
    const double dt = now_ - t.charged_at;
    t.charged_at = now_;
    if (dt <= 0 || t.charge_rate <= 0) {
        return;
    }
    const double gpu_s = t.charge_rate * dt;
    t.record.charged_gpu_s += gpu_s;
    ledger_.add(t.spec.user, gpu_s, now_);
    if (config_.record_timelines) {
        UsageSeries& series = usage_series_[t.spec.user];
        const double total_h =
            (series.points.empty() ? 0.0 : series.points.back().second) + gpu_s / 3600.0;
        if (!series.points.empty() && now_ - series.points.back().first < kUsagePointS &&
            series.points.size() > 1) {
            series.points.back().second = total_h;
        } else {
            series.points.emplace_back(now_, total_h);
        }
    }
}

void Simulation::set_charge_rate(SimTask& t) const {
    const double reserved = config_.scheduler.policy.task_reserved_share(t.spec);
    const double memory_share = static_cast<double>(t.world_peak_mib) /
                                static_cast<double>(std::max<MiB>(1, config_.gpus.type.usable_mib));
    const double sm_share = t.profile.smact * t.speed;
    t.charge_rate = static_cast<double>(t.gpus.size()) *
                    charge_fraction(memory_share, sm_share, reserved);
}

double Simulation::expected_rate(const SimTask& t) const {
    return expected_charge_rate(t.spec.learned, config_.gpus.type.usable_mib,
                                static_cast<int>(t.gpus.size()),
                                config_.scheduler.policy.task_reserved_share(t.spec));
}

void Simulation::note_user(const std::string& user) {
    if (users_seen_.insert(user).second) {
        shares_ = build_share_table(config_.shares, {}, users_seen_);
    }
}

void Simulation::update_standings() {
    ChargeRates running;
    for (const SimGpu& gpu : gpus_) {
        for (std::size_t i : gpu.residents) {
            SimTask& t = tasks_[i];
            // Each of its GPUs lists a multi-GPU task: its rate is counted once in all.
            const double per_gpu = 1.0 / static_cast<double>(t.gpus.size());
            if (t.phase == Phase::Active) {
                charge(t);
                running[t.spec.user] += t.charge_rate * per_gpu;
            } else if (t.phase == Phase::Starting) {
                running[t.spec.user] += expected_rate(t) * per_gpu;
            }
        }
    }
    UserStandings standings;
    for (const auto& [user, factor] : fair_share_factors(ledger_, shares_, now_, running,
                                                         config_.fairshare_horizon_s)) {
        standings[user].factor = factor;
    }
    scheduler_.set_standings(std::move(standings));
}

void Simulation::maybe_preempt(TaskId head) {
    const auto h = static_cast<std::size_t>(head);
    if (preemption_budget_.made_room_for(head)) {  // one stop per waiting task until it starts
        return;
    }
    const UserStandings& standings = scheduler_.standings();
    const CarmaConfig& cc = config_.scheduler.carma;
    const PriorityWeights weights{cc.fair_share_weight, cc.age_weight};
    std::vector<RunningAttempt> running;
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const SimTask& t = tasks_[i];
        if (t.phase == Phase::Active || t.phase == Phase::Starting) {
            // Its priority once stopped: price_stops below.
            RunningAttempt& a = running.emplace_back(RunningAttempt{
                static_cast<TaskId>(i), t.spec.user, t.dispatched_at,
                t.phase == Phase::Active ? t.charge_rate : expected_rate(t), t.spec.requeue});
            a.recovered = t.recovered;
            a.nice = t.spec.nice;
        }
    }
    // A task on the recovery queue waits for an idle GPU and has no fair-share priority.
    const std::optional<double> head_priority = scheduler_.priority(head, now_);
    if (!head_priority) {
        return;
    }
    const SimTask& ht = tasks_[h];
    // As the daemon: a user's stops are bounded within a window, whatever tasks they are for.
    preemption_budget_.forget_before(now_);
    if (!preemption_budget_.may_stop_for(ht.spec.user, now_)) {
        return;
    }
    const PreemptionAsk ask{ht.spec.user,
                            expected_charge_rate(ht.spec.learned, config_.gpus.type.usable_mib,
                                                 std::max(ht.spec.gpus, 1),
                                                 config_.scheduler.policy.task_reserved_share(ht.spec)),
                            *head_priority};
    const auto head_standing = standings.find(ht.spec.user);
    price_stops(running, ask, head_standing != standings.end() ? head_standing->second.factor : 1,
                ledger_, shares_, now_, config_.fairshare_horizon_s, weights);
    const auto victim = choose_preemption(
        ask, std::move(running), shares_, now_, config_.preemption,
        [&](TaskId v) { return head_would_start_without(h, static_cast<std::size_t>(v)); });
    if (victim) {
        const SimTask& v = tasks_[static_cast<std::size_t>(*victim)];
        preemption_budget_.record(StopMade{
            now_, ht.spec.user, head, *victim, v.spec.user,
            lost_gpu_s(0, now_ - v.dispatched_at, v.charge_rate)});
        preempt(static_cast<std::size_t>(*victim));
    }
}

bool Simulation::head_would_start_without(std::size_t head, std::size_t victim) {
    std::vector<GpuView> views = views_;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
        GpuView& v = views[g];
        v.locked = scheduler_.warmup().locked(static_cast<int>(g), now_);
        v.residents.clear();
        v.has_processes = false;
        for (std::size_t i : gpus_[g].residents) {
            if (i != victim) {
                v.residents.push_back(resident_view(i));
                v.has_processes = v.has_processes || tasks_[i].phase == Phase::Active;
            }
        }
        if (std::find(gpus_[g].residents.begin(), gpus_[g].residents.end(), victim) !=
                gpus_[g].residents.end() &&
            tasks_[victim].phase == Phase::Active) {
            // What the monitor will read once its memory is freed.
            v.stats.available_mib +=
                static_cast<MiB>(model::memory_at(resident_memory(victim), now_));
        }
    }
    return carma_would_start(config_.scheduler.policy, tasks_[head].spec, views,
                             config_.scheduler.placement, config_.scheduler.carma);
}

void Simulation::preempt(std::size_t i) {
    SimTask& t = tasks_[i];
    const auto gpus = affected_gpus(t.gpus);
    before_change(gpus);
    account_segment(t);
    charge(t);
    if (t.phase == Phase::Active) {
        advance_progress(t);
        const double done = solo_work(t) - t.work_left;
        if (t.checkpoint_s > 0) {
            t.kept_work = std::floor(done / t.checkpoint_s) * t.checkpoint_s;
        }
        if (t.kept_work > 0) {
            // Observed, and an over-estimate by the work lost since the last checkpoint.
            t.resumed_wall_s += now_ - t.dispatched_at;
        }
    }
    t.charge_rate = 0;
    remove_from_gpus(i);
    ++t.version;
    ++preemptions_;
    end_span(t.record, AttemptOutcome::Preempted);
    scheduler_.task_exited(static_cast<TaskId>(i));
    // Queued again now: its bounded wait starts over, so it waits behind the head it made room
    // for (core/preemption.h).
    queue_again(i, false);
    after_change(gpus);
    request_tick(now_);
}

}  // namespace carma::sim::engine
