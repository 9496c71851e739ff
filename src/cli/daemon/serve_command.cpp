// carma serve: the daemon. Options come from --config (YAML) and flags; flags win.

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "cli/commands.h"
#include "core/host_port.h"
#include "daemon/config_check.h"
#include "daemon/daemon.h"

namespace carma::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

extern "C" void on_stop_signal(int) { g_stop.store(true); }
// SIGHUP: the loop re-reads the configuration between two ticks (Daemon::run).
extern "C" void on_reload_signal(int) { g_reload.store(true); }

struct ServeFlags {
    std::string config_file;
    bool print_config = false;
    daemon::DaemonConfig values;
    double smact = 0, smocc = 0, drama = 0;
    std::string margin, no_info;
};

// Whom a TCP request with the right token acts as. A root daemon acts as tcp_run_as, never as
// root; without it, nobody (the caller may only look). A user's daemon runs everything as
// itself, so it acts as that user.
Result<std::optional<api::Caller>> tcp_caller(const std::string& run_as) {
    if (::geteuid() != 0) {
        api::Caller self = api::caller_from_credentials({::geteuid(), ::getegid(), 0});
        if (!run_as.empty() && run_as != self.user) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("tcp_run_as {} needs a daemon running as root; this one runs "
                                    "as {} and runs every task as {}",
                                    run_as, self.user, self.user));
        }
        return self;
    }
    if (run_as.empty()) {
        return std::optional<api::Caller>();
    }
    auto who = api::caller_for_user(run_as);
    if (!who) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("tcp_run_as: {}", who.error().message));
    }
    if (who->uid == 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("tcp_run_as {} is root; name an unprivileged user for "
                                "TCP-submitted tasks",
                                run_as));
    }
    return who;
}

template <typename T>
T or_throw(Result<T> r) {
    if (!r) {
        throw std::runtime_error(r.error().message);
    }
    return std::move(*r);
}

// The configuration the --config file and the flags give (flags win); throws on a mistake.
// Called again on each reload, so the file is read afresh and the flags still win.
daemon::DaemonConfig gather_config(CLI::App* cmd, const ServeFlags& f) {
    daemon::DaemonConfig config;
    if (!f.config_file.empty()) {
        auto loaded = daemon::load_config(f.config_file, config);
        if (!loaded) {
            throw std::runtime_error(loaded.error().message);
        }
        config = *loaded;
    }
    auto given = [&](const char* name) { return cmd->count(name) > 0; };
    const daemon::DaemonConfig& v = f.values;
    if (given("--policy")) config.policy = v.policy;
    if (given("--window")) config.window = v.window;
    if (given("--warmup")) config.warmup_s = v.warmup_s;
    if (given("--estimator")) config.estimator = v.estimator;
    if (given("--gpus")) config.gpus = v.gpus;
    if (given("--sharing")) config.sharing = v.sharing;
    if (given("--state-dir")) config.state_dir = v.state_dir;
    if (given("--socket")) config.socket = v.socket;
    if (given("--max-attempts")) config.max_attempts = v.max_attempts;
    if (given("--retry-failures")) config.retry_failures = v.retry_failures;
    if (given("--time-scale")) config.time_scale = v.time_scale;
    if (given("--kill-grace")) config.kill_grace_s = v.kill_grace_s;
    if (given("--tcp")) config.tcp = v.tcp;
    if (given("--token-file")) config.token_file = v.token_file;
    if (given("--web")) config.web = v.web;
    if (given("--web-token-file")) config.web_token_file = v.web_token_file;
    if (given("--allowed-hosts")) config.allowed_hosts = v.allowed_hosts;
    if (given("--tcp-run-as")) config.tcp_run_as = v.tcp_run_as;
    if (given("--shim")) config.shim_path = v.shim_path;
    if (given("--agents")) config.agents = v.agents;
    if (given("--agent-token-file")) config.agent_token_file = v.agent_token_file;
    if (given("--agent-auth")) config.agent_auth = v.agent_auth;
    if (given("--munge-socket")) config.munge_socket = v.munge_socket;
    if (given("--agent-uid")) config.agent_uid = v.agent_uid;
    if (given("--node-timeout")) config.node_timeout_s = v.node_timeout_s;
    if (given("--dcgm-host")) config.dcgm_host = v.dcgm_host;
    if (given("--exclude-gpus")) config.exclude_gpus = v.exclude_gpus;
    if (given("--mps")) config.mps = v.mps;
    if (given("--fences")) config.host.fences = v.host.fences;
    if (given("--retention-days")) config.retention_days = v.retention_days;
    if (given("--mps-control")) config.mps_control = v.mps_control;
    if (given("--sendmail")) config.sendmail = v.sendmail;
    if (given("--risk-smact")) config.risk.smact = f.smact;
    if (given("--risk-smocc")) config.risk.smocc = f.smocc;
    if (given("--risk-drama")) config.risk.drama = f.drama;
    auto mem = [](const std::string& text, MiB& out) {
        auto m = parse_memory(text);
        if (!m) {
            throw std::runtime_error(m.error().message);
        }
        out = *m;
    };
    if (given("--memory-margin")) mem(f.margin, config.memory_margin_mib);
    if (given("--no-info-min-free")) mem(f.no_info, config.no_info_min_free_mib);
    if (const char* env_socket = std::getenv("CARMA_SOCKET"); env_socket && !given("--socket") &&
                                                              config.socket.empty()) {
        config.socket = env_socket;
    }
    return config;
}

