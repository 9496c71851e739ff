#pragma once
// The comparison as a person reads it (a text table with ratios to exclusive) and as a program
// reads it (JSON).

#include <string>

#include <nlohmann/json.hpp>

#include "sim/results.h"

namespace carma::sim {

std::string format_table(const Comparison& comparison);
// The table's "vs_excl" cell: the change of `value` relative to `base` ("-12.5%"), "-" when the
// base is not positive.
std::string format_change(double value, double base);
// The run of the `exclusive` policy, the base of every ratio; nullptr when it did not run.
const PolicyResult* find_exclusive(const Comparison& c);
nlohmann::json to_json(const Comparison& comparison);

// One CSV line per task and policy (`carma simulate --tasks FILE`): the task's wait (over all
// attempts), first start, end, the GPUs of its last attempt (space-separated), attempts, OOM
// crashes and slowdown (run time of the successful attempt / solo run time). Times in seconds
// from the trace's start; -1 where the task never started or never completed.
std::string render_tasks_csv(const Comparison& comparison);

}  // namespace carma::sim
