#pragma once
// What one simulated run produces: the figures per policy, per GPU and per task, and the per-GPU
// timelines the HTML report plots, and every attempt of every task. Plain values (and the text
// of an attempt's outcome), so every consumer (text table, JSON, report, tests) reads the same
// thing. `carma report` fills the same types from the daemon's history
// (cli/views/timeline_record.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/units.h"

namespace carma::sim {

// One step of a piecewise-constant per-GPU series: the values hold from `t_s` until the next
// point (or the end of the run).
struct TimelinePoint {
    double t_s = 0;
    double smact = 0;
    double smocc = 0;
    double memory_used_frac = 0;  // used / capacity, 0..1
    double power_w = 0;
    int tasks = 0;                // tasks resident on the GPU (any phase)
};

struct GpuTimeline {
    int gpu = 0;
    std::vector<TimelinePoint> points;
};

struct GpuSummary {
    int gpu = 0;
    double mean_smact = 0;             // time-weighted over [first dispatch, makespan end]
    double mean_smocc = 0;
    double mean_memory_used_frac = 0;
    double energy_j = 0;               // over the same interval
};

// How one attempt of a task ended; the daemon's words (docs/api.md) are its text form.
// Preempted: stopped to let another user's task run, and queued again (core/preemption.h).
enum class AttemptOutcome {
    Running,
    Succeeded,
    OutOfMemory,
    Failed,
    Cancelled,
    Timeout,
    Lost,
    Preempted
};

inline constexpr AttemptOutcome kAttemptOutcomes[] = {
    AttemptOutcome::Running, AttemptOutcome::Succeeded, AttemptOutcome::OutOfMemory,
    AttemptOutcome::Failed,  AttemptOutcome::Cancelled, AttemptOutcome::Timeout,
    AttemptOutcome::Lost,    AttemptOutcome::Preempted};

constexpr std::string_view to_string(AttemptOutcome outcome) {
    switch (outcome) {
        case AttemptOutcome::Running: return "running";
        case AttemptOutcome::Succeeded: return "succeeded";
        case AttemptOutcome::OutOfMemory: return "out-of-memory";
        case AttemptOutcome::Failed: return "failed";
        case AttemptOutcome::Cancelled: return "cancelled";
        case AttemptOutcome::Timeout: return "timeout";
        case AttemptOutcome::Lost: return "lost";
        case AttemptOutcome::Preempted: return "preempted";
    }
    return "unknown";
}

constexpr std::optional<AttemptOutcome> parse_attempt_outcome(std::string_view text) {
    for (AttemptOutcome o : kAttemptOutcomes) {
        if (to_string(o) == text) {
            return o;
        }
    }
    return std::nullopt;
}

// One attempt of a task: when it ran, where, and how it ended.
struct AttemptSpan {
    double start_s = 0;
    double end_s = -1;  // -1: still running at the end of the record
    std::vector<int> gpus;
    AttemptOutcome outcome = AttemptOutcome::Running;
};

struct TaskRecord {
    std::int64_t id = -1;    // the daemon's task id; -1 in a simulation
    std::string user;        // the submitter (daemon history); empty in a simulation
    std::string name;        // trace task name
    std::string state;       // the daemon's task state (queued, running, succeeded, ...); empty
                             // in a simulation
    int gpus = 1;
    double submit_s = 0;
    double first_start_s = -1;  // dispatch of the first attempt, -1 if never started
    double finish_s = -1;       // completion of the successful attempt, -1 if not completed
    double wait_s = 0;          // sum over attempts of (dispatch - queued)
    int attempts = 0;
    int oom_crashes = 0;
    bool rejected = false;
    std::string reject_reason;
    std::vector<int> gpu_ids;  // of the last attempt
    double slowdown = 0;     // run time of the successful attempt / its solo run time; 0 if none
    // When the task ended for good without completing (rejected, cancelled, failed, given up
    // after repeated crashes); -1 when it completed or had not ended by the end of the record.
    double left_s = -1;
    std::vector<AttemptSpan> spans;  // every attempt, in order (attempts == spans.size())
    // Fair share (issue 23): GPU-seconds charged over all its attempts (core/fair_share.h), and
    // what it asked of its co-runners.
    double charged_gpu_s = 0;
    bool exclusive = false;
    std::optional<double> max_slowdown = {};
};

// One user's figures in a run (the simulator's `user` column; "" the anonymous user).
struct UserSummary {
    std::string user = {};
    int tasks = 0;
    int completed = 0;
    double charged_gpu_h = 0;   // charged, not decayed
    double mean_wait_s = 0;     // over completed tasks
    double mean_slowdown = 0;   // over completed tasks
};

// Charged GPU-hours of one user over the run (not decayed), a step series for the report.
struct UsageSeries {
    std::string user = {};
    std::vector<std::pair<double, double>> points = {};  // (t_s, cumulative GPU-hours)
};

struct PolicyResult {
    std::string policy;
    double makespan_s = 0;     // first dispatch -> last completion
    double energy_j = 0;       // all GPUs over the makespan
    double mean_jct_s = 0;
    double p95_jct_s = 0;
    double mean_wait_s = 0;
    double p95_wait_s = 0;
    double max_wait_s = 0;     // the longest any completed task waited (over all its attempts)
    double p95_slowdown = 0;   // of the completed tasks' slowdowns (TaskRecord::slowdown)
    int oom_crashes = 0;
    int preemptions = 0;       // attempts stopped for another user's task (core/preemption.h)
    int tasks_completed = 0;
    int tasks_rejected = 0;
    int attempts = 0;
    double mean_smact = 0;     // mean over GPUs of the per-GPU time-weighted mean
    double mean_smocc = 0;
    double mean_memory_used_frac = 0;
    std::vector<GpuSummary> per_gpu;
    std::vector<GpuTimeline> timelines;  // filled only when the run asked for timelines
    std::vector<TaskRecord> tasks;
    std::vector<UserSummary> per_user;  // by user name
    // Jain's index over the users' mean slowdowns (1: all equal; 1/n: one user takes it all);
    // 1 with fewer than two users that completed a task.
    double jain_index = 1;
    std::vector<UsageSeries> usage;  // filled only when the run asked for timelines
};

// Where a record comes from. A simulation's times are seconds from the trace's start; a daemon's
// history (`carma report`) is shifted so that t = 0 is the start of the window it covers.
enum class RecordKind { Simulation, DaemonHistory };

struct Comparison {
    RecordKind kind = RecordKind::Simulation;
    std::string trace;   // trace name or file
    std::string gpus;    // e.g. "4xA100-40GB"
    std::string sharing; // "mps" or "timeslice"
    std::string history; // "cold" or "warm": what `carma` knew at the start
    std::string world = "model";  // model/world.h's describe(): what tasks really did
    std::string world_compose = "model";  // how the world slows what no pair measured
    std::uint64_t seed = 1;               // the graded runs' (world and draws)
    std::optional<std::uint64_t> history_seed;  // the warm history's draws; none when cold
    // Each node's cores and host memory for tasks (0: not limited).
    int host_cpus = 0;
    MiB host_mem_mib = 0;
    std::vector<PolicyResult> results;  // in the order the policies were asked for
    // DaemonHistory only: the unix time of t = 0, the window's length (the time axis covers
    // [0, span_s]) and the daemon's GPU backend.
    double origin_unix_s = 0;
    double span_s = 0;
    std::string backend;
};

}  // namespace carma::sim
