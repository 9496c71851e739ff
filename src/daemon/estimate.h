#pragma once
// The answer of POST /v1/estimate (docs/api.md): what every knowledge source says about a task
// and what the knowledge rule makes of them. Pure: the daemon reads the history, this shapes it.

#include <vector>

#include <nlohmann/json.hpp>

#include "core/fingerprint.h"
#include "core/task.h"
#include "store/history.h"

namespace carma::daemon {

// One history's summary: {runs, succeeded, out_of_memory, failed, peak_mib, min_peak_mib,
// spread_mib, median_run_s, activity, oom_held_mib, unobserved, unobserved_why, newest}. Peaks,
// run time and activity are those of the successful runs; oom_held_mib is the most an
// out-of-memory run held. Unobserved runs (never seen on their GPUs) count by how they ended and
// in the run time, never in peaks or activity; unobserved_why says why that may happen.
nlohmann::json history_summary(const std::vector<store::HistoryRow>& rows);

struct EstimateInput {
    TaskSpec spec;                              // as submitted; spec.learned is the rule's answer
    TaskFingerprint fingerprint;
    CommandFamily family;
    std::vector<store::HistoryRow> command;     // oldest first
    std::vector<store::HistoryRow> family_runs; // other commands of the family, oldest first
    // The family's correction of the slowdown predictor (core/speed_correction.h): {mode,
    // observations, classes: [{sharing_class, k, basis, samples, observations}]}.
    nlohmann::json speed_correction;
};

nlohmann::json estimate_to_json(const EstimateInput& in);

}  // namespace carma::daemon
