// carma-daemon: `carma serve` and `carma admin`, in a program of their own
// (src/cli/main/serve_exec.cpp says why). It is started as `carma serve ...` or `carma admin ...`
// and parses exactly what that would.

#include <map>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/main/arg_check.h"
#include "cli/main/option_table.h"

int main(int argc, char** argv) {
    using namespace carma::cli;
    CLI::App app{"CARMA: collocation-aware GPU resource manager for deep-learning training"};
    app.name("carma");
    app.require_subcommand(1);
    const std::map<std::string, Action> actions = {{"serve", add_serve_command(app)},
                                                   {"admin", add_admin_command(app)},
                                                   {"agent", add_agent_command(app)},
                                                   {"node-key", add_node_key_command(app)}};
    if (print_option_table(app, argc, argv)) {
        return 0;
    }
    return run_subcommand(app, argc, argv, actions);
}