int run_serve(CLI::App* cmd, ServeFlags& f) {
    const daemon::DaemonConfig config = gather_config(cmd, f);
    if (f.print_config) {
        if (auto checked = daemon::finalize(config); !checked) {
            throw std::runtime_error(checked.error().message);
        }
        for (const std::string& w : daemon::share_warnings(config.shares)) {
            fmt::print(stderr, "warning: {}\n", w);
        }
        fmt::print("# carma serve's configuration (carma.yaml(5)): every key with its value{}."
                   "\n# Flags override a --config file.\n{}",
                   f.config_file.empty() ? "" : fmt::format(" from {} and the flags", f.config_file),
                   daemon::config_yaml(config));
        return 0;
    }

    // The TCP listener's settings are checked before the daemon takes the state directory, so
    // a token file others can read stops the start before anything runs.
    api::ServerOptions options;
    if (!config.web.empty()) {
        const HostPort web = or_throw(parse_host_port("--web", config.web));
        options.web_host = web.host;
        options.web_port = web.port;
        if (!api::is_loopback_host(web.host) && config.web_token_file.empty()) {
            throw std::runtime_error(fmt::format(
                "--web {} is not loopback: anyone who can reach it would see the page, so "
                "it needs its own token, --web-token-file (a file of mode 600 with a token of at "
                "least 16 characters, not the TCP API's --token-file); or serve on 127.0.0.1 "
                "and reach it through an SSH tunnel",
                config.web));
        }
        if (!config.web_token_file.empty()) {
            options.web_token = or_throw(api::read_token_file(config.web_token_file));
        }
    }
    if (!config.tcp.empty()) {
        const HostPort tcp = or_throw(parse_host_port("--tcp", config.tcp));
        options.tcp_host = tcp.host;
        options.tcp_port = tcp.port;
        if (config.token_file.empty()) {
            throw std::runtime_error("--tcp needs --token-file: a file of mode 600 with a token "
                                     "of at least 16 characters");
        }
        auto token = api::read_token_file(config.token_file);
        if (!token) {
            throw std::runtime_error(token.error().message);
        }
        options.token = *token;
        auto who = tcp_caller(config.tcp_run_as);
        if (!who) {
            throw std::runtime_error(who.error().message);
        }
        options.tcp_caller = *who;
    }

    // A SIGHUP while the daemon starts is kept for its loop, not taken as the end of a session.
    struct sigaction hup {};
    hup.sa_handler = on_reload_signal;
    sigemptyset(&hup.sa_mask);
    sigaction(SIGHUP, &hup, nullptr);
    // Each API handler thread would otherwise keep its own malloc arena of freed answers.
    mallopt(M_ARENA_MAX, 2);
    auto d = daemon::Daemon::create(config);
    if (!d) {
        throw std::runtime_error(d.error().message);
    }
    daemon::Daemon& daemon = **d;
    const daemon::DaemonConfig& c = daemon.config();
    options.socket_path = c.socket;
    options.allowed_hosts = c.allowed_hosts;
    api::ApiServer server(daemon, options);
    if (auto r = server.bind(); !r) {
        throw std::runtime_error(r.error().message);
    }
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);

    spdlog::info("carma serve: policy {}, GPUs {}, fences {}, state {}, socket {}{}", c.policy,
                 daemon.backend_name(), daemon.fences_text(), c.state_dir, c.socket,
                 c.time_scale != 1 ? fmt::format(", time scale {}", c.time_scale) : "");
    for (const std::string& line : server.listening()) {
        spdlog::info("listening: {}", line);
    }
    for (const std::string& w : daemon::share_warnings(c.shares)) {
        spdlog::warn("{}", w);
    }
    std::thread api_thread([&] { server.serve(); });
    const auto reread = [cmd, &f]() -> Result<daemon::DaemonConfig> {
        try {
            return gather_config(cmd, f);
        } catch (const std::exception& e) {
            return fail(ErrorCode::InvalidArgument, e.what());
        }
    };
    daemon.run(g_stop, &g_reload, reread);
    server.stop();
    api_thread.join();
    spdlog::info("carma serve stopped; running tasks continue under their supervisors");
    return 0;
}

}  // namespace

