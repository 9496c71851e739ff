#pragma once
// What `carma replay` says when the daemon fell behind its period while the trace ran: at a
// time scale its machine cannot keep up with, the replay silently drifts from `carma simulate`.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace carma::cli {

// From the daemon's GET /v1/status answers at the replay's start and end (their `loop`): a
// warning when a tenth or more of the periods between them ended late; nothing when the daemon
// kept up, or is too old to say.
std::optional<std::string> replay_lag_warning(const nlohmann::json& before,
                                              const nlohmann::json& after);

}  // namespace carma::cli
