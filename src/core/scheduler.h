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
//   2. A head that can never fit this server (more GPUs than exist, or a known need above the
//      largest GPU) is rejected with the limit named, and the next head is considered.
//   3. Exclusive path: if at least n schedulable GPUs have no process and no warm-up lock, take
//      the first n. A GPU that is not schedulable (unhealthy, window filling) takes nothing.
//   4. Otherwise, only for a main-queue head while the recovery queue is empty, the policy's
//      collocation path (filters + score, see policy.h).
//   5. Otherwise the head waits and nothing behind it is tried (strict FIFO, no backfilling).
// Ties: GPU index order everywhere.

#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/policy.h"
#include "core/result.h"
#include "core/task.h"
#include "core/warmup.h"

namespace carma {

struct SchedulerConfig {
    PolicySpec policy;
    PlacementConfig placement;
    WarmupConfig warmup;
};

struct GpuCapacity {
    int index = 0;
    MiB total_mib = 0;
};

// Whether the task could ever run on these GPUs; the error names the limit and what to change.
Result<void> check_feasible(const TaskSpec& task, std::span<const GpuCapacity> gpus);

struct Placement {
    TaskId task = 0;
    std::vector<int> gpus;
    bool recovered = false;  // came from the recovery queue
    bool exclusive = false;  // placed by the exclusive path (idle GPUs)
};

struct Rejection {
    TaskId task = 0;
    std::string reason;
};

struct StepResult {
    std::vector<Placement> placed;
    std::vector<Rejection> rejected;
    std::optional<TaskId> pending_task;  // the head left waiting, if any
    std::string pending_reason;
};

struct QueuedTask {
    TaskId id = 0;
    TaskSpec spec;
};

class Scheduler {
public:
    explicit Scheduler(SchedulerConfig config);

    void enqueue(TaskId id, TaskSpec spec);
    void enqueue_recovery(TaskId id, TaskSpec spec);
    // Puts a task that was placed but could not be launched (disk full, a fork that failed) back
    // at the front of its queue and releases its warm-up lock: it keeps its turn.
    void return_to_front(TaskId id, TaskSpec spec, bool recovery);
    // Removes a waiting task from either queue; false if it was not waiting.
    bool cancel(TaskId id);

    // Observations that drive the warm-up lock.
    void task_seen(TaskId id, double now) { warmup_.seen(id, now); }
    void task_seen_on(TaskId id, int gpu, double now) { warmup_.seen(id, gpu, now); }
    void task_exited(TaskId id) { warmup_.exited(id); }

    StepResult step(std::span<const GpuView> gpus, double now);

    const std::deque<QueuedTask>& main_queue() const { return main_; }
    const std::deque<QueuedTask>& recovery_queue() const { return recovery_; }
    bool idle() const { return main_.empty() && recovery_.empty(); }
    const WarmupTracker& warmup() const { return warmup_; }
    const SchedulerConfig& config() const { return config_; }

private:
    SchedulerConfig config_;
    std::deque<QueuedTask> main_;      // FIFO of new submissions
    std::deque<QueuedTask> recovery_;  // FIFO of tasks whose attempt died of OOM; strict priority
    WarmupTracker warmup_;
    std::size_t rr_cursor_ = 0;        // round-robin position, kept across decisions
    std::vector<GpuView> scratch_;     // reused per step to avoid allocating
};

}  // namespace carma
