// carma-daemon: `carma serve` and `carma admin`, in a program of their own (src/cli/serve_exec.cpp
// says why). It is started as `carma serve ...` or `carma admin ...` and parses exactly what that
// would.

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arg_check.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
    using namespace carma::cli;
    CLI::App app{"CARMA: collocation-aware GPU resource manager for deep-learning training"};
    app.name("carma");
    app.require_subcommand(1);
    const Action serve = add_serve_command(app);
    const Action admin = add_admin_command(app);
    if (const std::string wrong =
            unknown_argument_message(app, std::vector<std::string>(argv + 1, argv + argc));
        !wrong.empty()) {
        fmt::print(stderr, "carma: {}\n", wrong);
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        return app.got_subcommand("serve") ? serve() : admin();
    } catch (const std::exception& e) {
        fmt::print(stderr, "carma: {}\n", e.what());
        return 1;
    }
}
