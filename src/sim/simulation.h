#pragma once
// Internal to src/sim: the state of one simulated run (sim/simulator.h's simulate) and the class
// that advances it, shared by the files that implement it. Not for callers outside the part.
//
// The run is one event loop over one set of state; each file holds one job of it:
//   simulator.cpp            the loop: setup from the trace, events, scheduler ticks, the entry
//                            points simulate and earlier_run_history
//   simulation_attempts.cpp  what happens to a task: arrival, dispatch, start of GPU activity,
//                            end of the memory ramp, completion, out-of-memory crash
//   simulation_devices.cpp   what the residents of a GPU do to it: speeds in the world, GPU
//                            activity and power, memory and the next out-of-memory crash
//   simulation_monitor.cpp   what is measured of a GPU: the monitor's samples into the metric
//                            windows, the report's timeline and the integrals behind the figures
//   simulation_knowledge.cpp what a deployment learns: history of finished attempts, the tasks'
//                            learned figures, and the error of carma's speed predictor
//   simulation_usage.cpp     fair share: what each attempt is charged, and the users' factors
//   simulation_results.cpp   the run's figures at its end (PolicyResult)

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fair_share.h"
#include "core/metric_window.h"
#include "core/preemption_budget.h"
#include "model/constants.h"
#include "model/memory.h"
#include "sim/simulator.h"

namespace carma::sim::engine {

inline constexpr double kNever = std::numeric_limits<double>::infinity();

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
    int host = -1;  // its node's position in Simulation::hosts_ while it runs there
    double queued_at = 0;
    double active_at = 0;
    double work_left = 0;    // seconds of solo GPU-active time still to do
    double speed = 1;
    double progress_at = 0;  // time work_left was last brought up to date
    long version = 0;        // invalidates stale Finish events
    long launch_order = 0;
    double dispatched_at = 0;
    // Mean GPU SM activity while this attempt was GPU-active, for history: alone on its GPU when
    // it ever was (what a monitor can attribute to it), else shared. Sums over the monitor's 1-Hz
    // samples, with their noise, and the number of samples: what a real server reads.
    double activity_alone = 0, time_alone = 0, activity_shared = 0, time_shared = 0;
    std::size_t exact_key = 0;   // into Simulation::exact_ / family_
    std::size_t family_key = 0;
    std::size_t learn_key = 0;   // command, family and memory information: what it learns from
    std::uint64_t world_id = 0;  // its workload, as the world knows it
    MiB world_peak_mib = 0;      // this attempt's peak in the world
    // What carma's own predictor said while this attempt shared its GPUs (from the learned
    // figures of its co-runners), their summed activity and how many tasks shared (itself
    // included), for core/speed_correction.h; the current segment's state.
    double shared_s = 0, predicted_shared_s = 0, others_activity_s = 0, sharers_s = 0;
    bool shared_now = false;
    double predicted_now = 1, others_now = 0, sharers_now = 0;
    // Fair share: GPUs' worth it is charged per second now (charge fraction x GPUs), since when.
    double charge_rate = 0, charged_at = 0;
    // Preemption (spec.requeue: it may be stopped and queued again): how often it saves its
    // progress (0: never, it starts over), and the solo seconds of work saved so far.
    double checkpoint_s = 0;
    double kept_work = 0;
    // The wall time of the earlier attempts this one continues from their checkpoint: with this
    // attempt's, what a server observes the task's run to have taken (never the solo truth).
    double resumed_wall_s = 0;
    bool recovered = false;  // this attempt is an out-of-memory relaunch (the recovery queue's)
    TaskRecord record;
};

struct SimGpu {
    std::vector<std::size_t> residents;  // tasks starting or active here, launch order
    // carma's view of the residents (GpuView::residents) must be built again: they changed.
    // Kept otherwise: a backlog's ticks outnumber its changes, and reading every resident's
    // task each tick was a tenth of a run on 64 GPUs.
    bool residents_changed = true;
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

class Simulation {
public:
    Simulation(const Trace& trace, const model::Catalog& catalog, const SimConfig& config);

