#pragma once
// Subcommands of `carma`. Each registers its options on the app and returns the action to run.

#include <functional>

#include <CLI/CLI.hpp>

namespace carma::cli {

using Action = std::function<int()>;

Action add_simulate_command(CLI::App& app);
// In carma-daemon.
Action add_serve_command(CLI::App& app);
Action add_admin_command(CLI::App& app);
Action add_agent_command(CLI::App& app);
Action add_node_key_command(CLI::App& app);
// In carma: `serve` and `admin` for --help; exec_daemon() replaces the process with
// carma-daemon, which runs them.
bool runs_in_daemon(const char* command);
Action add_daemon_stubs(CLI::App& app);
int exec_daemon(char** argv);
Action add_demo_command(CLI::App& app);

}  // namespace carma::cli
