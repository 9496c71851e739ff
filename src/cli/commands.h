#pragma once
// Subcommands of `carma` and `carma-daemon`, one file each: cli/commands/ (carma's),
// cli/slurm/slurm_command.cpp, cli/daemon/ (carma-daemon's). Each registers its options on the
// app and returns the action to run; cli/main/ registers them.

#include <functional>

#include <CLI/CLI.hpp>

namespace carma::cli {

using Action = std::function<int()>;

// The user commands of `carma` that talk to the daemon over its API (docs/api.md). Each takes
// --socket PATH (else $CARMA_SOCKET, else api::resolve_socket_path()'s default). Register them in
// cli/main/carma_main.cpp like add_simulate_command; their actions throw std::runtime_error with
// a user-facing message.
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
// carma acct [--user U] [--state S] [--since T] [--json] [--format FIELDS]: accounting of
// finished tasks, like Slurm's sacct, from GET /v1/acct (docs/api.md).
Action add_acct_command(CLI::App& app);
// carma top [--socket S] [--interval SECONDS] [--once]: the daemon's live view (GET /v1/view,
// docs/api.md) full-screen in a terminal, redrawn every interval until q. The screen itself is
// cli/views/top_view (pure); cli/commands/top_command.cpp is the terminal around it.
Action add_top_command(CLI::App& app);
// carma report [--socket S] [--since T] [--until T] DIR: the HTML report of the daemon's own
// history (sim/report.h, the page `carma simulate --report` writes), from one GET /v1/timeline.
Action add_report_command(CLI::App& app);
// carma nodes [--json] [--socket S]: the nodes whose agents report to the daemon (GET
// /v1/nodes); carma nodes lost NAME [--socket S]: giving up a node whose agent has gone silent
// (POST /v1/nodes/lost; root or the daemon's user).
Action add_nodes_command(CLI::App& app);
// carma share [--json] [--socket S]: fair share per user, as Slurm's sshare (GET /v1/share).
Action add_share_command(CLI::App& app);
// carma slurm up|status|down: CARMA inside Slurm allocations (cli/slurm/slurm_command.cpp).
Action add_slurm_command(CLI::App& app);

Action add_simulate_command(CLI::App& app);
Action add_demo_command(CLI::App& app);

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

}  // namespace carma::cli
