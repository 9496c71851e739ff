// The configuration's key table and writing a configuration back as YAML (config_yaml): what
// `carma serve --print-config`, carma.yaml(5) and the packaged /etc/carma/carma.yaml come from.
#include "daemon/config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "api/client.h"
#include "core/memory_need.h"
#include "core/controls.h"
#include "core/policy.h"
#include "core/text.h"
#include "core/time_text.h"
#include "model/world.h"

namespace carma::daemon {

const std::vector<ConfigKey>& config_keys() {
    static const std::vector<ConfigKey> keys = {
        {"policy", "Placement policy: carma (CARMA's own, learns from history) or one of the "
                   "paper's: oracle-MAGM, OR-RR, EST-LUG, exclusive, ..."},
        {"gpus", "auto | dcgm | nvml | emulated:COUNTxTYPE (e.g. emulated:4xA100-40GB). auto "
                 "tries DCGM, then NVML, then emulated GPUs only where no NVIDIA driver is meant "
                 "to be (else the daemon refuses to start)."},
        {"dcgm_host", "A running nv-hostengine at HOST[:PORT] instead of DCGM inside the "
                      "daemon; \"\" embeds DCGM."},
        {"exclude_gpus", "GPUs left alone: indices, UUIDs or name patterns with shell "
                         "wildcards; [] leaves none out."},
        {"mps", "true: start nvidia-cuda-mps-control and launch tasks under it with per-task "
                "memory limits."},
        {"mps_control", "The MPS control program; \"\" is nvidia-cuda-mps-control on PATH."},
        {"sharing", "Emulated GPUs only: mps | timeslice."},
        {"world", "Emulated GPUs only: what collocated jobs really do, model | measured."},
        {"world_bias", "Emulated GPUs only: a bias F on every collocation's slowdown."},
        {"world_noise", "Emulated GPUs only: the relative standard deviation of memory peaks."},
        {"window", "Monitor samples per GPU (one per second), 1..3600."},
        {"warmup_s", "Seconds a GPU that received a task takes no other."},
        {"memory_margin", "Added to a task's known memory need."},
        {"no_info_min_free", "Free memory a GPU needs for a task nothing is known about."},
        {"estimator", "Memory estimator of the EST-* policies: horus | faketensor | gpumemnet."},
        {"risk", "A GPU is dropped when SMACT >= smact and (SMOCC >= smocc or DRAMA >= drama)."},
        {"risk.smact", "Threshold on SMACT (SMs busy)."},
        {"risk.smocc", "Threshold on SMOCC (resident warps)."},
        {"risk.drama", "Threshold on DRAMA (memory interface busy)."},
        {"max_attempts", "Launches per task, out-of-memory relaunches included, 1..100."},
        {"retry_failures", "true: relaunch any failed attempt, as the paper's code does."},
        {"retention_days", "Drop GPU samples and events older than this many days; 0 keeps "
                           "them."},
        {"kill_grace_s", "Seconds between SIGTERM and SIGKILL when a task is cancelled."},
        {"time_scale", "Make periods (sampling, warm-up) and fake jobs K times shorter (demos "
                       "and tests)."},
        {"state_dir", "The database, the attempts' files and the socket; \"\" is /var/lib/carma "
                      "as root, else $XDG_STATE_HOME/carma."},
        {"socket", "The API's Unix socket; \"\" is <state_dir>/carma.sock."},
        {"shim_path", "carma-shim, each attempt's supervisor; \"\" is carma-shim next to "
                      "carma."},
        {"sendmail", "The mail transfer agent's sendmail that --mail-type mails through; "
                     "without it a submission asking for mail is refused."},
        {"tcp", "Also serve the API on loopback HOST:PORT (needs token_file); \"\" is off."},
        {"token_file", "The TCP API's bearer token: at least 16 characters, owned by the "
                       "daemon's user, mode 600."},
        {"tcp_run_as", "The unprivileged user TCP-submitted tasks of a root daemon run as; \"\": "
                       "TCP clients of a root daemon may only look."},
        {"web", "Also serve the read-only web page as plain HTTP on HOST:PORT; \"\" is off. Not "
                "loopback needs web_token_file."},
        {"web_token_file", "The web page's own token (mode 600, never token_file's): it shows "
                           "the page and nothing else."},
        {"allowed_hosts", "Names besides localhost that requests may carry in Host (the names "
                          "people use to reach the page); any other Host is refused."},
        {"agents", "Schedule over nodes: listen on HOST:PORT for `carma agent`s, whose GPUs the "
                   "daemon then uses instead of its own; \"\" is one server."},
        {"agent_auth", "How agents prove who they are: token (HMAC keyed by agent_token_file) | "
                       "munge (the cluster's munged); \"\" is token when agent_token_file is "
                       "given."},
        {"agent_token_file", "Token mode: the master token (mode 600); each agent holds it or "
                             "its node's key (`carma node-key`)."},
        {"munge_socket", "munged's socket; \"\" is munged's default."},
        {"agent_uid", "MUNGE mode: the uid agents run as; null is the daemon's own."},
        {"node_timeout_s", "Seconds an agent may be silent before its node takes no new tasks, "
                           "1..86400."},
        {"agent_connections", "The agents' port: agents' connections open at once, in all "
                              "(429 beyond), 1..4096."},
        {"agent_connections_per_node", "... and per node, so one node's key cannot take the "
                                       "others' (an agent needs one)."},
        {"agent_head_timeout_s", "Seconds a request's head may take on the agents' port, "
                                 "1..60."},
        {"agent_request_timeout_s", "Seconds a whole request may take there; a connection "
                                    "that trickles its bytes is closed (408)."},
        {"limits", "What one user may ask for; 0 is no limit."},
        {"limits.max_waiting_per_user", "Tasks one user may have waiting (queued, recovering, "
                                        "held) at once."},
        {"limits.max_array_size", "Members of one --array."},
        {"limits.max_submit_bytes_per_task", "Command line, environment and name of one task, "
                                             "in bytes."},
        {"limits.max_submit_bytes_per_request", "What one submission stores in all (members "
                                                "times bytes)."},
        {"limits.submit_rate_per_user", "Submissions (an array is one) per second, "
                                        "sustained ..."},
        {"limits.submit_burst_per_user", "... and at once after a quiet spell."},
        {"limits.max_gpus_per_user", "Physical GPUs one user's running tasks may hold at "
                                     "once, a GPU several of them share counted once (Slurm's "
                                     "QOS MaxTRESPerUser=gres/gpu)."},
        {"limits.max_running_per_user", "Tasks of one user that may run at once (Slurm's QOS "
                                        "MaxJobsPerUser)."},
        {"fair_share", "carma only: order waiting tasks by each user's fair-share factor (true), "
                       "or by age and nice alone (false)."},
        {"fairshare_half_life", "The half-life of charged usage (a span: 7d, 36h)."},
        {"fairshare_horizon", "The fair-share factor counts what each user's running tasks "
                              "will be charged over this span ahead (0s: usage alone)."},
        {"preemption", "carma with fair share: stop a --requeue task of an over-served user "
                       "(SIGTERM, then SIGKILL after kill_grace_s) and queue it again when "
                       "that lets an under-served user's waiting task start (true/false)."},
        {"preempt_min_run", "An attempt runs this long before preemption may stop it (a span: "
                            "10m; Slurm's PreemptExemptTime)."},
        {"preempt_margin", "How much the stopped user's allocation (GPUs charged per share) "
                           "must still exceed the other's after the swap (0: none)."},
        {"preempt_max_stops", "Stops one user's waiting tasks may make per "
                              "preempt_stops_window, whatever tasks they are for (1..10000)."},
        {"preempt_stops_window", "The span preempt_max_stops counts over (a span: 1h). A "
                                 "task cancelled or held after a stop was made for it charges "
                                 "its owner the GPU time the stop lost."},
        {"shares", "Shares per user, or per Unix group as \"@group\" (its members split it), "
                   "e.g. {alice: 2, \"@phd\": 3}; every other user has 1."},
        {"groups_refresh", "How long a user's Unix groups are trusted for \"@group\" shares "
                           "before they are looked up again (a span: 5m)."},
        {"priority_weight_fairshare", "Weight of the fair-share factor in a waiting task's "
                                      "priority."},
        {"priority_weight_age", "Weight of having waited max_wait (2 h) in the priority; "
                                "--nice N subtracts N."},
        {"fences", "auto | v1 | v2 | off: the cgroup hierarchy each attempt is fenced in "
                   "(cores, host memory, processes, GPU device files); auto finds it and the "
                   "daemon refuses to start without one; off runs tasks unfenced."},
        {"host", "The server beside its GPUs: cores and host memory."},
    };
    static const std::vector<ConfigKey> all = [] {
        std::vector<ConfigKey> out = keys;
        static std::vector<std::string> names;  // the keys' storage: they are const char*
        names.reserve(host_config_keys().size());
        for (const HostConfigKey& k : host_config_keys()) {
            names.push_back(std::string("host.") + k.key);
            out.push_back(ConfigKey{names.back().c_str(), k.help});
        }
        return out;
    }();
    return all;
}

namespace {

// A YAML scalar: plain where that reads back as the same string, else double-quoted.
std::string yaml_string(const std::string& s) {
    static const std::set<std::string> special = {"null", "true", "false", "yes", "no", "on",
                                                  "off", "y", "n", "~"};
    const bool plain =
        !s.empty() && !special.contains(to_lower(s)) &&
        std::isalpha(static_cast<unsigned char>(s.front())) != 0 &&
        std::all_of(s.begin(), s.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-' ||
                   ch == '.' || ch == '/';
        });
    if (plain) {
        return s;
    }
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
        }
        out += ch;
    }
    return out + "\"";
}

