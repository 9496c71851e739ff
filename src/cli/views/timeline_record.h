#pragma once
// The daemon's history as the report draws it: an answer of GET /v1/timeline (docs/api.md)
// turned into the record `carma simulate --report` renders (sim/results.h), so that one renderer
// (sim/report.h) draws both. Pure.

#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "core/result.h"
#include "sim/results.h"

namespace carma::cli {

// One Comparison of kind DaemonHistory holding one PolicyResult (the daemon's policy), with
// times shifted so that t = 0 is the answer's `since` and the axis covers [since, until]:
//   - per GPU, its samples as a timeline (memory used = used_mib / total_mib; unknown values
//     stay unknown, NaN, never 0) and its time-weighted means and energy over the window;
//   - per task, its attempts as spans, wait (outside the attempts), completion or leaving time;
//   - the summary figures of the text table over the window: completed tasks, JCT and wait of
//     the completed ones, attempts and out-of-memory crashes of all, makespan from the first
//     attempt's start (or the window's start) to the last completion.
// A required field that is missing, or any field of the wrong type, is an InvalidArgument error
// naming it by its path in the answer ("tasks[2].attempts[0].started_at").
Result<sim::Comparison> comparison_from_timeline(const nlohmann::json& answer);

// The first moment the answer records anything, no earlier than its `since`: a GPU sample, a
// task's submission or an attempt's start. Nothing (or a malformed answer) gives nullopt.
// `carma report` asks again from just before it, so a daemon that ran for minutes of a day's
// window is drawn over those minutes, at full resolution, not as a sliver at the right edge.
std::optional<double> first_recorded(const nlohmann::json& answer);

}  // namespace carma::cli