    PolicyResult run();
    // What the run's history holds now: the start's and what the finished attempts added.
    SimHistory history() const;

private:
    // --- the loop (simulator.cpp) ----------------------------------------------------------------
    static SchedulerConfig scheduler_config(const SimConfig& config,
                                            const std::shared_ptr<SpeedCorrection>& correction);
    void push_event(double t, EventKind kind, std::size_t index, long version);
    void request_tick(double t);
    void handle(const Event& e);
    void tick(double t);
    void give_up_waiting();
    // What carma plans with of a resident: its own learned figures (fixed while it runs).
    ResidentView resident_view(std::size_t i) const;

    // --- what happens to a task (simulation_attempts.cpp) ----------------------------------------
    void arrive(std::size_t i);
    void dispatch(std::size_t i, const std::vector<int>& gpus, bool recovered,
                  const std::string& node);
    void activate(std::size_t i, long version);
    void ramp_end(std::size_t i, long version);
    void complete(std::size_t i, long version);
    void oom(std::size_t g, long version);
    // Back into the queue now, after an attempt ended without completing: the recovery queue
    // after an out-of-memory crash, the main queue after a preemption.
    void queue_again(std::size_t i, bool recovery);
    void end_span(TaskRecord& record, AttemptOutcome outcome) const;
    RunFacts attempt_facts(const SimTask& t, MiB peak) const;
    // A task that resumed from a checkpoint did only part of its work in this attempt: what its
    // run time is multiplied by to stand for a whole run at the same pace (1 otherwise).
    static double resumed_scale(const SimTask& t);
    // The run time an observer learns from an attempt that ends now (SimTask::resumed_wall_s).
    double observed_run_s(const SimTask& t) const;
    // Task i's identity in this run's draws: the task itself, or with its own seed
    // (SimConfig::draw_seed) another draw of the same task.
    std::uint64_t draw_key(std::size_t i) const;
    // Seconds of solo GPU-active work a whole run does (its solo time less its start-up).
    static double solo_work(const SimTask& t);
    // Brings work_left up to now at the task's current speed.
    void advance_progress(SimTask& t) const;

    // --- what the residents do to a GPU (simulation_devices.cpp) ---------------------------------
    // Every GPU whose rates can change when the set `changed` changes: those GPUs, plus the other
    // GPUs of multi-GPU tasks resident there (their speed is the slowest of their GPUs).
    std::vector<std::size_t> affected_gpus(const std::vector<int>& changed) const;
    // Call before changing anything on these GPUs: samples and integrals up to now use the old
    // state.
    void before_change(const std::vector<std::size_t>& gpus);
    // Call after changing residents: new speeds, finish times, GPU activity, power, OOM check.
    void after_change(const std::vector<std::size_t>& gpus);
    // Task i's speed on GPU g in the world, among g's GPU-active residents.
    double world_speed(std::size_t i, std::size_t g);
    void check_oom(std::size_t g);
    void remove_from_gpus(std::size_t i);
    model::ResidentMemory resident_memory(std::size_t i) const;

    // --- what is measured of a GPU (simulation_monitor.cpp) --------------------------------------
    MetricSample sample_at(const SimGpu& gpu, double t);
    bool memory_changing(const SimGpu& gpu, double from, double to) const;
    // Takes the samples of whole seconds up to `upto` (inclusive) with the GPU's current state.
    void flush_samples(std::size_t g, double upto);
    bool settled(const SimGpu& gpu) const;
    // Memory used on the GPU at `t` by its residents.
    double memory_used(const SimGpu& gpu, double t) const;
    void integrate(std::size_t g, double t);
    void record_timeline(std::size_t g);

