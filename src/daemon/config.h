#pragma once
// Everything `carma serve` can be told, from a YAML file (--config) and flags (flags win).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/preemption.h"
#include "core/result.h"
#include "core/risk_filter.h"
#include "core/units.h"
#include "core/user_limits.h"
#include "daemon/host_config.h"
#include "device/backend_choice.h"

namespace carma::daemon {

struct DaemonConfig {
    std::string policy = "carma";
    RiskThresholds risk;
    std::size_t window = 30;         // samples per GPU
    double warmup_s = 30;
    MiB memory_margin_mib = 2048;
    MiB no_info_min_free_mib = 5120;
    std::string estimator = "horus";
    std::string gpus = "auto";       // auto | dcgm | nvml | emulated:4xA100-40GB
    std::string dcgm_host;           // a running nv-hostengine (HOST[:PORT]); empty = embedded
    // GPUs CARMA leaves alone: an index ("3"), a UUID ("GPU-8a1c..."), or a name pattern with
    // shell wildcards ("*Display*", the spec's display GPU).
    std::vector<std::string> exclude_gpus = {"*Display*"};
    double retention_days = 30;      // GPU samples and events older than this are dropped; 0 keeps all
    bool mps = false;                // start an MPS control daemon; tasks get memory limits
    std::string mps_control;         // the control program; default nvidia-cuda-mps-control
    std::string sharing = "mps";     // emulated GPUs only
    // Emulated GPUs only: what collocated jobs really do (model/world.h): model | measured, the
    // bias F on every collocation's slowdown, the relative sd of memory peaks.
    std::string world = "model";
    double world_bias = 0;
    double world_noise = 0;
    std::string state_dir;           // default: default_state_dir()
    std::string socket;              // default: <state_dir>/carma.sock
    int max_attempts = 3;
    bool retry_failures = false;     // relaunch any non-zero exit, as the paper's code does
    double time_scale = 1;           // periods (sampling, warm-up) and fake jobs K times shorter
    double kill_grace_s = 10;
    std::string tcp;                 // "127.0.0.1:PORT", empty = off
    std::string token_file;          // the TCP API's token; owned by the daemon's user, mode 600
    // The read-only web page as plain HTTP, "HOST:PORT"; empty = only on the socket. Not
    // loopback: needs web_token_file, the page's own token (never the TCP API's).
    std::string web;
    std::string web_token_file;
    // Names besides localhost and loopback addresses that requests may carry in Host (the
    // names people use to reach --web); any other Host is refused (api/request_guard.h).
    std::vector<std::string> allowed_hosts;
    // What one user may ask for (YAML section `limits:`), the running limits included.
    UserLimits limits;
    // Fair share (core/fair_share.h), which only `carma` orders by: on or off, the half-life of
    // charged usage, how far ahead the factor counts the running tasks' charge, shares per user
    // or "@group" (every other user has 1), and the priority's weights (P = fair-share weight x
    // F + age weight x [waited max_wait] - nice).
    bool fair_share = true;
    double fairshare_half_life_s = 7 * 24 * 3600.0;
    double fairshare_horizon_s = 3600;
    std::map<std::string, double> shares;
    // How long a user's Unix groups (for "@group" shares) are trusted before they are looked up
    // again (`groups_refresh`; core/group_memberships.h): a user removed from a group loses its
    // shares within this, on the real clock.
    double groups_refresh_s = 300;
    double priority_weight_fairshare = 10000;
    double priority_weight_age = 1000;
    // Fair-share preemption (core/preemption.h; carma with fair share only): off unless
    // `preemption: true`; an attempt runs `preempt_min_run` before it may be stopped; `margin`
    // is how much further ahead the stopped user must stay; one user's waiting tasks make at most
    // `preempt_max_stops` stops per `preempt_stops_window` (core/preemption_budget.h).
    PreemptionConfig preemption;
    // The unprivileged user that TCP-submitted tasks of a root daemon run as; empty: TCP
    // clients of a root daemon may look but not act (never act as root).
    std::string tcp_run_as;
    std::string shim_path;           // default: carma-shim next to the carma executable
    // The local mail transfer agent's sendmail, which --mail-type needs; a submission that asks
    // for mail is refused when it is not there.
    std::string sendmail = "/usr/sbin/sendmail";
    // Scheduling over several nodes: "HOST:PORT" the node agents (`carma agent`) report to. The
    // daemon then has no GPUs of its own; its GPUs are the agents'. Empty = one server.
    std::string agents;
    // How agents and the server prove who they are (cluster/authenticator.h): "token" (HMAC
    // keyed by agent_token_file, mode 600) or "munge" (the cluster's munged; agents must run
    // as agent_uid, default the daemon's own uid). "": token when agent_token_file is given.
    std::string agent_auth;
    std::string agent_token_file;
    std::string munge_socket;        // "" = munged's default socket
    std::optional<std::uint32_t> agent_uid;
    double node_timeout_s = 30;      // an agent silent this long: its node takes no tasks
    // The agents' port (cluster/hub.h, agent_port_limits(), whose defaults these are): agents'
    // connections in all and per node (a node's key cannot take the other nodes' slots), and
    // the deadlines for a request's head and for the whole request (a trickle is cut off).
    std::size_t agent_connections = 256;
    std::size_t agent_connections_per_node = 4;
    int agent_head_timeout_s = 5;
    int agent_request_timeout_s = 15;
    // The server beside its GPUs: reserves, defaults, fences (daemon/host_config.h).
    HostConfig host;
};

// One key of a config file and what it means. Keys of a section are written "section.key".
struct ConfigKey {
    const char* key;
    const char* help;
};
// Every key a config file may hold, in the order config_yaml() writes them. The parser accepts
// exactly the top-level ones; carma.yaml(5) and the packaged /etc/carma/carma.yaml are
// generated from this table (`carma serve --print-config`), so they cannot drift from it.
const std::vector<ConfigKey>& config_keys();

// `c` as a config file that parse_config() reads back to `c`: every key of config_keys(), each
// after its meaning as comment lines. A key left unset (an empty string: its default depends on
// others or on who runs the daemon) is written as "" and its comment says what the default is.
std::string config_yaml(const DaemonConfig& c);
// The value of one key of config_keys() as config_yaml() writes it ("" for a section's own key):
// what a reload compares key by key.
std::string config_value(const DaemonConfig& c, std::string_view key);

// /var/lib/carma as root, $XDG_STATE_HOME/carma (~/.local/state/carma) otherwise: the directory
// of api::default_socket_path().
std::string default_state_dir();

// Reads a YAML config; unknown keys are errors that name the key and the file.
Result<DaemonConfig> load_config(const std::string& path, DaemonConfig base);
// Parses YAML text (for tests); `source` names it in errors.
Result<DaemonConfig> parse_config(const std::string& text, const std::string& source,
                                  DaemonConfig base);

// The part of the configuration that chooses and configures the GPU backend.
device::BackendChoice backend_choice(const DaemonConfig& config);

// Checks values and fills defaults that depend on others (socket from state dir).
Result<DaemonConfig> finalize(DaemonConfig config);

}  // namespace carma::daemon
