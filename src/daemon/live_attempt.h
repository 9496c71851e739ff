#pragma once
// What the daemon keeps of each live attempt and of each GPU between ticks, under its lock.

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/policy.h"
#include "core/task.h"
#include "daemon/foreign.h"
#include "daemon/gpu_health.h"
#include "daemon/host_state.h"
#include "exec/launch.h"
#include "store/records.h"

namespace carma::daemon {

struct LiveAttempt {
    TaskId task = 0;
    std::optional<ArrayMember> array;  // how views name it (core/task_ref.h)
    int number = 0;
    std::string user;  // its task's owner
    std::vector<int> gpus;  // empty: a CPU-only task
    // Host resources (core/host.h): the cores and memory it holds (0 cores: it runs on the
    // shared ones), and its cpuset.
    HeldHost host;
    exec::LaunchHandle handle;
    std::set<int> seen_on;          // GPUs the task's processes have shown up on
    bool settled = false;           // seen on all its GPUs (or re-attached after a restart)
    std::map<int, MiB> peak_mib;    // per GPU: the most its processes held at once
    std::map<int, MiB> held_now;    // per GPU: what its processes hold in the last sample
    bool peak_changed = false;      // not yet written to the store
    bool stop_requested = false;
    int unstored_ends = 0;          // ticks its end could not be written to the store
    // Running mean of its own SM activity (core/knowledge.h sample_activity), for history.
    double activity_sum = 0;
    int activity_samples = 0;
    // GPUs on which, in this tick's sample, processes not its own were listed beside it.
    std::set<int> crowded_now;
    // What the `carma` policy plans with for a task placed here (GpuView::residents), and what
    // the task asked of its co-runners (--exclusive, --max-slowdown).
    Learned learned;
    bool exclusive = false;
    std::optional<double> max_slowdown;
    int gpu_milli = 0;  // its --gpu-share in thousandths; 0: whole GPUs (core/gpu_share.h)
    // Fair share: GPU-seconds charged so far (core/fair_share.h charge_fraction per GPU and
    // second), and the scheduler clock up to which it was charged (-1: not yet).
    double charged_gpu_s = 0;
    double charged_until = -1;
    double charge_rate = 0;  // GPUs' worth charged per second at the last charge (0: none yet)
    bool charge_changed = false;  // not yet written to the store
    double started_clock = 0;  // scheduler clock when the attempt started
    double started_unix = 0;   // what the store says; time limits count from it
    std::optional<double> time_limit_s;
    bool timed_out = false;    // CARMA stopped it at its time limit
    // Fair-share preemption (daemon_preempt.cpp): the task opted in (--requeue), and CARMA is
    // stopping this attempt to queue the task again (a cancel meanwhile clears it).
    bool requeue = false;
    bool preempted = false;
    bool recovered = false;  // an out-of-memory relaunch from the recovery queue: never preempted
    int nice = 0;  // its task's --nice: the priority it would wait at if queued again
    // Restored on a node without its launch reply: the server died while launching it, so
    // the agent may never have received it; no report of it at all means it never ran.
    bool launch_unconfirmed = false;
    // Accounting (daemon_acct.cpp): its processes' SM activity per GPU in this tick's sample,
    // and the GPU energy attributed to it so far (unknown until a GPU of it reports some).
    std::map<int, double> activity_now;
    std::optional<double> energy_j;
    bool energy_changed = false;  // not yet written to the store
    // Under --mps: its owner when it is a client of its GPU's control daemon (one GPU).
    std::string mps_user;
    // What it teaches of the predictor's error (core/speed_correction.h, accumulate_sharing):
    // time with GPU-active co-runners, the predicted progress, the co-runners' activity and
    // the number of tasks sharing (itself included) over it, on the scheduler clock; and the
    // state found at the last tick.
    double shared_s = 0, predicted_shared_s = 0, others_activity_s = 0, sharers_s = 0;
    double sharing_at = -1;  // scheduler clock of the last tick that looked (-1: none yet)
    bool shared_now = false;
    double predicted_now = 1, others_now = 0, sharers_now = 0;
    // False when re-attached after a restart: its time before it is unknown, so it is no
    // solo history and teaches no factor.
    bool sharing_known = true;
};

// What the daemon knows of one GPU beyond its samples.
struct GpuState : GpuHealth {
    std::string excluded;      // why CARMA leaves it alone (pattern, MIG); empty = in use
    std::string rule_text;     // the risk rule last logged for it
    // Processes on it CARMA did not start, as of the last sample (daemon/foreign.h), and the
    // foreign memory last reported as running into a task's plan (0: none reported).
    std::vector<ForeignProcess> foreign;
    MiB foreign_reported_mib = 0;
};

// A running attempt as the store left it, taken up again after a restart: settled (it has run a
// while, so no warm-up lock), its peak and energy going on from what was stored, its time before
// unknown (no solo history, no speed factor from it), its time limit counting from the stored
// start (`started_clock`: that start on the new daemon's clock). On a node, one recorded without
// the launch's reply is unconfirmed: its agent may never have received it.
LiveAttempt reattached_attempt(const store::TaskRow& task, const store::AttemptRow& attempt,
                               double started_clock, std::string mps_user);

// What `carma` plans with for an attempt on a GPU (GpuView::residents): its learned figures,
// never its measurements, and what it asked of its co-runners.
ResidentView resident_view_of(const LiveAttempt& live);

// The same GPUs with the attempts of a round that placed some (`placed`, not yet live) on them,
// as the round left them.
std::vector<GpuView> views_with(std::vector<GpuView> views, std::span<const LiveAttempt> placed);

// The GPUs as the scheduler's next round would see them once attempt `gone` has ended (fair-share
// preemption's probe, daemon_preempt.cpp): it is off every GPU it held, the memory its processes
// hold there is free, a GPU is idle when no other attempt of `live` and no foreign process
// (`gpus`, by index) is on it, and its MPS server is that of the attempts that remain.
std::vector<GpuView> views_without(std::vector<GpuView> views, const LiveAttempt& gone,
                                   const std::map<TaskId, LiveAttempt>& live,
                                   const std::vector<GpuState>& gpus);

}  // namespace carma::daemon
