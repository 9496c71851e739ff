#pragma once
// Subcommands of `carma`. Each registers its options on the app and returns the action to run.

#include <functional>

#include <CLI/CLI.hpp>

namespace carma::cli {

using Action = std::function<int()>;

Action add_simulate_command(CLI::App& app);
Action add_serve_command(CLI::App& app);  // in carma-daemon
// In carma: `serve` for --help; exec_daemon() replaces the process with carma-daemon.
Action add_serve_stub(CLI::App& app);
int exec_daemon(char** argv);
Action add_demo_command(CLI::App& app);
Action add_admin_command(CLI::App& app);

}  // namespace carma::cli