Action add_serve_command(CLI::App& app) {
    auto f = std::make_shared<ServeFlags>();
    CLI::App* cmd = app.add_subcommand("serve", "Run the CARMA daemon");
    daemon::DaemonConfig& v = f->values;
    cmd->add_option("--config", f->config_file, "YAML config file (flags override it)");
    cmd->add_flag("--print-config", f->print_config,
                  "Print the configuration the config file and flags give, every key with its "
                  "meaning, as a config file; then exit");
    cmd->add_option("--policy", v.policy, "Placement policy, e.g. oracle-MAGM, OR-RR, exclusive")
        ->capture_default_str();
    cmd->add_option("--gpus", v.gpus,
                    "auto | dcgm | nvml | emulated:COUNTxTYPE (e.g. emulated:4xA100-40GB); auto "
                    "tries DCGM, then NVML (with GPM where the GPU has it), then emulated GPUs only "
                    "where no NVIDIA driver is meant to be (else it refuses to start)")
        ->capture_default_str();
    cmd->add_option("--dcgm-host", v.dcgm_host,
                    "Use a running nv-hostengine at HOST[:PORT] instead of embedded DCGM");
    cmd->add_option("--exclude-gpus", v.exclude_gpus,
                    "GPUs to leave alone: indices, UUIDs or name patterns (default: *Display*)")
        ->delimiter(',');
    cmd->add_option("--retention-days", v.retention_days,
                    "Drop GPU samples and events older than this many days (0 keeps them)")
        ->capture_default_str();
    cmd->add_flag("--mps", v.mps,
                  "Start an MPS control daemon and launch tasks under it with per-task memory "
                  "limits");
    cmd->add_option("--fences", v.host.fences,
                    "auto | v1 | v2 | off: the cgroup hierarchy each attempt is fenced in (its "
                    "cores, host memory, processes and GPU device files); off runs tasks "
                    "unfenced")
        ->check(CLI::IsMember({"auto", "v1", "v2", "off"}))
        ->capture_default_str();
    cmd->add_option("--mps-control", v.mps_control,
                    "The MPS control program (default nvidia-cuda-mps-control on PATH)");
    cmd->add_option("--sharing", v.sharing, "Emulated GPUs: mps | timeslice")->capture_default_str();
    cmd->add_option("--state-dir", v.state_dir,
                    "State directory (default /var/lib/carma as root, else $XDG_STATE_HOME/carma)");
    cmd->add_option("--socket", v.socket, "API socket (default <state-dir>/carma.sock)");
    cmd->add_option("--window", v.window, "Monitor window in samples")->capture_default_str();
    cmd->add_option("--warmup", v.warmup_s, "Warm-up lock in seconds")->capture_default_str();
    cmd->add_option("--memory-margin", f->margin, "Margin over a known memory need (e.g. 2GiB)");
    cmd->add_option("--no-info-min-free", f->no_info,
                    "Free memory required when nothing is known (e.g. 5GiB)");
    cmd->add_option("--estimator", v.estimator, "horus | faketensor | gpumemnet")
        ->capture_default_str();
    cmd->add_option("--risk-smact", f->smact, "Risk threshold on SMACT (default 0.80)");
    cmd->add_option("--risk-smocc", f->smocc, "Risk threshold on SMOCC (default 0.45)");
    cmd->add_option("--risk-drama", f->drama, "Risk threshold on DRAMA (default 0.40)");
    cmd->add_option("--max-attempts", v.max_attempts, "Attempts per task (out-of-memory retries)")
        ->capture_default_str();
    cmd->add_flag("--retry-failures", v.retry_failures,
                  "Also relaunch tasks that fail for other reasons (the paper's behaviour)");
    cmd->add_option("--time-scale", v.time_scale,
                    "Make periods (sampling, warm-up) and fake jobs K times shorter")
        ->capture_default_str();
    cmd->add_option("--kill-grace", v.kill_grace_s, "Seconds between SIGTERM and SIGKILL on cancel")
        ->capture_default_str();
    cmd->add_option("--tcp", v.tcp, "Also listen on loopback HOST:PORT (needs --token-file)");
    cmd->add_option("--token-file", v.token_file,
                    "Bearer token of the --tcp API (owned by the daemon's user, mode 600)");
    cmd->add_option("--web", v.web,
                    "Also serve the read-only web page on HOST:PORT (e.g. 127.0.0.1:8080; an "
                    "address that is not loopback needs --web-token-file)");
    cmd->add_option("--web-token-file", v.web_token_file,
                    "The web page's own token (mode 600; never the --token-file's): it shows "
                    "the page and nothing else");
    cmd->add_option("--allowed-hosts", v.allowed_hosts,
                    "Names besides localhost that requests may carry in Host (those people type "
                    "to reach --web), comma-separated")
        ->delimiter(',');
    cmd->add_option("--tcp-run-as", v.tcp_run_as,
                    "Unprivileged user that TCP-submitted tasks of a root daemon run as (without "
                    "it, TCP clients of a root daemon may only look)");
    cmd->add_option("--shim", v.shim_path, "Path of carma-shim (default: next to carma)");
    cmd->add_option("--sendmail", v.sendmail,
                    "The mail transfer agent's sendmail, for --mail-type (default "
                    "/usr/sbin/sendmail)");
    cmd->add_option("--agents", v.agents,
                    "Schedule over nodes: listen on HOST:PORT for `carma agent`s (one per node, "
                    "e.g. under `carma slurm up`); the daemon then uses their GPUs, not its own");
    cmd->add_option("--agent-token-file", v.agent_token_file,
                    "Token mode: the master token (mode 600); each agent holds it or its node's "
                    "key (`carma node-key`)");
    cmd->add_option("--agent-auth", v.agent_auth,
                    "token (HMAC, --agent-token-file) | munge (the cluster's munged)");
    cmd->add_option("--munge-socket", v.munge_socket, "munged's socket (default: its own)");
    cmd->add_option("--agent-uid", v.agent_uid,
                    "MUNGE mode: the uid agents run as (default: the daemon's own)");
    cmd->add_option("--node-timeout", v.node_timeout_s,
                    "Seconds an agent may be silent before its node takes no new tasks")
        ->capture_default_str();
    return [cmd, f] { return run_serve(cmd, *f); };
}

}  // namespace carma::cli
