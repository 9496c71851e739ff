#pragma once
// The HTML report of `carma simulate --report DIR` and `carma report DIR`: one self-contained
// page (inline CSS and SVG, no JavaScript, no external resources) for a Comparison, whether it
// holds simulated policies or a daemon's history, plus CSVs of the same figures. Everything
// except write_html_report is pure so it can be tested on strings.
//
// The page: a summary table (the units and number formats of `carma simulate`'s text table,
// sim/output.h), bars of makespan and energy when there are policies to compare, the
// distributions of wait and completion time (JCT) of all policies on shared axes, then per policy
// SMACT and memory per GPU over time with out-of-memory crashes and relaunches marked, a Gantt
// chart of the attempts per GPU, the number of waiting tasks over time and a table of the tasks.
// Every chart over time of the page shares one time axis (shared_time_axis).

#include <string>

#include "core/result.h"
#include "sim/report_charts.h"
#include "sim/results.h"

namespace carma::sim {

// The whole HTML document for a comparison.
std::string render_html_report(const Comparison& comparison);

// Writes DIR/index.html, DIR/results.csv (one row per policy, the summary table's figures) and
// DIR/tasks.csv (render_report_tasks_csv), creating DIR if needed. Returns the path of
// index.html; errors (ErrorCode::Io) name the path and the system's reason.
Result<std::string> write_html_report(const Comparison& comparison, const std::string& dir);

// The summary table as CSV: a header line, then one line per policy.
std::string render_results_csv(const Comparison& comparison);

// One line per task and policy: policy, id, user, task, gpus, state, submitted, started, ended
// (seconds from the trace's start in a simulation, unix times for a daemon's history; empty where
// the task never started or has not ended), wait_s, attempts, oom_crashes, and the attempts as
// "start-end@gpus:outcome" separated by spaces, in the same times.
std::string render_report_tasks_csv(const Comparison& comparison);

}  // namespace carma::sim
