// What happens to a task in a simulated run (sim/simulation.h): it arrives and is queued or
// rejected, is dispatched onto GPUs, becomes GPU-active, ends its memory ramp, completes, or
// crashes out of memory and is queued again (or given up). Each step updates the task's record
// (TaskRecord, its attempts) and tells the scheduler and the history what happened.

#include <algorithm>
#include <cmath>

#include "sim/simulation.h"

namespace carma::sim::engine {

void Simulation::arrive(std::size_t i) {
    SimTask& t = tasks_[i];
    t.queued_at = now_;
    if (auto ok = check_feasible(t.spec, capacity_); !ok) {
        t.phase = Phase::Rejected;
        t.record.rejected = true;
        t.record.reject_reason = ok.error().message;
        t.record.left_s = now_;
        return;
    }
    t.phase = Phase::Queued;
    note_user(t.spec.user);
    learn(i);
    scheduler_.enqueue(static_cast<TaskId>(i), t.spec, now_);
    mark_queued(i, true);
    request_tick(now_);
}

void Simulation::dispatch(std::size_t i, const std::vector<int>& gpus, bool recovered,
                          const std::string& node) {
    SimTask& t = tasks_[i];
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
        if (hosts_[h].node == node) {
            take_host(hosts_[h], t.spec);
            t.host = static_cast<int>(h);
        }
    }
    if (!started_) {
        started_ = true;
        first_dispatch_ = now_;
        for (std::size_t g = 0; g < gpus_.size(); ++g) {
            gpus_[g].integrated_to = now_;
        }
    }
    std::vector<std::size_t> touched;
    for (int g : gpus) {
        touched.push_back(static_cast<std::size_t>(g));
    }
    before_change(touched);
    t.phase = Phase::Starting;
    preemption_budget_.head_started(static_cast<TaskId>(i));
    t.recovered = recovered;
    mark_queued(i, false);
    t.gpus = gpus;
    t.record.gpu_ids = gpus;
    t.dispatched_at = now_;
    t.activity_alone = t.time_alone = t.activity_shared = t.time_shared = 0;
    t.shared_s = t.predicted_shared_s = t.others_activity_s = t.sharers_s = 0;
    t.shared_now = false;
    t.launch_order = next_launch_order_++;
    t.record.wait_s += now_ - t.queued_at;
    if (t.record.attempts == 0) {
        t.record.first_start_s = now_;
    }
    ++t.record.attempts;
    t.world_peak_mib = world_.peak_mib(t.profile.m_peak_mib, draw_key(i), t.record.attempts,
                                       config_.gpus.type.usable_mib);
    t.record.spans.push_back(AttemptSpan{now_, -1, gpus, AttemptOutcome::Running});
    ++t.version;
    for (int g : gpus) {
        gpus_[static_cast<std::size_t>(g)].residents.push_back(i);
        gpus_[static_cast<std::size_t>(g)].residents_changed = true;
        record_timeline(static_cast<std::size_t>(g));
    }
    push_event(now_ + t.profile.t_start_s, EventKind::Activate, i, t.version);
}

void Simulation::activate(std::size_t i, long version) {
    SimTask& t = tasks_[i];
    if (t.version != version || t.phase != Phase::Starting) {
        return;
    }
    const auto gpus = affected_gpus(t.gpus);
    before_change(gpus);
    t.phase = Phase::Active;
    t.active_at = now_;
    t.work_left = std::max(0.0, solo_work(t) - t.kept_work);
    t.speed = 1;
    t.progress_at = now_;
    // The monitor sees the process at its next sample; the warm-up lock counts from there.
    scheduler_.task_seen(static_cast<TaskId>(i), std::ceil(now_));
    after_change(gpus);
    if (t.gpus.empty()) {
        // A CPU-only task shares no GPU, so nothing in the world slows it: it runs at solo pace.
        push_event(now_ + t.work_left, EventKind::Finish, i, t.version);
    }
    push_event(now_ + model::kRampSeconds, EventKind::RampEnd, i, t.version);
}

void Simulation::ramp_end(std::size_t i, long version) {
    SimTask& t = tasks_[i];
    if (t.phase != Phase::Active) {
        return;
    }
    (void)version;
    std::vector<std::size_t> gpus;
    for (int g : t.gpus) {
        gpus.push_back(static_cast<std::size_t>(g));
    }
    before_change(gpus);
    for (std::size_t g : gpus) {
        record_timeline(g);
    }
}

