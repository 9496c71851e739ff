// `carma agent`: runs on a node, owns its GPUs and reports to a CARMA server (cluster/agent.h).
// In carma-daemon, like `carma serve`: it needs the GPU backends and the HTTP client.

#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "cli/commands.h"
#include "cluster/agent.h"
#include "cluster/authenticator.h"
#include "cluster/launch_identity.h"
#include "core/host_port.h"
#include "exec/self.h"

namespace carma::cli {

namespace {

std::atomic<bool> g_agent_stop{false};

extern "C" void on_agent_stop(int) { g_agent_stop.store(true); }

struct AgentFlags {
    std::string server;
    std::string token_file;
    bool munge = false;
    std::string munge_socket;
    std::optional<std::uint32_t> server_uid;
    std::string node;
    std::string slurm_job;
    std::string gpus = "auto";
    std::string dcgm_host;
    std::string sharing = "mps";
    std::string state_dir;
    double time_scale = 1;
    double kill_grace_s = 10;
    std::string shim_path;
    bool stop_tasks_on_exit = false;
    bool allow_root_tasks = false;
    std::vector<std::string> privileged_groups = cluster::kDefaultPrivilegedGroups;
};

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

constexpr std::string_view kNodeKeyPrefix = "carma-node-key ";

// A token file holds the server's master token or one node's key ("carma-node-key NODE KEY",
// written by `carma node-key`): the node's key either way.
std::string node_key_from(const std::string& token, const std::string& node,
                          const std::string& path) {
    if (!token.starts_with(kNodeKeyPrefix)) {
        return cluster::auth::node_key(token, node);
    }
    const std::string rest = token.substr(kNodeKeyPrefix.size());
    const auto space = rest.find(' ');
    const std::string named = rest.substr(0, space);
    if (space == std::string::npos || named != node) {
        throw std::runtime_error(fmt::format(
            "--token-file {} holds the key of node {}, and this agent is node {}; give it its "
            "own key (`carma node-key {} --token-file MASTER`) or --node {}",
            path, named, node, node, named));
    }
    return rest.substr(space + 1);
}

std::shared_ptr<cluster::auth::AgentAuth> agent_auth(const AgentFlags& f,
                                                     const std::string& node) {
    if (f.munge == !f.token_file.empty()) {
        throw std::runtime_error("give one of --token-file F (outside Slurm: the server's token "
                                 "or this node's key) and --munge (the cluster's munged)");
    }
    Result<std::unique_ptr<cluster::auth::AgentAuth>> made = nullptr;
    if (f.munge) {
        auto munge = cluster::auth::Munge::open(f.munge_socket);
        if (!munge) {
            throw std::runtime_error(munge.error().message);
        }
        made = cluster::auth::munge_agent(std::move(*munge), node,
                                          f.server_uid ? *f.server_uid : ::geteuid());
    } else {
        auto token = api::read_token_file(f.token_file);
        if (!token) {
            throw std::runtime_error("--token-file: " + token.error().message);
        }
        made = cluster::auth::token_agent(node, node_key_from(*token, node, f.token_file));
    }
    if (!made) {
        throw std::runtime_error(made.error().message);
    }
    return std::shared_ptr<cluster::auth::AgentAuth>(std::move(*made));
}

int run_agent_command(AgentFlags& f) {
    auto where = parse_host_port("--server", f.server);
    if (!where) {
        throw std::runtime_error(where.error().message);
    }
    cluster::AgentOptions o;
    o.server_host = where->host;
    o.server_port = where->port;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    o.node = !f.node.empty() ? f.node : env_or("SLURMD_NODENAME", host);
    o.slurm_job = !f.slurm_job.empty() ? f.slurm_job : env_or("SLURM_JOB_ID", "");
    if (!cluster::auth::valid_node_name(o.node)) {
        throw std::runtime_error(fmt::format("--node '{}' is not a node name; give 1 to 255 of "
                                             "A-Z a-z 0-9 . _ -",
                                             o.node));
    }
    o.auth = agent_auth(f, o.node);
    o.backend.gpus = f.gpus;
    o.backend.dcgm_host = f.dcgm_host;
    o.backend.sharing = f.sharing;
    o.kill_grace_s = f.kill_grace_s;
    o.backend.state_dir =
        !f.state_dir.empty()
            ? f.state_dir
            : env_or("XDG_STATE_HOME", env_or("HOME", "/tmp") + "/.local/state") + "/carma/agent-" +
                  o.node;
    if (!(f.time_scale > 0) || f.time_scale > 10000) {
        throw std::runtime_error("--time-scale must be > 0 and <= 10000");
    }
    o.period_s = 1.0 / f.time_scale;
    o.stop_tasks_on_exit = f.stop_tasks_on_exit;
    o.allow_root_tasks = f.allow_root_tasks;
    for (const std::string& name : f.privileged_groups) {
        // A group this node lacks cannot be given to a task here: nothing to refuse.
        if (const group* g = ::getgrnam(name.c_str())) {
            o.privileged_groups.emplace(g->gr_gid, name);
        }
    }
    if (f.shim_path.empty()) {
        auto exe = exec::this_executable();
        if (!exe) {
            throw std::runtime_error(exe.error().message);
        }
        f.shim_path = (exe->parent_path() / "carma-shim").string();
    }
    if (::access(f.shim_path.c_str(), X_OK) != 0) {
        throw std::runtime_error(fmt::format("the supervisor binary {} is missing; install "
                                             "carma-shim next to carma or give --shim",
                                             f.shim_path));
    }
    o.shim_path = f.shim_path;
    struct sigaction sa {};
    sa.sa_handler = on_agent_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    auto rc = cluster::run_agent(o, g_agent_stop);
    if (!rc) {
        throw std::runtime_error(rc.error().message);
    }
    return *rc;
}

}  // namespace

Action add_agent_command(CLI::App& app) {
    auto f = std::make_shared<AgentFlags>();
    CLI::App* cmd = app.add_subcommand(
        "agent", "Run on a node: own its GPUs and run the tasks a CARMA server places there");
    cmd->add_option("--server", f->server, "The server's agent address HOST:PORT (its --agents)")
        ->required();
    cmd->add_option("--token-file", f->token_file,
                    "Outside Slurm: the server's --agent-token-file or this node's key from "
                    "`carma node-key` (mode 600)");
    cmd->add_flag("--munge", f->munge,
                  "Authenticate with the cluster's munged (Slurm clusters) instead of a token");
    cmd->add_option("--munge-socket", f->munge_socket, "munged's socket (default: its own)");
    cmd->add_option("--server-uid", f->server_uid,
                    "With --munge: the uid the CARMA server runs as (default: this agent's)");
    cmd->add_option("--node", f->node, "This node's name (default $SLURMD_NODENAME, else the host name)");
    cmd->add_option("--slurm-job", f->slurm_job,
                    "The Slurm job whose allocation this runs in (default $SLURM_JOB_ID)");
    cmd->add_option("--gpus", f->gpus, "auto | dcgm | nvml | emulated:COUNTxTYPE, as carma serve")
        ->capture_default_str();
    cmd->add_option("--dcgm-host", f->dcgm_host, "A running nv-hostengine at HOST[:PORT]");
    cmd->add_option("--sharing", f->sharing, "Emulated GPUs: mps | timeslice")->capture_default_str();
    cmd->add_option("--state-dir", f->state_dir,
                    "Attempts and emulated GPUs (default $XDG_STATE_HOME/carma/agent-NODE)");
    cmd->add_option("--time-scale", f->time_scale, "Match the server's --time-scale")
        ->capture_default_str();
    cmd->add_option("--kill-grace", f->kill_grace_s, "Seconds between SIGTERM and SIGKILL")
        ->capture_default_str();
    cmd->add_option("--shim", f->shim_path, "Path of carma-shim (default: next to carma)");
    cmd->add_flag("--stop-tasks-on-exit", f->stop_tasks_on_exit,
                  "On SIGTERM stop the tasks and report them before exiting (Slurm ending the "
                  "allocation); without it they keep running for a restarted agent");
    cmd->add_flag("--allow-root-tasks", f->allow_root_tasks,
                  "A root agent runs tasks of uid 0 too (refused by default: whoever could pose "
                  "as the server would get root on this node)");
    cmd->add_option("--privileged-groups", f->privileged_groups,
                    "Groups a root agent refuses in a task's identity, primary or supplementary, "
                    "unless --allow-root-tasks (gid 0 always)")
        ->delimiter(',')
        ->capture_default_str();
    return [f] { return run_agent_command(*f); };
}

Action add_node_key_command(CLI::App& app) {
    struct Flags {
        std::string node;
        std::string token_file;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = app.add_subcommand(
        "node-key", "Print one node's agent key, derived from the server's --agent-token-file: "
                    "a node given only its key cannot report as another node");
    cmd->add_option("node", f->node, "The node's name (its agent's --node)")->required();
    cmd->add_option("--token-file", f->token_file, "The server's --agent-token-file")->required();
    return [f] {
        if (!cluster::auth::valid_node_name(f->node)) {
            throw std::runtime_error(fmt::format(
                "'{}' is not a node name; give 1 to 255 of A-Z a-z 0-9 . _ -", f->node));
        }
        auto token = api::read_token_file(f->token_file);
        if (!token) {
            throw std::runtime_error("--token-file: " + token.error().message);
        }
        std::printf("%s%s %s\n", std::string(kNodeKeyPrefix).c_str(), f->node.c_str(),
                    cluster::auth::node_key(*token, f->node).c_str());
        return 0;
    };
}

}  // namespace carma::cli
