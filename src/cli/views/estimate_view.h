#pragma once
// `carma estimate`'s table as a pure function of an answer of POST /v1/estimate (docs/api.md):
// what every knowledge source says about a task and the need CARMA would plan with, and why.
// The command around it is cli/commands/estimate_command.cpp.

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace carma::cli {

// The human table of `carma estimate` for an answer of POST /v1/estimate.
std::string format_estimate(const nlohmann::json& answer);

}  // namespace carma::cli
