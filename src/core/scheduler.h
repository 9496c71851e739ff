#pragma once
// Scheduler::step — one decision round of CARMA (spec §1.5), pure and deterministic so the
// daemon (real clock) and the simulator (virtual clock) make identical decisions.
//
// Assumptions:
//   1. GPU views are fresh for `now`; their `locked` flags are recomputed here from the warm-up
//      tracker this scheduler owns.
//   2. A recovered task (its previous attempt died of out-of-memory) must not risk sharing again.
// Steps, repeated until the head cannot be placed:
//   1. The head is the recovery queue's front if that queue is non-empty, else the main queue's.
//   2. A head that can never fit (more GPUs than the largest node has, or a known need above the
//      largest GPU) is rejected with the limit named, and the next head is considered.
//   3. Exclusive path: if at least n schedulable GPUs of one node have no process and no warm-up
//      lock, take the first n of the first node that has them. A GPU that is not schedulable
//      (unhealthy, window filling) takes nothing. A recovered task takes this path only, on any
//      node.
//   4. Otherwise, only for a main-queue head while the recovery queue is empty, the policy's
//      collocation path (filters + score, see policy.h).
//   5. Otherwise the head waits and nothing behind it is tried (strict FIFO, no backfilling).
// Ties: GPU index order everywhere. Nodes: a task's GPUs are always on one node (GpuView::node;
// all "" for the one server, where this changes nothing).
// The `carma` policy changes the order, the placement and step 5 (core/carma.h): the recovery
// head first, then tasks that waited max_wait_s, then the shortest expected run first; a waiting
// head gets a reservation and the tasks behind it may backfill around it.
// Fair share (`carma`, CarmaConfig::fair_share; core/fair_share.h): the main queue is a merge
// across users. Each user's tasks (and within a user each `nice` value) keep carma's order; the
// next task overall is the head of highest priority
//   P = fair_share_weight * F(user) + age_weight * [waited >= max_wait_s] - nice,
// ties in carma's order (overdue by arrival, then shortest first, then arrival). With one user and
// no nice this is exactly carma's order. F comes from the caller (set_standings), which keeps
// the usage ledger. The paper's policies keep arrival order. With several users waiting, the
// first waiting task of each user besides the head's gets a reservation too (on GPUs no earlier
// one holds), and later tasks backfill around all of them.
// Per-user running limits (UserLimits::max_gpus_per_user, max_running_per_user), under every
// policy: a task whose user would pass one is passed over (never the head, never backfilled;
// when explaining, it waits with the limit named) and the next task is considered.
// `--exclusive` (and, under the paper's policies, `--max-slowdown`): such a task takes the
// exclusive path only, and a GPU holding one takes no co-runner (FilterOutcome::HeldAlone).
// Host resources (core/host.h), under every policy, when the caller gives each node's: a task
// starts only on a node where its cores and host memory fit beside its GPUs; one that fits no
// node waits with the dimension named ("8 cores: 6 of 32 free"), and one that asks more than any
// node has is rejected. A CPU-only task (no GPU) takes the first node with room and never a GPU.
// Behind a waiting carma head, tasks backfill only into what the head leaves of a node's cores
// and memory (on its reserved GPUs' node; on every node when it has none reserved), so a head
// that waits for cores is not starved by smaller tasks.

#include <array>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/carma.h"
#include "core/host.h"
#include "core/policy.h"
#include "core/result.h"
#include "core/task.h"
#include "core/user_limits.h"
#include "core/warmup.h"

