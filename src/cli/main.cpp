// `carma`: the one command of CARMA. Exceptions stop here and become a message and an exit code.

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"CARMA: collocation-aware GPU resource manager for deep-learning training"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "carma 0.1.0");
    carma::cli::Action simulate = carma::cli::add_simulate_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        if (app.got_subcommand("simulate")) {
            return simulate();
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "carma: {}\n", e.what());
        return 1;
    }
    return 0;
}