std::string yaml_list(const std::vector<std::string>& items) {
    std::string out = "[";
    for (const std::string& item : items) {
        out += (out.size() > 1 ? ", " : "") + yaml_string(item);
    }
    return out + "]";
}

std::string yaml_memory(MiB mib) {
    return mib % 1024 == 0 ? fmt::format("{}GiB", mib / 1024) : fmt::format("{}MiB", mib);
}

std::string yaml_number(double d) { return fmt::format("{}", d); }

std::string yaml_shares(const std::map<std::string, double>& shares) {
    std::string out = "{";
    for (const auto& [who, n] : shares) {
        out += fmt::format("{}{}: {}", out.size() > 1 ? ", " : "", yaml_string(who),
                           yaml_number(n));
    }
    return out + "}";
}

// A span as the YAML writes it back: whole days, hours or minutes where it is one, else seconds.
// The value of one key of config_keys() as YAML ("" for a section: its keys follow).
std::string yaml_value(const DaemonConfig& c, std::string_view key) {
    const std::map<std::string_view, std::function<std::string()>> values = {
        {"policy", [&] { return yaml_string(c.policy); }},
        {"gpus", [&] { return yaml_string(c.gpus); }},
        {"dcgm_host", [&] { return yaml_string(c.dcgm_host); }},
        {"exclude_gpus", [&] { return yaml_list(c.exclude_gpus); }},
        {"mps", [&] { return std::string(c.mps ? "true" : "false"); }},
        {"mps_control", [&] { return yaml_string(c.mps_control); }},
        {"sharing", [&] { return yaml_string(c.sharing); }},
        {"world", [&] { return yaml_string(c.world); }},
        {"world_bias", [&] { return yaml_number(c.world_bias); }},
        {"world_noise", [&] { return yaml_number(c.world_noise); }},
        {"window", [&] { return std::to_string(c.window); }},
        {"warmup_s", [&] { return yaml_number(c.warmup_s); }},
        {"memory_margin", [&] { return yaml_memory(c.memory_margin_mib); }},
        {"no_info_min_free", [&] { return yaml_memory(c.no_info_min_free_mib); }},
        {"estimator", [&] { return yaml_string(c.estimator); }},
        {"risk", [] { return std::string(); }},
        {"risk.smact", [&] { return yaml_number(c.risk.smact); }},
        {"risk.smocc", [&] { return yaml_number(c.risk.smocc); }},
        {"risk.drama", [&] { return yaml_number(c.risk.drama); }},
        {"max_attempts", [&] { return std::to_string(c.max_attempts); }},
        {"retry_failures", [&] { return std::string(c.retry_failures ? "true" : "false"); }},
        {"retention_days", [&] { return yaml_number(c.retention_days); }},
        {"kill_grace_s", [&] { return yaml_number(c.kill_grace_s); }},
        {"time_scale", [&] { return yaml_number(c.time_scale); }},
        {"state_dir", [&] { return yaml_string(c.state_dir); }},
        {"socket", [&] { return yaml_string(c.socket); }},
        {"shim_path", [&] { return yaml_string(c.shim_path); }},
        {"sendmail", [&] { return yaml_string(c.sendmail); }},
        {"tcp", [&] { return yaml_string(c.tcp); }},
        {"token_file", [&] { return yaml_string(c.token_file); }},
        {"tcp_run_as", [&] { return yaml_string(c.tcp_run_as); }},
        {"web", [&] { return yaml_string(c.web); }},
        {"web_token_file", [&] { return yaml_string(c.web_token_file); }},
        {"allowed_hosts", [&] { return yaml_list(c.allowed_hosts); }},
        {"agents", [&] { return yaml_string(c.agents); }},
        {"agent_auth", [&] { return yaml_string(c.agent_auth); }},
        {"agent_token_file", [&] { return yaml_string(c.agent_token_file); }},
        {"munge_socket", [&] { return yaml_string(c.munge_socket); }},
        {"agent_uid",
         [&] { return c.agent_uid ? std::to_string(*c.agent_uid) : std::string("null"); }},
        {"node_timeout_s", [&] { return yaml_number(c.node_timeout_s); }},
        {"agent_connections", [&] { return std::to_string(c.agent_connections); }},
        {"agent_connections_per_node",
         [&] { return std::to_string(c.agent_connections_per_node); }},
        {"agent_head_timeout_s", [&] { return std::to_string(c.agent_head_timeout_s); }},
        {"agent_request_timeout_s", [&] { return std::to_string(c.agent_request_timeout_s); }},
        {"limits", [] { return std::string(); }},
        {"limits.max_waiting_per_user",
         [&] { return std::to_string(c.limits.max_waiting_per_user); }},
        {"limits.max_array_size", [&] { return std::to_string(c.limits.max_array_size); }},
        {"limits.max_submit_bytes_per_task",
         [&] { return std::to_string(c.limits.max_submit_bytes_per_task); }},
        {"limits.max_submit_bytes_per_request",
         [&] { return std::to_string(c.limits.max_submit_bytes_per_request); }},
        {"limits.submit_rate_per_user",
         [&] { return yaml_number(c.limits.submit_rate_per_user); }},
        {"limits.submit_burst_per_user",
         [&] { return yaml_number(c.limits.submit_burst_per_user); }},
        {"limits.max_gpus_per_user",
         [&] { return std::to_string(c.limits.max_gpus_per_user); }},
        {"limits.max_running_per_user",
         [&] { return std::to_string(c.limits.max_running_per_user); }},
        {"fair_share", [&] { return std::string(c.fair_share ? "true" : "false"); }},
        {"fairshare_half_life", [&] { return format_duration(c.fairshare_half_life_s); }},
        {"fairshare_horizon", [&] { return format_duration(c.fairshare_horizon_s); }},
        {"preemption", [&] { return std::string(c.preemption.enabled ? "true" : "false"); }},
        {"preempt_min_run", [&] { return format_duration(c.preemption.min_run_s); }},
        {"preempt_margin", [&] { return yaml_number(c.preemption.margin); }},
        {"preempt_max_stops", [&] { return std::to_string(c.preemption.max_stops_per_user); }},
        {"preempt_stops_window", [&] { return format_duration(c.preemption.stops_window_s); }},
        {"groups_refresh", [&] { return format_duration(c.groups_refresh_s); }},
        {"shares", [&] { return yaml_shares(c.shares); }},
        {"priority_weight_fairshare", [&] { return yaml_number(c.priority_weight_fairshare); }},
        {"priority_weight_age", [&] { return yaml_number(c.priority_weight_age); }},
    };
    if (auto host = host_yaml_value(c.host, key)) {
        return *host;
    }
    const auto it = values.find(key);
    if (it == values.end()) {
        throw std::logic_error(fmt::format("config_yaml: no value for key '{}'", key));
    }
    return it->second();
}

// Comment lines of at most 80 columns after `indent`.
std::string comment_lines(const std::string& text, const std::string& indent) {
    std::string out;
    std::string line;
    std::istringstream words(text);
    for (std::string word; words >> word;) {
        if (!line.empty() && indent.size() + 2 + line.size() + 1 + word.size() > 80) {
            out += indent + "# " + line + "\n";
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    return line.empty() ? out : out + indent + "# " + line + "\n";
}

}  // namespace

std::string config_value(const DaemonConfig& c, std::string_view key) {
    return yaml_value(c, key);
}

std::string config_yaml(const DaemonConfig& c) {
    std::string out;
    for (const ConfigKey& k : config_keys()) {
        const std::string_view key = k.key;
        const auto dot = key.find('.');
        const std::string indent = dot == std::string_view::npos ? "" : "  ";
        const std::string_view name = dot == std::string_view::npos ? key : key.substr(dot + 1);
        const std::string value = yaml_value(c, key);
        if (indent.empty()) {
            out += "\n";
        }
        out += comment_lines(k.help, indent);
        out += fmt::format("{}{}:{}\n", indent, name, value.empty() ? "" : " " + value);
    }
    return out;
}


}  // namespace carma::daemon