namespace carma {

struct SchedulerConfig {
    PolicySpec policy;
    PlacementConfig placement;
    WarmupConfig warmup;
    CarmaConfig carma;
    // Only max_gpus_per_user and max_running_per_user are read here (the rest is admission's).
    UserLimits limits;
};

// What the scheduler is told about one user before a round (Scheduler::set_standings).
struct UserStanding {
    double factor = 1;  // fair-share factor F in [0, 1] (core/fair_share.h); 1: no usage yet
    RunningUse running = {};  // GPUs and tasks of the user's running attempts, for the limits
    bool operator==(const UserStanding&) const = default;
};
// By TaskSpec::user; a user not listed stands at factor 1 with nothing running.
using UserStandings = std::map<std::string, UserStanding>;

struct GpuCapacity {
    int index = 0;
    MiB total_mib = 0;
    std::string node = {};  // "" for the one server
};

// What feasibility asks of a set of GPUs, summarised once (a round checks many tasks).
struct CapacitySummary {
    std::size_t gpus = 0;
    bool several_nodes = false;
    std::size_t largest_node_gpus = 0;  // a task's GPUs are all on one node
    std::string largest_node;           // the first node with that many
    MiB largest_mib = 0;
};
CapacitySummary summarize_capacity(std::span<const GpuCapacity> gpus);
CapacitySummary summarize_capacity(std::span<const GpuView> gpus);

// Whether the task could ever run on these GPUs; the error names the limit and what to change:
// more GPUs than the largest node (the server) has, or a memory need above the largest GPU.
// The memory need checked is the one the policy's knowledge has: the profiled (else declared)
// peak, or for `Learned` what history or the user said (estimates may err, so they never reject).
Result<void> check_feasible(const TaskSpec& task, const CapacitySummary& capacity,
                            MemoryKnowledge knowledge = MemoryKnowledge::Oracle);
Result<void> check_feasible(const TaskSpec& task, std::span<const GpuCapacity> gpus,
                            MemoryKnowledge knowledge = MemoryKnowledge::Oracle);

struct Placement {
    TaskId task = 0;
    std::vector<int> gpus;   // empty for a CPU-only task
    bool recovered = false;  // came from the recovery queue
    bool exclusive = false;  // placed by the exclusive path (idle GPUs)
    std::string node = {};   // the node it runs on (its GPUs'); "" for the one server
};

struct Rejection {
    TaskId task = 0;
    std::string reason;
};

// A task left waiting by a round and why.
struct Waiting {
    TaskId task = 0;
    std::string reason;
};

struct StepResult {
    std::vector<Placement> placed;
    std::vector<Rejection> rejected;
    std::optional<TaskId> pending_task;  // the head left waiting, if any
    std::string pending_reason;
    // carma: the head and every task examined for backfilling that still waits, with its own
    // reason (only when PlacementConfig::explain); the tasks not examined wait behind them.
    std::vector<Waiting> waiting;
};

// What a round reads of every task it passes comes first, before the large TaskSpec: a round
// of a long queue walks hundreds of them.
struct QueuedTask {
    TaskId id = 0;
    double queued_at = 0;       // when it (re)entered its queue
    std::int64_t seq = 0;       // arrival order; smaller = earlier
    double order_key = 0;       // by run time: the expected run time (minus it, longest first)
    std::uint32_t decision_class = 0;  // carma with backfilling: see Scheduler::DecisionKey
    TaskSpec spec;
};

class Scheduler {
public:
    explicit Scheduler(SchedulerConfig config);

    // `queued_at`: when the task was submitted (it counts towards carma's bounded wait); when not
    // given, the time of the next step.
    void enqueue(TaskId id, TaskSpec spec, std::optional<double> queued_at = std::nullopt);
    void enqueue_recovery(TaskId id, TaskSpec spec,
                          std::optional<double> queued_at = std::nullopt);
    // A waiting task's knowledge changed (an earlier run of the same command finished); false if
    // it is not waiting.
    bool relearn(TaskId id, const Learned& learned);
    // The same for several waiting tasks that learned the same figures (the simulator's tasks of
    // one command, which learn from one history): tasks not waiting are passed over. Their order
    // and class change together, which costs less than one at a time.
    void relearn(std::span<const TaskId> ids, const Learned& learned);
    // Puts a task that was placed but could not be launched (disk full, a fork that failed) back
    // at the front of its queue and releases its warm-up lock: it keeps its turn.
    void return_to_front(TaskId id, TaskSpec spec, bool recovery);
    // Removes a waiting task from either queue; false if it was not waiting.
    bool cancel(TaskId id);

