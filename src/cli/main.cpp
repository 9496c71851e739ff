// `carma`: the one command of CARMA. Exceptions stop here and become a message and an exit code.

#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/acct_command.h"
#include "cli/arg_check.h"
#include "cli/client_commands.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
    using namespace carma::cli;
    if (argc > 1 && std::string(argv[1]) == "serve") {
        return exec_daemon(argv);
    }
    CLI::App app{"CARMA: collocation-aware GPU resource manager for deep-learning training"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "carma 0.1.0");
    const std::map<std::string, Action> actions = {
        {"simulate", add_simulate_command(app)}, {"serve", add_serve_stub(app)},
        {"submit", add_submit_command(app)},     {"queue", add_queue_command(app)},
        {"show", add_show_command(app)},         {"cancel", add_cancel_command(app)},
        {"logs", add_logs_command(app)},         {"gpus", add_gpus_command(app)},
        {"replay", add_replay_command(app)},     {"demo", add_demo_command(app)},
        {"admin", add_admin_command(app)},       {"estimate", add_estimate_command(app)},
        {"hold", add_hold_command(app)},         {"release", add_release_command(app)},
        {"acct", add_acct_command(app)},
    };
    // Before CLI11: its messages do not name the mistyped word.
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
        for (const auto& [name, action] : actions) {
            if (app.got_subcommand(name)) {
                return action();
            }
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "carma: {}\n", e.what());
        return 1;
    }
    return 0;
}
