#pragma once
// Fair-share preemption (issue 23): which running attempt, if any, gives way to the waiting head
// of an under-served user. Pure: the caller (the simulator; the daemon, daemon_preempt.cpp) lists
// what runs, with each attempt's charge rate and user, and stops the one chosen (the daemon:
// SIGTERM, then SIGKILL after kill_grace_s) and queues it again; the head is the scheduler's
// waiting head of the round.
//
// Without it, fair share acts only when a GPU frees: a user whose head cannot start waits for the
// others' tasks to end, and over an hour or two one user was charged 39 % of the GPUs and
// another 11 % (docs/evaluation.md section 11).
//
// Rule (Kueue's fair-sharing preemption, "LessThanOrEqualToFinalShare"): a user's allocation is
// the GPUs' worth its running attempts are charged per second (core/fair_share.h's charge rates)
// over its shares. The head's user H may take the place of an attempt v of user V when, after
// the swap, H's allocation would still be no larger than V's:
//     (A_H + r_head) / S_H <= (A_V - r_v) / S_V
// so V could never take it back by the same rule, and preemptions stop once the two are even
// (no ping-pong). Only an attempt with all of these may be stopped: it opted in (`--requeue`;
// a trace's `requeue` column); it ran min_run_s (Slurm's PreemptExemptTime: a task makes some
// progress between preemptions); it is not the head's own user's; its end would let the head
// start (makes_room); queued again, it would wait behind the head (requeued_priority against
// head_priority_once_stopped, both as the round after the stop reads them: price_stops); it is
// no out-of-memory relaunch (recovered). Among
// those: the most over-served user's (largest (A_V - r_v) / S_V), then the attempt started last
// (the least work since its start is lost), then the highest task id.
// One attempt per round: the caller schedules again, and the head may start by then. The caller
// lets a head stop one task until it starts: without that guard a stopped task backfilled its
// own place and was stopped again, up to 26 times in a flood. And it prices stops by user
// (core/preemption_budget.h): a user's stops are bounded over a window, and a waiting task that
// is cancelled after a stop was made for it costs its owner what the stop cost.

#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/fair_share.h"
#include "core/task.h"

namespace carma {

struct PreemptionConfig {
    bool enabled = false;
    double min_run_s = 600;
    double margin = 0;
    // What one user's waiting tasks may stop, whatever tasks they are (core/preemption_budget.h;
    // the daemon's `preempt_max_stops` within `preempt_stops_window`).
    int max_stops_per_user = 4;
    double stops_window_s = 3600;
};

// A running attempt the rule may consider.
struct RunningAttempt {
    TaskId task = 0;
    std::string user;
    double started_s = 0;    // when this attempt was placed
    double charge_rate = 0;  // GPUs' worth it is charged per second now (all its GPUs)
    bool requeue = false;    // it opted in to being stopped and queued again
    // Stopping it would let the head start (the caller's judgement: the simulator asks
    // core/carma_probe.h with the task taken out). Stopping a task that makes no room for the
    // head only hands its place to a task behind: in a flood, 41-603 preemptions for 260 tasks.
    bool makes_room = true;
    // The priority it would wait at if stopped and queued again now (core/fair_share.h's
    // task_priority, its bounded wait starting over). It must come after the head's: a stopped
    // task that went first took its own place back (in a flood, up to 4,134 preemptions for 260
    // tasks).
    double requeued_priority = -std::numeric_limits<double>::infinity();
    // An out-of-memory relaunch, running alone on idle GPUs from the recovery queue. Stopped, it
    // would either lose that protection (queued as it came, it may share and crash again) or,
    // back on the recovery queue and ahead of every waiting task, take its GPU straight back.
    bool recovered = false;
    int nice = 0;  // its task's --nice, which it keeps when queued again
    // The head's priority once this attempt has stopped (price_stops); absent: as it waits now.
    std::optional<double> head_priority_once_stopped = std::nullopt;
};

// The head that waits: its user and the GPUs' worth it is expected to be charged per second
// (expected_charge_rate of its learned figures).
struct PreemptionAsk {
    std::string user;
    double expected_rate = 1;
    double priority = std::numeric_limits<double>::infinity();  // its P as it waits
};

// The factor counts each user's running charge ahead (fairshare_horizon): the stop takes the
// attempt's charge off its user's, so that user's F rises and every other user's falls. Read
// before the stop, a task charged a whole GPU or more looked behind the head and, queued again,
// went before it and took its GPUs back. Sets each attempt's requeued_priority and
// head_priority_once_stopped from the factors of `ledger` and `shares` at `now` with `running`'s
// charge rates less that attempt's (core/fair_share.h's fair_share_factors and task_priority);
// `head_factor`: the factor the head's priority was computed from. Only attempts that may be
// stopped (they opted in, no relaunch, another user's) are priced; the others keep theirs.
void price_stops(std::vector<RunningAttempt>& running, const PreemptionAsk& head,
                 double head_factor, const UsageLedger& ledger, const ShareTable& shares,
                 double now, double horizon_s, const PriorityWeights& weights);

// The attempt to stop, if the rule allows one. `shares`: every user's effective shares
// (build_share_table); a user missing from it has default_shares.
std::optional<TaskId> choose_preemption_victim(const PreemptionAsk& head,
                                               std::span<const RunningAttempt> running,
                                               const ShareTable& shares, double now,
                                               const PreemptionConfig& config,
                                               double default_shares = 1);

// The rule's choice among the attempts whose end would let the head start: the simulator and the
// daemon both stop what this returns. `head_starts_without(v)`: whether `carma` would start the
// head with attempt v taken out (core/carma_probe.h on the caller's views); asked of the rule's
// choice, and where the answer is no, of its next choice, until one says yes or none is left.
std::optional<TaskId> choose_preemption(const PreemptionAsk& head,
                                        std::vector<RunningAttempt> running,
                                        const ShareTable& shares, double now,
                                        const PreemptionConfig& config,
                                        const std::function<bool(TaskId)>& head_starts_without,
                                        double default_shares = 1);

}  // namespace carma