    // --- what a deployment learns (simulation_knowledge.cpp) -------------------------------------
    static std::size_t key_index(std::unordered_map<std::string, std::size_t>& keys,
                                 std::vector<std::vector<RunFacts>>& runs, const std::string& key);
    void learn(std::size_t i);
    // Only `carma` reads what waiting tasks learn; the others skip the bookkeeping.
    void mark_queued(std::size_t i, bool queued);
    void remember(std::size_t i, const RunFacts& facts);
    static bool same_learned(const Learned& a, const Learned& b);
    // Tasks of one key derive the same figures: the same histories and what derive_knowledge
    // reads of a task besides them.
    std::size_t learn_key_of(const SimTask& t);
    double learned_activity(std::size_t j) const;
    // What carma's raw predictor says of task i on GPU g, from the learned figures of the GPU's
    // GPU-active tasks, as the daemon computes it from its ledger (the slowest GPU counts).
    void predict_for(std::size_t i, std::size_t g);
    // Brings the attempt's shared-time figures up to now (before its state changes or it ends).
    void account_segment(SimTask& t);
    // After a successful attempt: a solo run joins the solo history; a shared one, compared with
    // the solo history, teaches the predictor's error.
    void learn_speed_error(std::size_t i, double run_s);

    // --- fair share (simulation_usage.cpp) --------------------------------------------------------
    // Charges task i's attempt up to now at its current rate (core/fair_share.h).
    void charge(SimTask& t);
    // The rate after its speed changed: per GPU, the larger of its memory and SM shares, or the
    // whole GPU when it runs alone.
    void set_charge_rate(SimTask& t) const;
    // What a starting task (not charged yet) is expected to be charged per second, all GPUs.
    double expected_rate(const SimTask& t) const;
    // Before a tick of a run with several users: charges every running attempt up to now and
    // gives the scheduler every user's fair-share factor.
    void update_standings();
    // After a round that left `head` waiting: stops the attempt core/preemption.h chooses, if any,
    // where core/carma_probe.h says the head would then start.
    void maybe_preempt(TaskId head);
    bool head_would_start_without(std::size_t head, std::size_t victim);
    void preempt(std::size_t i);
    void note_user(const std::string& user);

    // --- the figures (simulation_results.cpp) ----------------------------------------------------
    void report_progress();
    PolicyResult finish();
    // per_user, jain_index and the usage series of the result.
    void per_user(PolicyResult& r) const;

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
    // Each node's cores and host memory less the running tasks' (empty: not limited).
    std::vector<HostView> hosts_;
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
    int preemptions_ = 0;
    bool learning_ = false;  // the policy reads TaskSpec::learned
    std::unordered_map<std::string, std::size_t> exact_keys_, family_keys_;
    std::vector<std::vector<RunFacts>> exact_, family_;  // history, by key index
    std::unordered_map<std::string, std::size_t> learn_keys_;
    std::vector<TaskId> relearned_;  // scratch: the tasks of a group that learned anew
    // Fair share: the ledger of charged usage, the users seen so far and their shares; whether
    // the scheduler orders by user (`carma`, fair share on, more than one user in the trace);
    // whether a task asks for its GPUs alone or a slowdown bound (then every policy is told
    // what each GPU holds); per user, the charged GPU-hours over time for the report.
    UsageLedger ledger_;
    PreemptionBudget preemption_budget_;  // the daemon's per-user bound on stops
    std::set<std::string> users_seen_;
    ShareTable shares_;
    bool by_user_ = false;
    bool constrained_ = false;  // a task asks of its co-runners (exclusive, a bound, a share)
    std::map<std::string, UsageSeries> usage_series_;
    // Waiting tasks by learn key; per command and family, their learn keys with a count.
    std::unordered_map<std::size_t, std::set<std::size_t>> queued_by_learn_;
    std::unordered_map<std::size_t, std::unordered_map<std::size_t, int>> learn_keys_by_exact_,
        learn_keys_by_family_;
};

}  // namespace carma::sim::engine
