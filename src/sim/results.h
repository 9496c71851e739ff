#pragma once
// What one simulated run produces: the figures per policy, per GPU and per task, and the per-GPU
// timelines the HTML report plots. Plain values, no behaviour, so every consumer (text table,
// JSON, report, tests) reads the same thing.

#include <string>
#include <vector>

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

struct TaskRecord {
    std::string name;        // trace task name
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
    int tasks_completed = 0;
    int tasks_rejected = 0;
    int attempts = 0;
    double mean_smact = 0;     // mean over GPUs of the per-GPU time-weighted mean
    double mean_smocc = 0;
    double mean_memory_used_frac = 0;
    std::vector<GpuSummary> per_gpu;
    std::vector<GpuTimeline> timelines;  // filled only when the run asked for timelines
    std::vector<TaskRecord> tasks;
};

struct Comparison {
    std::string trace;   // trace name or file
    std::string gpus;    // e.g. "4xA100-40GB"
    std::string sharing; // "mps" or "timeslice"
    std::string history; // "cold" or "warm": what `carma` knew at the start
    std::vector<PolicyResult> results;  // in the order the policies were asked for
};

}  // namespace carma::sim