void Simulation::complete(std::size_t i, long version) {
    SimTask& t = tasks_[i];
    if (t.version != version || t.phase != Phase::Active) {
        return;
    }
    const auto gpus = affected_gpus(t.gpus);
    before_change(gpus);
    account_segment(t);
    charge(t);
    learn_speed_error(i, observed_run_s(t));
    remove_from_gpus(i);
    t.phase = Phase::Done;
    t.record.finish_s = now_;
    end_span(t.record, AttemptOutcome::Succeeded);
    // Over what this attempt had to do alone: a preempted task resumes from its checkpoint.
    t.record.slowdown =
        (now_ - t.dispatched_at) * resumed_scale(t) / std::max(t.profile.t_solo_s, 1e-9);
    RunFacts facts = attempt_facts(t, t.world_peak_mib);
    facts.succeeded = true;
    remember(i, facts);
    last_completion_ = std::max(last_completion_, now_);
    ++completed_;
    scheduler_.task_exited(static_cast<TaskId>(i));
    after_change(gpus);
    report_progress();
}

void Simulation::oom(std::size_t g, long version) {
    if (gpus_[g].version != version) {
        return;
    }
    residents_mem_.clear();
    for (std::size_t i : gpus_[g].residents) {
        if (tasks_[i].phase == Phase::Active) {
            residents_mem_.push_back(resident_memory(i));
        }
    }
    auto crash = model::next_oom(residents_mem_, config_.gpus.type.usable_mib, now_);
    if (!crash || crash->at > now_) {
        return;
    }
    const auto i = static_cast<std::size_t>(crash->victim);
    SimTask& t = tasks_[i];
    const auto gpus = affected_gpus(t.gpus);
    before_change(gpus);
    // What it held when it crashed: a lower bound on its need, never the need itself.
    RunFacts facts = attempt_facts(t, static_cast<MiB>(model::memory_at(resident_memory(i), now_)));
    facts.out_of_memory = true;
    remember(i, facts);
    charge(t);
    t.charge_rate = 0;
    remove_from_gpus(i);
    ++t.version;
    ++t.record.oom_crashes;
    ++oom_crashes_;
    end_span(t.record, AttemptOutcome::OutOfMemory);
    scheduler_.task_exited(static_cast<TaskId>(i));
    if (t.record.attempts >= config_.max_attempts) {
        t.phase = Phase::Failed;
        t.record.left_s = now_;
    } else {
        queue_again(i, true);
    }
    after_change(gpus);
}

void Simulation::queue_again(std::size_t i, bool recovery) {
    SimTask& t = tasks_[i];
    t.phase = Phase::Queued;
    t.queued_at = now_;
    learn(i);
    if (recovery) {
        scheduler_.enqueue_recovery(static_cast<TaskId>(i), t.spec, now_);
    } else {
        scheduler_.enqueue(static_cast<TaskId>(i), t.spec, now_);
    }
    mark_queued(i, true);
}

double Simulation::solo_work(const SimTask& t) {
    return std::max(0.0, t.profile.t_solo_s - t.profile.t_start_s);
}

void Simulation::advance_progress(SimTask& t) const {
    t.work_left = std::max(0.0, t.work_left - t.speed * (now_ - t.progress_at));
    t.progress_at = now_;
}

std::uint64_t Simulation::draw_key(std::size_t i) const {
    const auto task = static_cast<std::uint64_t>(i);
    if (config_.draw_seed == 0 || config_.draw_seed == config_.seed) {
        return task;
    }
    // Any injective spread of (draw seed, task) will do: the world hashes the key again.
    return task ^ (config_.draw_seed * 0x9E3779B97F4A7C15ULL);
}

double Simulation::observed_run_s(const SimTask& t) const {
    return t.resumed_wall_s + (now_ - t.dispatched_at);
}

double Simulation::resumed_scale(const SimTask& t) {
    return t.kept_work > 0 ? t.profile.t_solo_s / std::max(t.profile.t_solo_s - t.kept_work, 1e-9)
                           : 1.0;
}

void Simulation::end_span(TaskRecord& record, AttemptOutcome outcome) const {
    if (!record.spans.empty()) {
        record.spans.back().end_s = now_;
        record.spans.back().outcome = outcome;
    }
}

RunFacts Simulation::attempt_facts(const SimTask& t, MiB peak) const {
    RunFacts f;
    f.peak_mib = peak;
    f.run_s = observed_run_s(t);
    // Only what the monitor can attribute to the task: its GPUs' activity while it ran alone.
    // A GPU-level reading with co-runners includes theirs and would over-state its demand.
    if (t.time_alone > 0) {
        f.activity = t.activity_alone / t.time_alone;
    }
    return f;
}

}  // namespace carma::sim::engine
