#include "sim/simulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/metric_window.h"
#include "model/constants.h"
#include "model/memory.h"

namespace carma::sim {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

enum class EventKind { Arrival, Activate, RampEnd, Finish, Oom };

struct Event {
    double t = 0;
    long seq = 0;  // FIFO among equal times
    EventKind kind = EventKind::Arrival;
    std::size_t index = 0;  // task, or GPU for Oom
    long version = 0;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

enum class Phase { NotArrived, Queued, Starting, Active, Done, Rejected, Failed };

struct SimTask {
    TaskSpec spec;
    model::WorkloadProfile profile;
    Phase phase = Phase::NotArrived;
    std::vector<int> gpus;
    double queued_at = 0;
    double active_at = 0;
    double work_left = 0;    // seconds of solo GPU-active time still to do
    double speed = 1;
    double progress_at = 0;  // time work_left was last brought up to date
    long version = 0;        // invalidates stale Finish events
    long launch_order = 0;
    double dispatched_at = 0;
    // Mean GPU SM activity while this attempt was GPU-active, for history: alone on its GPU when
    // it ever was (what a monitor can attribute to it), else shared.
    double activity_alone = 0, time_alone = 0, activity_shared = 0, time_shared = 0;
    std::size_t exact_key = 0;   // into Simulation::exact_ / family_
    std::size_t family_key = 0;
    std::size_t learn_key = 0;   // command, family and memory information: what it learns from
    std::uint64_t world_id = 0;  // its workload, as the world knows it
    MiB world_peak_mib = 0;      // this attempt's peak in the world
    // What carma's own predictor said while this attempt shared its GPUs (from the learned
    // figures of its co-runners), for core/speed_correction.h; the current segment's state.
    double shared_s = 0, predicted_shared_s = 0, others_activity_s = 0;
    bool shared_now = false;
    double predicted_now = 1, others_now = 0;
    TaskRecord record;
};

struct SimGpu {
    std::vector<std::size_t> residents;  // tasks starting or active here, launch order
    MetricWindow window;
    long sampled_through = -1;           // last whole second sampled
    MetricSample last_pushed;
    std::size_t same_count = 0;          // consecutive identical samples at the window's end
    bool stats_dirty = true;
    WindowStats stats;
    model::GpuActivity activity;
    double power_w = 0;
    double integrated_to = 0;
    double energy_j = 0;
    double smact_s = 0;
    double smocc_s = 0;
    double memory_frac_s = 0;
    long version = 0;  // invalidates stale Oom events
    GpuTimeline timeline;
};

bool same_sample(const MetricSample& a, const MetricSample& b) {
    return a == b;
}

class Simulation {
public:
    Simulation(const Trace& trace, const model::Catalog& catalog, const SimConfig& config)
        : config_(config),
          correction_(std::make_shared<SpeedCorrection>(std::string(model::to_string(config.sharing)))),
          raw_predict_(model::speed_predictor(config.sharing)),
          scheduler_(scheduler_config(config, correction_)),
          world_(model::WorldConfig{config.world.kind, config.world.bias, config.world.noise,
                                    config.seed},
                 config.sharing),
          rng_(config.seed),
          learning_(config.scheduler.policy.carma) {
        const int n = config.gpus.count;
        gpus_.resize(static_cast<std::size_t>(n));
        for (int g = 0; g < n; ++g) {
            SimGpu& gpu = gpus_[static_cast<std::size_t>(g)];
            gpu.window = MetricWindow(config.window_samples);
            gpu.timeline.gpu = g;
            gpu.power_w = config.gpus.type.idle_power_w;
            capacity_.push_back(
                GpuCapacity{g, config.gpus.type.usable_mib, config.gpus.node_of(g)});
        }
        views_.resize(gpus_.size());
        // GPU indices run over all nodes (0..count-1): placements and warm-up locks need them
        // unique; each view names its node (n1, n2, ...; none on one server).
        for (std::size_t g = 0; g < views_.size(); ++g) {
            views_[g].node = config.gpus.node_of(static_cast<int>(g));
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
    }

    static SchedulerConfig scheduler_config(const SimConfig& config,
                                            const std::shared_ptr<SpeedCorrection>& correction) {
        SchedulerConfig sc = config.scheduler;
        sc.placement.memory_limits = config.memory_limits;
        if (!sc.placement.predict_speeds) {
            sc.placement.predict_speeds = model::speed_predictor(config.sharing);
            if (config.speed_correction && config.scheduler.policy.carma) {
                sc.placement.predict_speeds =
                    corrected_predictor(std::move(sc.placement.predict_speeds), correction);
            }
        }
        return sc;
    }

    static std::size_t key_index(std::unordered_map<std::string, std::size_t>& keys,
                                 std::vector<std::vector<RunFacts>>& runs, const std::string& key) {
        auto [it, added] = keys.emplace(key, runs.size());
        if (added) {
            runs.emplace_back();
        }
        return it->second;
    }

    SimHistory history() const {
        SimHistory h;
        for (const auto& [key, index] : exact_keys_) {
            if (!exact_[index].empty()) {
                h.exact[key] = exact_[index];
            }
            if (index < solo_.size() && !solo_[index].empty()) {
                h.solo_s[key] = solo_[index];
            }
        }
        h.speed_corrections = correction_->entries();
        for (const auto& [key, index] : family_keys_) {
            if (!family_[index].empty()) {
                h.family[key] = family_[index];
            }
        }
        return h;
    }

    PolicyResult run() {
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

private:
    // --- event plumbing ---------------------------------------------------------------------
    void push_event(double t, EventKind kind, std::size_t index, long version) {
        events_.push(Event{t, seq_++, kind, index, version});
    }

    void request_tick(double t) {
        if (!scheduler_.idle()) {
            next_tick_ = std::min(next_tick_, std::ceil(t));
        }
    }

    void handle(const Event& e) {
        now_ = e.t;
        switch (e.kind) {
            case EventKind::Arrival: arrive(e.index); break;
            case EventKind::Activate: activate(e.index, e.version); break;
            case EventKind::RampEnd: ramp_end(e.index, e.version); break;
            case EventKind::Finish: complete(e.index, e.version); break;
            case EventKind::Oom: oom(e.index, e.version); break;
        }
    }

    // --- monitor ------------------------------------------------------------------------------
    MetricSample sample_at(const SimGpu& gpu, double t) {
        MetricSample s;
        double used = 0;
        for (std::size_t i : gpu.residents) {
            used += model::memory_at(resident_memory(i), t);
        }
        s.free_mib = std::max<MiB>(0, config_.gpus.type.usable_mib - static_cast<MiB>(used));
        s.smact = gpu.activity.smact;
        s.smocc = gpu.activity.smocc;
        s.drama = gpu.activity.drama;
        s.util = gpu.activity.util;
        s.power_w = gpu.power_w;
        s.sources = MetricSources::all(MetricSource::Emulated);
        if (config_.metric_noise_sd > 0 && gpu.activity.active) {
            std::normal_distribution<double> noise(0.0, config_.metric_noise_sd);
            s.smact = std::clamp(gpu.activity.smact + noise(rng_), 0.0, 1.0);
            s.smocc = std::clamp(gpu.activity.smocc + noise(rng_), 0.0, 1.0);
            s.drama = std::clamp(gpu.activity.drama + noise(rng_), 0.0, 1.0);
        }
        return s;
    }

    bool memory_changing(const SimGpu& gpu, double from, double to) const {
        for (std::size_t i : gpu.residents) {
            const SimTask& t = tasks_[i];
            if (t.phase != Phase::Active) {
                continue;
            }
            const double ramp_end = t.active_at + model::kRampSeconds;
            if (ramp_end > from && t.active_at <= to) {
                return true;
            }
        }
        return false;
    }

    // Takes the samples of whole seconds up to `upto` (inclusive) with the GPU's current state.
    void flush_samples(std::size_t g, double upto) {
        SimGpu& gpu = gpus_[g];
        const long last = static_cast<long>(std::floor(upto));
        if (last <= gpu.sampled_through) {
            return;
        }
        const long capacity = static_cast<long>(gpu.window.capacity());
        const long first = std::max(gpu.sampled_through + 1, last - capacity + 1);
        gpu.sampled_through = last;
        const bool noisy = config_.metric_noise_sd > 0 && gpu.activity.active;
        if (!noisy && !memory_changing(gpu, static_cast<double>(first), static_cast<double>(last))) {
            const MetricSample s = sample_at(gpu, static_cast<double>(last));
            if (same_sample(s, gpu.last_pushed) && gpu.same_count >= gpu.window.capacity()) {
                return;  // the window already holds nothing but this sample
            }
            const auto count = static_cast<std::size_t>(last - first + 1);
            gpu.window.push_repeated(s, count);
            gpu.same_count = same_sample(s, gpu.last_pushed) ? gpu.same_count + count : count;
            gpu.last_pushed = s;
            gpu.stats_dirty = true;
            return;
        }
        for (long k = first; k <= last; ++k) {
            const MetricSample s = sample_at(gpu, static_cast<double>(k));
            gpu.window.push(s);
            gpu.same_count = same_sample(s, gpu.last_pushed) ? gpu.same_count + 1 : 1;
            gpu.last_pushed = s;
        }
        gpu.stats_dirty = true;
    }

    bool settled(const SimGpu& gpu) const {
        return config_.metric_noise_sd <= 0 || !gpu.activity.active
                   ? gpu.same_count >= gpu.window.capacity()
                   : false;
    }

    // --- accounting ---------------------------------------------------------------------------
    double memory_used(const SimGpu& gpu, double t) const {
        double used = 0;
        for (std::size_t i : gpu.residents) {
            used += model::memory_at(resident_memory(i), t);
        }
        return used;
    }

    void integrate(std::size_t g, double t) {
        SimGpu& gpu = gpus_[g];
        if (!started_) {
            gpu.integrated_to = t;
            return;
        }
        const double dt = t - gpu.integrated_to;
        if (dt <= 0) {
            return;
        }
        const auto cap = static_cast<double>(config_.gpus.type.usable_mib);
        // Memory is linear between events (ramp ends are events), so the trapezoid is exact.
        const double mem = 0.5 * (memory_used(gpu, gpu.integrated_to) + memory_used(gpu, t));
        gpu.energy_j += gpu.power_w * dt;
        gpu.smact_s += gpu.activity.smact * dt;
        gpu.smocc_s += gpu.activity.smocc * dt;
        gpu.memory_frac_s += std::min(1.0, mem / cap) * dt;
        gpu.integrated_to = t;
        std::size_t active = 0;
        for (std::size_t i : gpu.residents) {
            active += tasks_[i].phase == Phase::Active ? 1 : 0;
        }
        for (std::size_t i : gpu.residents) {
            SimTask& task = tasks_[i];
            if (task.phase != Phase::Active) {
                continue;
            }
            double& sum = active == 1 ? task.activity_alone : task.activity_shared;
            double& time = active == 1 ? task.time_alone : task.time_shared;
            sum += gpu.activity.smact * dt;
            time += dt;
        }
    }

    model::ResidentMemory resident_memory(std::size_t i) const {
        const SimTask& t = tasks_[i];
        model::ResidentMemory r;
        r.task = static_cast<TaskId>(i);
        r.active_at = t.phase == Phase::Active ? t.active_at : kNever;
        r.context_mib = model::kContextMiB;
        r.peak_mib = t.world_peak_mib;
        r.ramp_s = model::kRampSeconds;
        r.order = t.launch_order;
        return r;
    }

    // --- state changes --------------------------------------------------------------------------
    // Every GPU whose rates can change when the set `changed` changes: those GPUs, plus the other
    // GPUs of multi-GPU tasks resident there (their speed is the slowest of their GPUs).
    std::vector<std::size_t> affected_gpus(const std::vector<int>& changed) const {
        std::vector<std::size_t> out;
        auto add = [&](std::size_t g) {
            if (std::find(out.begin(), out.end(), g) == out.end()) {
                out.push_back(g);
            }
        };
        for (int g : changed) {
            add(static_cast<std::size_t>(g));
            for (std::size_t i : gpus_[static_cast<std::size_t>(g)].residents) {
                for (int other : tasks_[i].gpus) {
                    add(static_cast<std::size_t>(other));
                }
            }
        }
        return out;
    }

    // Call before changing anything on these GPUs: samples and integrals up to now use the old
    // state.
    void before_change(const std::vector<std::size_t>& gpus) {
        for (std::size_t g : gpus) {
            flush_samples(g, std::nextafter(now_, -kNever));
            integrate(g, now_);
        }
    }

    // Task i's speed on GPU g in the world, among g's GPU-active residents.
    double world_speed(std::size_t i, std::size_t g) {
        world_tasks_.clear();
        std::size_t self = 0;
        for (std::size_t j : gpus_[g].residents) {
            if (tasks_[j].phase == Phase::Active) {
                if (j == i) {
                    self = world_tasks_.size();
                }
                world_tasks_.push_back(model::WorldTask{tasks_[j].world_id, tasks_[j].profile.util});
            }
        }
        world_speeds_.assign(world_tasks_.size(), 1.0);
        world_.speeds(world_tasks_, world_speeds_);
        return world_speeds_.empty() ? 1.0 : world_speeds_[self];
    }

    double learned_activity(std::size_t j) const {
        return tasks_[j].spec.learned.activity.value_or(config_.knowledge.default_activity);
    }

    // What carma's raw predictor says of task i on GPU g, from the learned figures of the GPU's
    // GPU-active tasks, as the daemon computes it from its ledger (the slowest GPU counts).
    void predict_for(std::size_t i, std::size_t g) {
        SimTask& t = tasks_[i];
        predict_in_.clear();
        std::size_t self = 0;
        double others = 0;
        for (std::size_t j : gpus_[g].residents) {
            if (tasks_[j].phase == Phase::Active) {
                if (j == i) {
                    self = predict_in_.size();
                } else {
                    others += learned_activity(j);
                }
                predict_in_.push_back(learned_activity(j));
            }
        }
        if (predict_in_.size() < 2) {
            return;
        }
        predict_out_.assign(predict_in_.size(), 1.0);
        raw_predict_(predict_in_, predict_out_);
        t.shared_now = true;
        t.predicted_now = std::min(t.predicted_now, predict_out_[self]);
        t.others_now = std::max(t.others_now, others);
    }

    // Brings the attempt's shared-time figures up to now (before its state changes or it ends).
    void account_segment(SimTask& t) {
        if (t.phase != Phase::Active || !t.shared_now) {
            return;
        }
        const double dt = now_ - t.progress_at;
        t.shared_s += dt;
        t.predicted_shared_s += t.predicted_now * dt;
        t.others_activity_s += t.others_now * dt;
    }

    // After a successful attempt: a solo run joins the solo history; a shared one, compared with
    // the solo history, teaches the predictor's error.
    void learn_speed_error(std::size_t i, double run_s) {
        SimTask& t = tasks_[i];
        if (t.exact_key >= solo_.size()) {
            solo_.resize(exact_.size());
        }
        std::vector<double>& solo = solo_[t.exact_key];
        if (t.shared_s <= 0) {
            solo.push_back(run_s);
            if (solo.size() > 20) {
                solo.erase(solo.begin());
            }
            return;
        }
        if (solo.empty() || !learning_) {
            return;
        }
        std::vector<double> sorted = solo;
        std::sort(sorted.begin(), sorted.end());
        SpeedObservation o;
        o.family = family_names_[t.family_key];
        o.sharing_class = sharing_class(model::to_string(config_.sharing),
                                        t.others_activity_s / t.shared_s);
        o.solo_s = quantile_sorted(sorted, 0.5);
        o.run_s = run_s;
        o.shared_s = t.shared_s;
        o.predicted_shared_progress_s = t.predicted_shared_s;
        correction_->observe(o);
    }

    // Call after changing residents: new speeds, finish times, GPU activity, power, OOM check.
    void after_change(const std::vector<std::size_t>& gpus) {
        std::vector<std::size_t> touched_tasks;
        for (std::size_t g : gpus) {
            for (std::size_t i : gpus_[g].residents) {
                if (tasks_[i].phase == Phase::Active &&
                    std::find(touched_tasks.begin(), touched_tasks.end(), i) ==
                        touched_tasks.end()) {
                    touched_tasks.push_back(i);
                }
            }
        }
        for (std::size_t i : touched_tasks) {
            SimTask& t = tasks_[i];
            account_segment(t);
            t.work_left = std::max(0.0, t.work_left - t.speed * (now_ - t.progress_at));
            t.progress_at = now_;
            double speed = 1;
            t.shared_now = false;
            t.predicted_now = 1;
            t.others_now = 0;
            for (int g : t.gpus) {
                speed = std::min(speed, world_speed(i, static_cast<std::size_t>(g)));
                if (learning_) {
                    predict_for(i, static_cast<std::size_t>(g));
                }
            }
            t.speed = speed;
            ++t.version;
            push_event(now_ + t.work_left / std::max(speed, 1e-9), EventKind::Finish, i, t.version);
        }
        for (std::size_t g : gpus) {
            SimGpu& gpu = gpus_[g];
            contributions_.clear();
            for (std::size_t i : gpu.residents) {
                const SimTask& t = tasks_[i];
                if (t.phase == Phase::Active) {
                    contributions_.push_back(model::Contribution{t.profile.util, t.profile.smact,
                                                                 t.profile.smocc, t.profile.drama,
                                                                 t.speed});
                }
            }
            gpu.activity = model::aggregate_activity(contributions_);
            gpu.power_w = model::gpu_power_w(gpu.activity, config_.gpus.type, config_.power_scale);
            ++gpu.version;
            record_timeline(g);
            check_oom(g);
        }
        request_tick(now_);
    }

    void record_timeline(std::size_t g) {
        if (!config_.record_timelines) {
            return;
        }
        SimGpu& gpu = gpus_[g];
        TimelinePoint p;
        p.t_s = now_;
        p.smact = gpu.activity.smact;
        p.smocc = gpu.activity.smocc;
        p.memory_used_frac =
            memory_used(gpu, now_) / static_cast<double>(config_.gpus.type.usable_mib);
        p.power_w = gpu.power_w;
        p.tasks = static_cast<int>(gpu.residents.size());
        if (!gpu.timeline.points.empty() && gpu.timeline.points.back().t_s == now_) {
            gpu.timeline.points.back() = p;
        } else {
            gpu.timeline.points.push_back(p);
        }
    }

    void check_oom(std::size_t g) {
        SimGpu& gpu = gpus_[g];
        residents_mem_.clear();
        for (std::size_t i : gpu.residents) {
            if (tasks_[i].phase == Phase::Active) {
                residents_mem_.push_back(resident_memory(i));
            }
        }
        if (auto crash = model::next_oom(residents_mem_, config_.gpus.type.usable_mib, now_)) {
            push_event(crash->at, EventKind::Oom, g, gpu.version);
        }
    }

    void end_span(TaskRecord& record, AttemptOutcome outcome) const {
        if (!record.spans.empty()) {
            record.spans.back().end_s = now_;
            record.spans.back().outcome = outcome;
        }
    }

    void remove_from_gpus(std::size_t i) {
        for (int g : tasks_[i].gpus) {
            auto& r = gpus_[static_cast<std::size_t>(g)].residents;
            r.erase(std::remove(r.begin(), r.end(), i), r.end());
        }
    }

    // --- event handlers ---------------------------------------------------------------------------
    void arrive(std::size_t i) {
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
        learn(i);
        scheduler_.enqueue(static_cast<TaskId>(i), t.spec, now_);
        mark_queued(i, true);
        request_tick(now_);
    }

    // --- history and knowledge ---------------------------------------------------------------------
    void learn(std::size_t i) {
        SimTask& t = tasks_[i];
        t.spec.learned = derive_knowledge(t.spec, exact_[t.exact_key], family_[t.family_key],
                                          std::nullopt, config_.knowledge);
        if (learning_) {
            correction_->bind(learned_activity(i), family_names_[t.family_key]);
        }
    }

    // Only `carma` reads what waiting tasks learn; the others skip the bookkeeping.
    void mark_queued(std::size_t i, bool queued) {
        if (!learning_) {
            return;
        }
        const SimTask& t = tasks_[i];
        const int step = queued ? 1 : -1;
        if (queued ? queued_by_learn_[t.learn_key].insert(i).second
                   : queued_by_learn_[t.learn_key].erase(i) > 0) {
            for (auto* by :
                 {&learn_keys_by_exact_[t.exact_key], &learn_keys_by_family_[t.family_key]}) {
                if (((*by)[t.learn_key] += step) == 0) {
                    by->erase(t.learn_key);
                }
            }
        }
    }

    void remember(std::size_t i, const RunFacts& facts) {
        const SimTask& t = tasks_[i];
        exact_[t.exact_key].push_back(facts);
        family_[t.family_key].push_back(facts);
        if (!learning_) {
            return;
        }
        // Waiting tasks of the same command or family learn at once, as a deployment's would.
        // Tasks of one command with the same family and memory information learn the same
        // figures from the same histories: derived once per such group, not once per waiting
        // task (a backlog holds hundreds of each, and every end re-derived them all). When a
        // group's figures come out as they were, none of its tasks is touched (at 20,000 tasks
        // most groups keep theirs, and relearning every waiting task was most of the run).
        std::vector<std::size_t> groups;
        for (const auto* by :
             {&learn_keys_by_exact_[t.exact_key], &learn_keys_by_family_[t.family_key]}) {
            for (const auto& [key, count] : *by) {
                groups.push_back(key);
            }
        }
        std::sort(groups.begin(), groups.end());
        groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
        for (std::size_t key : groups) {
            const std::set<std::size_t>& members = queued_by_learn_[key];
            const std::size_t first = *members.begin();
            Learned before = std::move(tasks_[first].spec.learned);
            learn(first);
            if (same_learned(before, tasks_[first].spec.learned)) {
                continue;
            }
            for (std::size_t j : members) {
                if (j != first) {
                    tasks_[j].spec.learned = tasks_[first].spec.learned;
                }
                scheduler_.relearn(static_cast<TaskId>(j), tasks_[j].spec.learned);
            }
        }
    }

    static bool same_learned(const Learned& a, const Learned& b) {
        auto same = [](const std::optional<double>& x, const std::optional<double>& y) {
            return x.has_value() == y.has_value() &&
                   (!x || std::bit_cast<std::uint64_t>(*x) == std::bit_cast<std::uint64_t>(*y));
        };
        return a.need_mib == b.need_mib && a.margin_mib == b.margin_mib &&
               a.lower_bound_mib == b.lower_bound_mib && a.runs == b.runs &&
               same(a.duration_s, b.duration_s) && same(a.activity, b.activity) &&
               a.basis == b.basis;
    }

    // Tasks of one key derive the same figures: the same histories and what derive_knowledge
    // reads of a task besides them.
    std::size_t learn_key_of(const SimTask& t) {
        const MemoryInfo& m = t.spec.memory;
        auto opt = [](const std::optional<MiB>& v) {
            return v ? fmt::format("{}", *v) : std::string("-");
        };
        std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", t.exact_key, t.family_key,
                                      opt(m.declared_mib), opt(m.profiled_mib), opt(m.horus_mib),
                                      opt(m.faketensor_mib), opt(m.gpumemnet_mib));
        if (m.model) {
            key += fmt::format("|{}|{}|{}", std::bit_cast<std::uint64_t>(m.model->parameters),
                               std::bit_cast<std::uint64_t>(m.model->activations_per_sample),
                               m.model->batch_size);
        }
        const std::size_t next = learn_keys_.size();
        return learn_keys_.try_emplace(std::move(key), next).first->second;
    }

    RunFacts attempt_facts(const SimTask& t, MiB peak) const {
        RunFacts f;
        f.peak_mib = peak;
        f.run_s = now_ - t.dispatched_at;
        // Only what the monitor can attribute to the task: its GPUs' activity while it ran alone.
        // A GPU-level reading with co-runners includes theirs and would over-state its demand.
        if (t.time_alone > 0) {
            f.activity = t.activity_alone / t.time_alone;
        }
        return f;
    }

    void dispatch(std::size_t i, const std::vector<int>& gpus) {
        SimTask& t = tasks_[i];
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
        mark_queued(i, false);
        t.gpus = gpus;
        t.record.gpu_ids = gpus;
        t.dispatched_at = now_;
        t.activity_alone = t.time_alone = t.activity_shared = t.time_shared = 0;
        t.shared_s = t.predicted_shared_s = t.others_activity_s = 0;
        t.shared_now = false;
        t.launch_order = next_launch_order_++;
        t.record.wait_s += now_ - t.queued_at;
        if (t.record.attempts == 0) {
            t.record.first_start_s = now_;
        }
        ++t.record.attempts;
        t.world_peak_mib = world_.peak_mib(t.profile.m_peak_mib, static_cast<std::uint64_t>(i),
                                           t.record.attempts, config_.gpus.type.usable_mib);
        t.record.spans.push_back(AttemptSpan{now_, -1, gpus, AttemptOutcome::Running});
        ++t.version;
        for (int g : gpus) {
            gpus_[static_cast<std::size_t>(g)].residents.push_back(i);
            record_timeline(static_cast<std::size_t>(g));
        }
        push_event(now_ + t.profile.t_start_s, EventKind::Activate, i, t.version);
    }

    void activate(std::size_t i, long version) {
        SimTask& t = tasks_[i];
        if (t.version != version || t.phase != Phase::Starting) {
            return;
        }
        const auto gpus = affected_gpus(t.gpus);
        before_change(gpus);
        t.phase = Phase::Active;
        t.active_at = now_;
        t.work_left = std::max(0.0, t.profile.t_solo_s - t.profile.t_start_s);
        t.speed = 1;
        t.progress_at = now_;
        // The monitor sees the process at its next sample; the warm-up lock counts from there.
        scheduler_.task_seen(static_cast<TaskId>(i), std::ceil(now_));
        after_change(gpus);
        push_event(now_ + model::kRampSeconds, EventKind::RampEnd, i, t.version);
    }

    void ramp_end(std::size_t i, long version) {
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

    void complete(std::size_t i, long version) {
        SimTask& t = tasks_[i];
        if (t.version != version || t.phase != Phase::Active) {
            return;
        }
        const auto gpus = affected_gpus(t.gpus);
        before_change(gpus);
        account_segment(t);
        learn_speed_error(i, now_ - t.dispatched_at);
        remove_from_gpus(i);
        t.phase = Phase::Done;
        t.record.finish_s = now_;
        end_span(t.record, AttemptOutcome::Succeeded);
        t.record.slowdown = (now_ - t.dispatched_at) / std::max(t.profile.t_solo_s, 1e-9);
        RunFacts facts = attempt_facts(t, t.world_peak_mib);
        facts.succeeded = true;
        remember(i, facts);
        last_completion_ = std::max(last_completion_, now_);
        ++completed_;
        scheduler_.task_exited(static_cast<TaskId>(i));
        after_change(gpus);
        report_progress();
    }

    void oom(std::size_t g, long version) {
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
        RunFacts facts = attempt_facts(
            t, static_cast<MiB>(model::memory_at(resident_memory(i), now_)));
        facts.out_of_memory = true;
        remember(i, facts);
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
            t.phase = Phase::Queued;
            t.queued_at = now_;
            learn(i);
            scheduler_.enqueue_recovery(static_cast<TaskId>(i), t.spec, now_);
            mark_queued(i, true);
        }
        after_change(gpus);
    }

    // --- scheduler ---------------------------------------------------------------------------------
    void tick(double t) {
        now_ = t;
        for (std::size_t g = 0; g < gpus_.size(); ++g) {
            SimGpu& gpu = gpus_[g];
            flush_samples(g, t);
            // Only the collocation path reads window statistics; exclusive never does.
            if (gpu.stats_dirty && config_.scheduler.policy.collocate) {
                gpu.stats = gpu.window.stats();
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
            if (learning_) {
                // What carma plans with: each resident's own learned figures.
                v.residents.clear();
                for (std::size_t i : gpu.residents) {
                    const SimTask& r = tasks_[i];
                    const Learned& l = r.spec.learned;
                    v.residents.push_back(ResidentView{
                        static_cast<TaskId>(i), l.activity.value_or(config_.knowledge.default_activity),
                        l.need_mib,
                        l.duration_s ? std::optional<double>(r.dispatched_at + *l.duration_s)
                                     : std::nullopt});
                }
            }
        }
        StepResult step = scheduler_.step(views_, t);
        for (const Rejection& r : step.rejected) {
            SimTask& task = tasks_[static_cast<std::size_t>(r.task)];
            task.phase = Phase::Rejected;
            task.record.rejected = true;
            task.record.reject_reason = r.reason;
            task.record.left_s = t;
        }
        for (const Placement& p : step.placed) {
            dispatch(static_cast<std::size_t>(p.task), p.gpus);
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

    void give_up_waiting() {
        for (SimTask& t : tasks_) {
            if (t.phase == Phase::Queued) {
                t.phase = Phase::Failed;
            }
        }
    }

    void report_progress() {
        if (config_.progress && (completed_ % 64 == 0 || completed_ == tasks_.size())) {
            config_.progress(static_cast<double>(completed_) / static_cast<double>(tasks_.size()));
        }
    }

    // --- results ------------------------------------------------------------------------------------
    PolicyResult finish() {
        PolicyResult r;
        r.policy = config_.scheduler.policy.name;
        const double end = started_ ? std::max(last_completion_, first_dispatch_) : 0;
        for (std::size_t g = 0; g < gpus_.size(); ++g) {
            now_ = end;
            integrate(g, end);
        }
        r.makespan_s = started_ ? end - first_dispatch_ : 0;
        std::vector<double> jct, wait, slowdowns;
        for (const SimTask& t : tasks_) {
            r.tasks.push_back(t.record);
            r.attempts += t.record.attempts;
            if (t.phase == Phase::Rejected) {
                ++r.tasks_rejected;
            }
            if (t.phase == Phase::Done) {
                ++r.tasks_completed;
                jct.push_back(t.record.finish_s - t.record.submit_s);
                wait.push_back(t.record.wait_s);
                slowdowns.push_back(t.record.slowdown);
                r.max_wait_s = std::max(r.max_wait_s, t.record.wait_s);
            }
        }
        r.oom_crashes = oom_crashes_;
        auto mean = [](const std::vector<double>& v) {
            double s = 0;
            for (double x : v) {
                s += x;
            }
            return v.empty() ? 0.0 : s / static_cast<double>(v.size());
        };
        auto p95 = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return quantile_sorted(v, 0.95);
        };
        r.mean_jct_s = mean(jct);
        r.p95_jct_s = p95(jct);
        r.mean_wait_s = mean(wait);
        r.p95_wait_s = p95(wait);
        r.p95_slowdown = p95(slowdowns);
        const double span = r.makespan_s > 0 ? r.makespan_s : 1;
        for (std::size_t g = 0; g < gpus_.size(); ++g) {
            const SimGpu& gpu = gpus_[g];
            GpuSummary s;
            s.gpu = static_cast<int>(g);
            s.mean_smact = gpu.smact_s / span;
            s.mean_smocc = gpu.smocc_s / span;
            s.mean_memory_used_frac = gpu.memory_frac_s / span;
            s.energy_j = gpu.energy_j;
            r.energy_j += gpu.energy_j;
            r.mean_smact += s.mean_smact / static_cast<double>(gpus_.size());
            r.mean_smocc += s.mean_smocc / static_cast<double>(gpus_.size());
            r.mean_memory_used_frac += s.mean_memory_used_frac / static_cast<double>(gpus_.size());
            r.per_gpu.push_back(s);
            if (config_.record_timelines) {
                r.timelines.push_back(gpu.timeline);
            }
        }
        return r;
    }

    const SimConfig& config_;
    std::shared_ptr<SpeedCorrection> correction_;  // before scheduler_: its predictor reads it
    SpeedPredictor raw_predict_;
    Scheduler scheduler_;
    model::World world_;
    std::vector<model::WorldTask> world_tasks_;  // scratch
    std::vector<double> world_speeds_, predict_in_, predict_out_;  // scratch
    std::vector<std::vector<double>> solo_;  // solo run times, by exact key index
    std::vector<std::string> family_names_;  // by family key index
    std::mt19937_64 rng_;
    std::vector<SimTask> tasks_;
    std::vector<SimGpu> gpus_;
    std::vector<GpuCapacity> capacity_;
    std::vector<GpuView> views_;
    std::vector<model::Contribution> contributions_;       // scratch
    std::vector<model::ResidentMemory> residents_mem_;     // scratch
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
    long seq_ = 0;
    long next_launch_order_ = 0;
    double now_ = 0;
    double next_tick_ = kNever;
    bool started_ = false;
    double first_dispatch_ = 0;
    double last_completion_ = 0;
    std::size_t completed_ = 0;
    int oom_crashes_ = 0;
    bool learning_ = false;  // the policy reads TaskSpec::learned
    std::unordered_map<std::string, std::size_t> exact_keys_, family_keys_;
    std::vector<std::vector<RunFacts>> exact_, family_;  // history, by key index
    std::unordered_map<std::string, std::size_t> learn_keys_;
    // Waiting tasks by learn key; per command and family, their learn keys with a count.
    std::unordered_map<std::size_t, std::set<std::size_t>> queued_by_learn_;
    std::unordered_map<std::size_t, std::unordered_map<std::size_t, int>> learn_keys_by_exact_,
        learn_keys_by_family_;
};

}  // namespace

std::string fingerprint_of(const TraceEntry& e, int gpus) {
    return fmt::format("{}|{}|{}|{}|{}", e.task_name, e.model, e.batch_size, e.epochs, gpus);
}

std::string family_of(const TraceEntry& e, int gpus) {
    return fmt::format("{}|{}", e.model.empty() ? e.task_name : e.model, gpus);
}

PolicyResult simulate(const Trace& trace, const model::Catalog& catalog, const SimConfig& config,
                      SimHistory* history_out) {
    Simulation sim(trace, catalog, config);
    PolicyResult r = sim.run();
    if (history_out) {
        *history_out = sim.history();
    }
    return r;
}

SimHistory earlier_run_history(const Trace& trace, const model::Catalog& catalog,
                               const SimConfig& config) {
    SimConfig earlier = config;
    earlier.scheduler.policy = *find_policy("carma");
    earlier.history = nullptr;
    earlier.progress = nullptr;
    earlier.record_timelines = false;
    SimHistory h;
    simulate(trace, catalog, earlier, &h);
    return h;
}

}  // namespace carma::sim
