#pragma once
// What an attempt's end means for its task, decided without a daemon: how it ended (from the
// supervisor's exit record, or its absence), in words, and what the task becomes — relaunched
// on the recovery queue, queued again when its node was lost, or ended — with the message the
// user reads. Pure; the daemon (daemon_exits.cpp) records it and acts on it.

#include <optional>
#include <string>

#include "core/exit_classify.h"
#include "exec/launch.h"
#include "store/records.h"

namespace carma::daemon {

// What the daemon knew of the attempt while it ran.
struct AttemptWatch {
    bool stop_requested = false;  // a cancel or a stop reached the daemon
    bool timed_out = false;       // the daemon stopped it at its time limit
    bool preempted = false;       // the daemon is stopping it for fair share, to queue it again
    std::optional<double> time_limit_s;
    double started_unix = 0;      // what the store says: time limits count from it
};

// The end as core/exit_classify.h reads it; `record` is null when the supervisor left none.
AttemptEnd attempt_end(const exec::ExitRecord* record, const AttemptWatch& watch);

// "exit code 3", "killed by signal 9", why it could not start, or that no record was left.
std::string how_it_ended(const AttemptEnd& end, const exec::ExitRecord* record);

struct TaskAfterAttempt {
    store::TaskState state = store::TaskState::Failed;
    std::string message;
    bool relaunch = false;  // to the recovery queue, on idle GPUs
    bool requeue = false;   // to the queue it came from (its node was lost; state says which)
    bool ended = false;     // a final state: finished_at is set and dependants may go on
    std::string how;        // how it ended, for the event (a timeout names its limit)
};

// What the task becomes after attempt `number` (of `attempts` made so far, at most
// `max_attempts`) ended with `outcome`. An out-of-memory crash, and a failure when
// `retry_failures`, relaunch while attempts are left. `lost_node`: the words naming the node
// whose loss ended it ("node gpu-3 (Slurm job 417 ended)"), which then stand for `how`; such a
// task is queued again whatever its attempts, since its end was not its doing, to the queue it
// came from: an out-of-memory relaunch (`recovered`) to the recovery queue, where it still goes
// first and runs alone. So is a task whose attempt was preempted.
TaskAfterAttempt task_after_attempt(AttemptOutcome outcome, const AttemptEnd& end, std::string how,
                                    int number, int attempts, int max_attempts, bool retry_failures,
                                    const std::optional<std::string>& lost_node,
                                    std::optional<double> time_limit_s, bool recovered = false);

}  // namespace carma::daemon