    // Observations that drive the warm-up lock.
    void task_seen(TaskId id, double now) { warmup_.seen(id, now); }
    void task_seen_on(TaskId id, int gpu, double now) { warmup_.seen(id, gpu, now); }
    void task_exited(TaskId id) { warmup_.exited(id); }

    StepResult step(std::span<const GpuView> gpus, double now) { return step(gpus, {}, now); }
    // With each node's host resources (no hosts: cores and host memory are not limited).
    StepResult step(std::span<const GpuView> gpus, std::span<const HostView> hosts, double now);

    // Fair share and limits: every user's F and what they run now, as of the next step. The
    // caller computes F from its usage ledger (core/fair_share.h's fair_share_factors) and calls
    // this before each step (a step without a call keeps the last standings). Cheap when nothing
    // changed.
    void set_standings(UserStandings standings);
    // A reload of the daemon's configuration: the running limits and the priority's weights
    // change from the next step on (the order across users follows the new weights).
    void retune(const UserLimits& limits, double fair_share_weight, double age_weight);
    const UserStandings& standings() const { return standings_; }
    // P of a waiting task under `carma` with fair share (core/fair_share.h's task_priority),
    // from the standings; nothing for a task not waiting in the main queue.
    std::optional<double> priority(TaskId id, double now) const;
    // The users whose waiting tasks are ordered by their F (carma with fair share), from the
    // per-user buckets: the users set_standings must give a factor, without walking the queue.
    // Empty when no order reads a factor.
    std::vector<std::string> ordered_users() const;

    // carma: the next moment after `now` at which the order changes by itself (a task's bounded
    // wait runs out); nothing for the paper's policies or when no task will age.
    std::optional<double> next_order_change(double now) const;

    // Every waiting task in the order the next step considers it: the recovery queue, then the
    // main queue in the policy's order (carma: aged first, then by run time; the paper's policies
    // and `-fifo`: arrival). What a person reading the queue wants to see.
    // At most `limit` of them: the live view shows the head of a queue that may be 100,000 long.
    std::vector<TaskId> waiting_order(double now,
                                      std::size_t limit = std::numeric_limits<std::size_t>::max()) const;

    // How many tasks wait in either queue.
    std::size_t waiting_count() const { return main_.size() + recovery_.size(); }

    const std::list<QueuedTask>& main_queue() const { return main_; }
    const std::list<QueuedTask>& recovery_queue() const { return recovery_; }
    bool idle() const { return main_.empty() && recovery_.empty(); }
    const WarmupTracker& warmup() const { return warmup_; }
    const SchedulerConfig& config() const { return config_; }

private:
    using Queue = std::list<QueuedTask>;
    struct OrderKey {
        double key = 0;
        std::int64_t seq = 0;
        TaskId id = 0;
        Queue::iterator it;  // not part of the order
        bool operator<(const OrderKey& o) const { return key != o.key ? key < o.key : seq < o.seq; }
    };
    // carma's main queue per (user, nice): each keeps carma's order over its own tasks, and the
    // order overall is their merge by priority (see the header). Users are all "" without fair
    // share, so one bucket (the usual case) is exactly carma's order, walked as before.
    struct Bucket {
        std::string user;
        int nice = 0;
        std::set<OrderKey> arrival;  // key 0: by seq, i.e. main_'s order
        std::set<OrderKey> length;   // by run time: by (order_key, seq)
    };
    using BucketKey = std::pair<std::string, int>;
    struct Where {
        Queue::iterator it;
        bool recovery = false;
        // A main-queue task of `carma` (or any policy ordered by run time): its bucket, and its
        // entries there, erased where they are, not looked up, when the task leaves or moves
        // (a backlog's relearning moves many).
        Bucket* bucket = nullptr;
        std::set<OrderKey>::iterator arrived{};
        std::set<OrderKey>::iterator ranked{};  // by run time only
    };

