// `carma`: the one command of CARMA. Exceptions stop here and become a message and an exit code.

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/main/arg_check.h"
#include "cli/main/option_table.h"
#include "cli/views/acct_view.h"

int main(int argc, char** argv) {
    using namespace carma::cli;
    if (argc > 1 && runs_in_daemon(argv[1])) {
        return exec_daemon(argv);
    }
    CLI::App app{"CARMA: collocation-aware GPU resource manager for deep-learning training"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "carma " CARMA_VERSION);
    using Add = Action (*)(CLI::App&);
    static constexpr std::pair<const char*, Add> kCommands[] = {
        {"simulate", add_simulate_command}, {"serve", add_daemon_stubs},
        {"submit", add_submit_command},     {"queue", add_queue_command},
        {"show", add_show_command},         {"cancel", add_cancel_command},
        {"logs", add_logs_command},         {"gpus", add_gpus_command},
        {"replay", add_replay_command},     {"demo", add_demo_command},
        {"estimate", add_estimate_command},
        {"hold", add_hold_command},         {"release", add_release_command},
        {"acct", add_acct_command},         {"top", add_top_command},
        {"report", add_report_command},     {"slurm", add_slurm_command},
        {"nodes", add_nodes_command},       {"share", add_share_command},
    };
    // Only the command asked for is set up: building every command's options was most of what
    // a `carma submit` spent before its request. Help and typos see them all.
    const std::string first = argc > 1 ? argv[1] : "";
    const bool named = std::any_of(std::begin(kCommands), std::end(kCommands),
                                   [&](const auto& c) { return first == c.first; });
    std::map<std::string, Action> actions;
    for (const auto& [name, add] : kCommands) {
        if (!named || first == name) {
            actions.emplace(name, add(app));
        }
    }
    if (print_option_table(app, argc, argv)) {
        return 0;
    }
    return run_subcommand(app, argc, argv, actions);
}
