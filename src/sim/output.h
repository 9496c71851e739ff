#pragma once
// The comparison as a person reads it (a text table with ratios to exclusive) and as a program
// reads it (JSON).

#include <string>

#include <nlohmann/json.hpp>

#include "sim/results.h"

namespace carma::sim {

std::string format_table(const Comparison& comparison);
nlohmann::json to_json(const Comparison& comparison);

}  // namespace carma::sim