    void push(TaskId id, TaskSpec spec, std::optional<double> queued_at, bool recovery,
              bool front);
    void remove(TaskId id);
    double order_key(const TaskSpec& spec) const;
    void stamp(double now);
    StepResult step_paper(double now, const CapacitySummary& capacity);
    StepResult step_carma(double now, const CapacitySummary& capacity);
    // Places one task on `gpus` for the rest of this round: warm-up lock, ledger, host.
    void commit(const QueuedTask& task, const std::vector<int>& gpus, double now);
    // Places a CPU-only task on hosts_[host] (-1: hosts are not limited).
    void commit_host_only(const QueuedTask& task, int host);

    // Host resources of this round, each node's less the round's placements; gpu_host_[i] is
    // the position in hosts_ of GPU i's node, -1 where its node is not limited. spare_hosts_:
    // while a carma head waits, what it leaves for the tasks behind it (empty otherwise).
    std::vector<HostView> hosts_;
    std::vector<HostView> spare_hosts_;
    std::vector<int> gpu_host_;
    HostSummary host_summary_;
    std::size_t host_only_waiting_ = 0;  // CPU-only tasks in either queue
    static constexpr int kNoHostFits = -2;
    bool host_ok(const TaskSpec& spec, int host, bool behind_head) const;
    // A CPU-only task's node: the first with room; -1 when hosts are not limited; kNoHostFits,
    // with why (when asked), when none has room.
    int pick_host(const TaskSpec& spec, bool behind_head, std::string* why) const;
    // "" when some node has room for the task's cores and memory; else what it waits for.
    std::string host_wait(const TaskSpec& spec, bool behind_head) const;
    // GPU positions whose node lacks room for the task's cores and memory: allowed[i] = 0.
    void mask_hosts(const TaskSpec& spec, bool behind_head, std::vector<char>& allowed) const;
    // The head's cores and memory kept out of spare_hosts_ on the nodes it may start on.
    void reserve_host_for(const TaskSpec& head, std::span<const char> shadow);
    Result<void> feasible(const TaskSpec& spec, const CapacitySummary& capacity,
                          MemoryKnowledge knowledge) const;
    // The node of the GPUs placed (scratch_'s, by index); "" for none.
    std::string node_of(std::span<const int> gpus) const;
    // The next waiting main-queue tasks in carma's order (aged first, then by run time or FIFO),
    // skipping `skip`, at most `limit`.
    // `take(const QueuedTask&)` returns true to stop.
    template <typename Take>
    void carma_order(double now, Take take) const;
    void carma_order(double now, std::optional<TaskId> skip, std::size_t limit,
                     std::vector<TaskId>& out) const;

    // Everything of a task that carma's backfilling reads to decide on it (feasibility, need,
    // run time, activity, GPU count; doubles by their bits). Two waiting tasks of one key get the
    // same answer from the same GPUs, so once one of them was turned down, the others are too
    // until a placement changes the GPUs: a round of a long queue with few kinds of task skips
    // most of its candidates (the daemon's arrays, the simulator's repeated commands).
    using DecisionKey = std::array<std::int64_t, 18>;
    struct DecisionKeyHash {
        std::size_t operator()(const DecisionKey& k) const;
    };
    static DecisionKey decision_key(const TaskSpec& spec);
    // What relearning one task of a group found, handed to the next: the class of the last
    // decision key, and the last task moved in Bucket::length (the next of the group, later in
    // arrival, goes right after it).
    struct RelearnHint {
        std::optional<DecisionKey> key;
        std::uint32_t decision_class = 0;
        std::optional<std::set<OrderKey>::iterator> moved;
        const Bucket* moved_in = nullptr;  // the set `moved` is in
    };
    void relearn_one(Where& w, const Learned& learned, RelearnHint& hint);
    std::uint32_t acquire_class(const TaskSpec& spec);
    void release_class(std::uint32_t id);

    SchedulerConfig config_;
    PlacementConfig quiet_;  // config_.placement without explanations
    Queue main_;      // submissions, in arrival order
    Queue recovery_;  // tasks whose attempt died of OOM, in order; strict priority
    // next_order_change: every main_ task before aged_upto_ had aged by aged_now_ (list order
    // is arrival order, so they are a prefix), and the walk resumes there: with a long queue
    // of aged tasks it is asked at every event.
    mutable Queue::const_iterator aged_upto_;
    mutable double aged_now_ = 0;

