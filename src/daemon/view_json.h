#pragma once
// The pieces of GET /v1/view and GET /v1/timeline (docs/api.md) that are pure functions of
// stored rows: what the web page, `carma top` and `carma report` draw. Nothing here carries a
// task's environment, command line or logs: the web listener serves it to anyone who may look.

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/service.h"
#include "store/records.h"

namespace carma::daemon {

// One GPU's stored samples in [since, until] reduced to at most `points` buckets of equal
// width; each bucket keeps the largest value of each metric in it (a short spike stays
// visible) and is stamped with its first sample's time. Unknown metrics stay null. Rows of
// other GPUs are ignored.
nlohmann::json timeline_samples_json(const std::vector<store::GpuSampleRow>& rows, int gpu,
                                     double since, double until, int points);

// A task of the timeline: {id, user, name, gpus, state, submitted_at, started_at, finished_at,
// energy_j, attempts: [{number, gpus, started_at, ended_at, outcome}]}; an attempt still
// running has outcome "running".
nlohmann::json timeline_task_json(const store::FinishedTask& task);

// A recently finished task: {id, user, name, state, attempts, ooms, finished_at, wait_s, run_s,
// energy_j}.
nlohmann::json recent_task_json(const store::FinishedTask& task);

// The memory a waiting task is planned with, as `carma queue` shows it: the learned need plus
// its margin, else the declared need, else unknown.
std::optional<MiB> planned_need_mib(const TaskSpec& spec);

}  // namespace carma::daemon
