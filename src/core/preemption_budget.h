#pragma once
// What fair-share preemption costs the user it stops for (issue 44, break 3). Pure: the caller
// (daemon_preempt.cpp) passes its clock and records each stop it makes.
//
// Without it a user with no GPU time farmed preemption: submit an exclusive bait, wait for
// `preempting`, cancel the bait, repeat. The one-stop-per-waiting-task guard keys on the task,
// so each new bait stopped another user's --requeue task again (8 times in 40 s, each attempt
// killed right at preempt_min_run). Preemption is priced by user instead:
// - a user's stops (those made for their waiting tasks) are bounded: at most max_stops within
//   any window_s (`preempt_max_stops`, `preempt_stops_window`), whatever tasks they were for;
// - a stop whose waiting task then ends or is held without starting (cancelled, rejected) was
//   wasted: its owner is charged what the stop cost the attempt stopped (lost_gpu_s, added to
//   their fair-share usage), so baiting lowers the baiter's own priority by the work destroyed.
// A waiting task that starts owes nothing: the stop bought what it was made for.

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "core/task.h"

namespace carma {

// A stop made for a waiting task (the head of a round).
struct StopMade {
    double at_s = 0;    // when (the caller's clock)
    std::string user;   // the waiting task's owner
    TaskId head = 0;    // the waiting task
    TaskId victim = 0;  // the task whose attempt was stopped
    std::string victim_user;
    double lost_gpu_s = 0;  // what the stop cost that attempt (lost_gpu_s)
};

// What stopping an attempt costs it, in GPU-seconds: what it was charged since it started
// (`charged_gpu_s`: its work is lost unless it checkpoints); before its first charge, its run
// so far at the rate it is expected to be charged. Never negative.
double lost_gpu_s(double charged_gpu_s, double run_s, double charge_rate);

class PreemptionBudget {
  public:
    // `max_stops` >= 1 stops per user within any `window_s` > 0.
    PreemptionBudget(int max_stops = 4, double window_s = 3600);

    // Stops made for `user` within (now - window_s, now].
    int stops_for(const std::string& user, double now) const;
    // Whether another stop may be made for `user` at `now`.
    bool may_stop_for(const std::string& user, double now) const;
    // Whether a stop was made for `head` that it has not settled yet (started, or forfeited):
    // a waiting task stops one attempt until it starts.
    bool made_room_for(TaskId head) const { return pending_.contains(head); }

    // Records a stop: it counts against its user's budget for window_s (remember), and stays
    // owed by its head until the head starts or forfeits it (owe). After a restart, the events
    // give each part on its own.
    void record(const StopMade& stop);
    void remember(const StopMade& stop) { recent_.push_back(stop); }
    void owe(const StopMade& stop) { pending_[stop.head] = stop; }
    // The head started: nothing owed.
    void head_started(TaskId head) { pending_.erase(head); }
    // The head ended, or was held, without starting: the stop made for it, if any, whose
    // lost_gpu_s its owner is to be charged.
    std::optional<StopMade> head_forfeited(TaskId head);
    // A reload: the new budget counts the stops already made.
    void reconfigure(int max_stops, double window_s);
    // Forgets stops older than the window (what is owed is kept).
    void forget_before(double now);

    int max_stops() const { return max_stops_; }
    double window_s() const { return window_s_; }
    std::size_t remembered() const { return recent_.size(); }

  private:
    int max_stops_;
    double window_s_;
    std::deque<StopMade> recent_;  // in the order recorded
    std::map<TaskId, StopMade> pending_;
};

}  // namespace carma
