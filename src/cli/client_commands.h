#pragma once
// The user commands of `carma` that talk to the daemon over its API (docs/api.md). Each takes
// --socket PATH (else $CARMA_SOCKET, else api::default_socket_path()). Register them in main.cpp
// like add_simulate_command; their actions throw std::runtime_error with a user-facing message.

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/commands.h"
#include "core/result.h"
#include "core/units.h"

namespace carma::cli {

Action add_submit_command(CLI::App& app);  // carma submit [opts] -- CMD... | FILE.yaml | FILE.rad
// carma queue [--all] [--json] [--user U]... [--me] [--state S,...] [--wide] [--array]
//             [--format F] [--watch [S]]
Action add_queue_command(CLI::App& app);
Action add_show_command(CLI::App& app);    // carma show ID [--json]
Action add_cancel_command(CLI::App& app);  // carma cancel ID... [--user U] [--state S] [--json]
Action add_hold_command(CLI::App& app);     // carma hold ID... (same selection as cancel)
Action add_release_command(CLI::App& app);  // carma release ID...
Action add_logs_command(CLI::App& app);    // carma logs ID [--stderr] [--attempt N] [--follow]
Action add_gpus_command(CLI::App& app);    // carma gpus [--json]
Action add_replay_command(CLI::App& app);  // carma replay TRACE [--time-scale K] [--dry-run]
// carma estimate [--gpus N] [--mem M] [--json] -- CMD... | FILE.yaml | FILE.rad
Action add_estimate_command(CLI::App& app);

// `--mem` and `--gpus` of submit and estimate, read one way: memory needs a unit (a bare number
// is refused, naming the three spellings); a task gets at least one whole GPU.
Result<MiB> parse_mem_flag(const std::string& text);
Result<int> check_gpus_flag(int gpus);

// The human table of `carma estimate` for an answer of POST /v1/estimate.
std::string format_estimate(const nlohmann::json& answer);

}  // namespace carma::cli
