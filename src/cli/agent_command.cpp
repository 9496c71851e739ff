// `carma agent`: runs on a node, owns its GPUs and reports to a CARMA server (cluster/agent.h).
// In carma-daemon, like `carma serve`: it needs the GPU backends and the HTTP client.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "cli/commands.h"
#include "cluster/agent.h"
#include "core/host_port.h"
#include "exec/self.h"

namespace carma::cli {

namespace {

std::atomic<bool> g_agent_stop{false};

extern "C" void on_agent_stop(int) { g_agent_stop.store(true); }

struct AgentFlags {
    std::string server;
    std::string token_file;
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
};

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

int run_agent_command(AgentFlags& f) {
    auto where = parse_host_port("--server", f.server);
    if (!where) {
        throw std::runtime_error(where.error().message);
    }
    auto token = api::read_token_file(f.token_file);
    if (!token) {
        throw std::runtime_error("--token-file: " + token.error().message);
    }
    cluster::AgentOptions o;
    o.server_host = where->host;
    o.server_port = where->port;
    o.token = *token;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    o.node = !f.node.empty() ? f.node : env_or("SLURMD_NODENAME", host);
    o.slurm_job = !f.slurm_job.empty() ? f.slurm_job : env_or("SLURM_JOB_ID", "");
    if (o.node.empty() || o.node.find_first_of("/ \t\n") != std::string::npos) {
        throw std::runtime_error(fmt::format("--node '{}' is not a node name; give one without "
                                             "spaces or '/'",
                                             o.node));
    }
    o.config.gpus = f.gpus;
    o.config.dcgm_host = f.dcgm_host;
    o.config.sharing = f.sharing;
    o.config.time_scale = f.time_scale;
    o.config.kill_grace_s = f.kill_grace_s;
    o.config.state_dir = !f.state_dir.empty()
                             ? f.state_dir
                             : env_or("XDG_STATE_HOME", env_or("HOME", "/tmp") + "/.local/state") +
                                   "/carma/agent-" + o.node;
    if (!(f.time_scale > 0) || f.time_scale > 10000) {
        throw std::runtime_error("--time-scale must be > 0 and <= 10000");
    }
    o.period_s = 1.0 / f.time_scale;
    o.stop_tasks_on_exit = f.stop_tasks_on_exit;
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
    o.config.shim_path = f.shim_path;
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
                    "The token the server expects (its --agent-token-file; mode 600)")
        ->required();
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
    return [f] { return run_agent_command(*f); };
}

}  // namespace carma::cli
