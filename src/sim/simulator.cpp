// The simulator's event loop (sim/simulator.h): the run's state set up from the trace and the
// starting history, then events in time order and scheduler ticks at whole seconds between
// them until nothing is left to happen; and the entry points simulate and earlier_run_history.
// What each event does lives in the simulation_*.cpp files (sim/simulation.h).

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/simulation.h"
#include "sim/simulator.h"

namespace carma::sim {

namespace engine {

namespace {

// The world the run's seed draws (every setting of config.world, its seed replaced).
model::WorldConfig world_of(const SimConfig& config) {
    model::WorldConfig w = config.world;
    w.seed = config.seed;
    return w;
}

}  // namespace

Simulation::Simulation(const Trace& trace, const model::Catalog& catalog, const SimConfig& config)
    : config_(config),
      correction_(std::make_shared<SpeedCorrection>(std::string(model::to_string(config.sharing)))),
      raw_predict_(model::speed_predictor(config.sharing)),
      scheduler_(scheduler_config(config, correction_)),
      world_(world_of(config), config.sharing),
      rng_(config.draw_seed != 0 ? config.draw_seed : config.seed),
      learning_(config.scheduler.policy.carma),
      ledger_(config.fairshare_half_life_s),
      preemption_budget_(config.preemption.max_stops_per_user, config.preemption.stops_window_s) {
    const int n = config.gpus.count;
    gpus_.resize(static_cast<std::size_t>(n));
    for (int g = 0; g < n; ++g) {
        SimGpu& gpu = gpus_[static_cast<std::size_t>(g)];
        gpu.window = MetricWindow(config.window_samples);
        gpu.timeline.gpu = g;
        gpu.power_w = config.gpus.type.idle_power_w;
        capacity_.push_back(GpuCapacity{g, config.gpus.type.usable_mib, config.gpus.node_of(g)});
    }
    views_.resize(gpus_.size());
    // GPU indices run over all nodes (0..count-1): placements and warm-up locks need them
    // unique; each view names its node (n1, n2, ...; none on one server).
    for (std::size_t g = 0; g < views_.size(); ++g) {
        views_[g].node = config.gpus.node_of(static_cast<int>(g));
    }
    // Each node's cores and host memory, where the run limits them (core/host.h).
    if (config.host_cpus > 0 || config.host_mem_mib > 0) {
        for (std::size_t g = 0; g < views_.size(); ++g) {
            if (hosts_.empty() || hosts_.back().node != views_[g].node) {
                const int cpus = config.host_cpus > 0 ? config.host_cpus : kMaxCpusPerTask;
                const MiB mem = config.host_mem_mib > 0 ? config.host_mem_mib : kMaxMemoryMib;
                hosts_.push_back(HostView{views_[g].node, cpus, cpus, mem, mem});
            }
        }
    }
    tasks_.reserve(trace.entries.size());
    if (config.history) {
        for (const auto& [key, runs] : config.history->exact) {
            exact_[key_index(exact_keys_, exact_, key)] = runs;
        }
        for (const auto& [key, runs] : config.history->family) {
            family_[key_index(family_keys_, family_, key)] = runs;
        }
        for (const auto& [key, runs] : config.history->solo_s) {
            const std::size_t k = key_index(exact_keys_, exact_, key);
            solo_.resize(std::max(solo_.size(), k + 1));
            solo_[k] = runs;
        }
        for (const SpeedCorrection::Entry& e : config.history->speed_corrections) {
            for (double k : e.k) {
                correction_->add(e.family, e.sharing_class, k);
            }
        }
    }
    for (const TraceEntry& e : trace.entries) {
        SimTask t;
        t.profile = resolve_profile(e, catalog);
        t.spec = model::task_spec_for(t.profile);
        t.spec.user = e.user;
        t.spec.exclusive = e.exclusive;
        t.spec.max_slowdown = e.max_slowdown;
        t.spec.nice = e.nice;
        t.spec.requeue = e.requeue;
        t.spec.cpus = e.cpus;
        t.spec.host_mem_mib = e.host_mem_mib;
        t.spec.gpu_milli = e.gpu_milli;
        t.checkpoint_s = e.checkpoint_s.value_or(0);
        t.record.user = e.user;
        t.record.exclusive = e.exclusive;
        t.record.max_slowdown = e.max_slowdown;
        constrained_ = constrained_ || e.exclusive || e.max_slowdown.has_value() ||
                       e.gpu_milli > 0;
        t.record.name = e.task_name;
        t.record.gpus = t.profile.gpus;
        t.record.submit_s = e.submit_s;
        t.exact_key = key_index(exact_keys_, exact_, fingerprint_of(e, t.profile.gpus));
        t.family_key = key_index(family_keys_, family_, family_of(e, t.profile.gpus));
        t.world_id = model::world_id(t.profile.name);
        family_names_.resize(family_.size());
        family_names_[t.family_key] = family_of(e, t.profile.gpus);
        t.learn_key = learn_key_of(t);
        tasks_.push_back(std::move(t));
        push_event(e.submit_s, EventKind::Arrival, tasks_.size() - 1, 0);
    }
    // Users are ordered by their factors only where there are several (one user's order is
    // carma's own whatever its factor).
    std::set<std::string> users;
    for (const TraceEntry& e : trace.entries) {
        users.insert(e.user);
    }
    by_user_ = users.size() > 1 && config.scheduler.policy.carma &&
               config.scheduler.carma.fair_share;
}

SchedulerConfig Simulation::scheduler_config(const SimConfig& config,
                                             const std::shared_ptr<SpeedCorrection>& correction) {
    SchedulerConfig sc = config.scheduler;
    sc.placement.memory_limits = config.memory_limits;
    if (!sc.placement.predict_speeds) {
        sc.placement.predict_speeds = model::speed_predictor(config.sharing);
        // The device model answers the same input the same way always; the correction changes
        // its answers when it learns, and says so.
        sc.placement.predictor_version = [] { return std::uint64_t{0}; };
        if (config.speed_correction && config.scheduler.policy.carma) {
            use_correction(sc.placement, correction);
        }
    }
    return sc;
}

PolicyResult Simulation::run() {
    // The monitor ran before the first submission: windows start full of idle samples.
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
        gpus_[g].sampled_through = -1;
    }
    while (true) {
        const double next_event = events_.empty() ? kNever : events_.top().t;
        if (next_event == kNever && next_tick_ == kNever) {
            break;
        }
        if (next_event <= next_tick_) {
            Event e = events_.top();
            events_.pop();
            handle(e);
        } else {
            const double t = next_tick_;
            next_tick_ = kNever;
            tick(t);
        }
    }
    give_up_waiting();
    return finish();
}

// --- events -----------------------------------------------------------------------------------

void Simulation::push_event(double t, EventKind kind, std::size_t index, long version) {
    events_.push(Event{t, seq_++, kind, index, version});
}

void Simulation::request_tick(double t) {
    if (!scheduler_.idle()) {
        next_tick_ = std::min(next_tick_, std::ceil(t));
    }
}

void Simulation::handle(const Event& e) {
    now_ = e.t;
    switch (e.kind) {
        case EventKind::Arrival:
            arrive(e.index);
            break;
        case EventKind::Activate:
            activate(e.index, e.version);
            break;
        case EventKind::RampEnd:
            ramp_end(e.index, e.version);
            break;
        case EventKind::Finish:
            complete(e.index, e.version);
            break;
        case EventKind::Oom:
            oom(e.index, e.version);
            break;
    }
}

// --- scheduler ticks ----------------------------------------------------------------------------

void Simulation::tick(double t) {
    now_ = t;
    if (by_user_) {
        update_standings();
    }
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
        SimGpu& gpu = gpus_[g];
        flush_samples(g, t);
        // Only the collocation path reads window statistics; exclusive never does, and most
        // of `carma`'s variants read no order statistics.
        if (gpu.stats_dirty && config_.scheduler.policy.collocate) {
            gpu.stats = config_.scheduler.policy.reads_order_statistics()
                            ? gpu.window.stats()
                            : gpu.window.stats_without_order_statistics();
            gpu.stats_dirty = false;
        }
        GpuView& v = views_[g];
        v.index = static_cast<int>(g);
        v.total_mib = config_.gpus.type.usable_mib;
        v.has_processes = false;
        for (std::size_t i : gpu.residents) {
            v.has_processes = v.has_processes || tasks_[i].phase == Phase::Active;
        }
        v.stats = gpu.stats;
        if ((learning_ || constrained_) && gpu.residents_changed) {
            // What carma plans with: each resident's own learned figures (fixed while it runs).
            gpu.residents_changed = false;
            v.residents.clear();
            for (std::size_t i : gpu.residents) {
                v.residents.push_back(resident_view(i));
            }
        }
    }
    StepResult step = scheduler_.step(views_, hosts_, t);
    for (const Rejection& r : step.rejected) {
        SimTask& task = tasks_[static_cast<std::size_t>(r.task)];
        task.phase = Phase::Rejected;
        task.record.rejected = true;
        task.record.reject_reason = r.reason;
        task.record.left_s = t;
    }
    for (const Placement& p : step.placed) {
        dispatch(static_cast<std::size_t>(p.task), p.gpus, p.recovered, p.node);
    }
    if (by_user_ && config_.preemption.enabled && step.pending_task) {
        maybe_preempt(*step.pending_task);
    }
    if (scheduler_.idle()) {
        return;
    }
    // Something still waits. The next second can decide differently only if a window is
    // still filling with new samples, a warm-up lock ends, or an event happens (events
    // request their own tick).
    bool unsettled = !step.placed.empty();
    for (const SimGpu& gpu : gpus_) {
        unsettled = unsettled || !settled(gpu);
    }
    if (unsettled) {
        next_tick_ = std::min(next_tick_, t + 1);
    } else if (auto unlock = scheduler_.warmup().next_unlock(t)) {
        next_tick_ = std::min(next_tick_, std::floor(*unlock) + 1);
    }
    // carma's order changes by itself when a task's bounded wait runs out.
    if (auto change = scheduler_.next_order_change(t)) {
        next_tick_ = std::min(next_tick_, std::max(t + 1, std::ceil(*change)));
    }
}