    // Invariant: every task in main_ or recovery_ has exactly one entry here, and every main_
    // task of a bucketed policy exactly one in its bucket's `arrival` and, by run time, one in
    // its `length` (none otherwise). A bucket without tasks is erased.
    std::unordered_map<TaskId, Where> where_;
    std::map<BucketKey, Bucket> buckets_;
    bool bucketed() const { return config_.policy.carma || config_.policy.by_run_time(); }
    BucketKey bucket_key(const TaskSpec& spec) const;
    // The merge of several buckets in carma_order (scheduler_order.h).
    template <typename Take>
    void merge_buckets(double now, Take take) const;
    double bucket_base(const Bucket& b) const;  // W_fs * F(user) - nice
    UserStandings standings_;
    // Limits within a round: what each user runs, the standings' plus the round's placements.
    std::map<std::string, RunningUse> round_use_;
    std::optional<std::string> limit_reason(const QueuedTask& t) const;
    std::vector<TaskId> unstamped_;    // queued without a time: stamped at the next step
    std::int64_t next_seq_ = 0;
    std::int64_t front_seq_ = 0;       // return_to_front goes before everything: decreasing
    WarmupTracker warmup_;
    std::size_t rr_cursor_ = 0;        // round-robin position, kept across decisions
    std::vector<GpuView> scratch_;     // reused per step to avoid allocating
    // The capacity summary of the last GPU set and that set's (node, total) per GPU: a step
    // whose GPUs match (the usual case) reuses the summary instead of counting nodes again.
    const CapacitySummary& capacity();
    CapacitySummary capacity_;
    std::uint64_t capacity_generation_ = 1;  // changes with capacity_; never 0
    std::vector<std::pair<std::string, MiB>> capacity_of_;
    std::vector<char> open_, allowed_; // carma, per GPU position; reused
    // carma, per GPU position, kept up to date through the round's placements (refresh_room):
    // planned_available_mib, and idle (what the exclusive path takes).
    std::vector<MiB> available_;
    std::vector<char> idle_;
    void refresh_room(std::size_t i);
    // carma, per GPU position; kept over rounds while the predictor's version stays.
    std::vector<GpuPredictions> predictions_;
    std::optional<std::uint64_t> predictions_version_;
    std::vector<HeadReadinessCache> readiness_;  // carma, per GPU position, kept over rounds
    // carma backfilling: the tasks examined behind the head, kept from round to round while
    // the queue, the head and the set of aged tasks stay the same (most rounds of a backlog
    // change none of them, and walking hundreds of scattered list nodes is a round's main cost).
    struct Candidate {
        const QueuedTask* task = nullptr;
        std::uint32_t decision_class = 0;
    };
    std::vector<Candidate> candidates_;
    // Per candidate, the position of the next candidate whose class none before it has; with
    // the scratch of the pass that finds them (per class id).
    std::vector<std::size_t> next_class_at_;
    std::vector<char> class_seen_;
    void index_first_of_class();
    std::uint64_t queue_version_ = 0;  // changes whenever carma_order's answer may
    std::uint64_t candidates_version_ = std::numeric_limits<std::uint64_t>::max();
    double candidates_now_ = 0;
    TaskId candidates_head_ = 0;
    std::multiset<double> ages_;  // by run time: queued_at + max_wait_s of every main_ task
    bool candidates_fresh(double now, TaskId head) const;
    // Decision classes of the waiting tasks (carma with backfilling): id by key, tasks per id,
    // ids free for reuse; and per id the round epoch in which one of its tasks was turned down.
    std::unordered_map<DecisionKey, std::uint32_t, DecisionKeyHash> class_ids_;
    std::vector<DecisionKey> class_keys_;
    std::vector<std::uint32_t> class_refs_;
    std::vector<std::uint32_t> free_classes_;
    std::vector<std::uint64_t> class_waited_;
    // Per class id, the capacity_generation_ in which its tasks were found feasible (0: not yet).
    std::vector<std::uint64_t> class_feasible_;
    std::uint64_t epoch_ = 0;  // changes with every round and every placement in it
};

}  // namespace carma