ResidentView Simulation::resident_view(std::size_t i) const {
    const SimTask& r = tasks_[i];
    const Learned& l = r.spec.learned;
    return ResidentView{
        static_cast<TaskId>(i),
        l.activity.value_or(config_.knowledge.default_activity),
        l.need_mib,
        l.duration_s ? std::optional<double>(r.dispatched_at + *l.duration_s) : std::nullopt,
        r.spec.exclusive,
        r.spec.max_slowdown,
        r.spec.gpu_milli};
}

void Simulation::give_up_waiting() {
    for (SimTask& t : tasks_) {
        if (t.phase == Phase::Queued) {
            t.phase = Phase::Failed;
        }
    }
}

}  // namespace engine

std::string fingerprint_of(const TraceEntry& e, int gpus) {
    return fmt::format("{}|{}|{}|{}|{}", e.task_name, e.model, e.batch_size, e.epochs, gpus);
}

std::string family_of(const TraceEntry& e, int gpus) {
    return fmt::format("{}|{}", e.model.empty() ? e.task_name : e.model, gpus);
}

PolicyResult simulate(const Trace& trace, const model::Catalog& catalog, const SimConfig& config,
                      SimHistory* history_out) {
    engine::Simulation sim(trace, catalog, config);
    PolicyResult r = sim.run();
    if (history_out) {
        *history_out = sim.history();
    }
    return r;
}

SimHistory earlier_run_history(const Trace& trace, const model::Catalog& catalog,
                               const SimConfig& config, std::uint64_t history_seed) {
    SimConfig earlier = config;
    earlier.draw_seed = history_seed;
    earlier.scheduler.policy = *find_policy("carma");
    earlier.history = nullptr;
    earlier.progress = nullptr;
    earlier.record_timelines = false;
    SimHistory h;
    simulate(trace, catalog, earlier, &h);
    return h;
}

}  // namespace carma::sim
