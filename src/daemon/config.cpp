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
        {"limits.max_gpus_per_user", "GPUs one user's running tasks may hold at once (Slurm's "
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
        {"shares", "Shares per user, or per Unix group as \"@group\" (its members split it), "
                   "e.g. {alice: 2, \"@phd\": 3}; every other user has 1."},
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

std::string default_state_dir() {
    // The directory of the default socket, so a daemon and its clients agree without flags.
    return std::filesystem::path(api::default_socket_path()).parent_path().string();
}

namespace {

template <typename T>
Result<T> scalar(const YAML::Node& node, const std::string& key, const std::string& source) {
    try {
        return node.as<T>();
    } catch (const YAML::Exception&) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: '{}' has the wrong type", source,
                                node.Mark().line + 1, key));
    }
}

// A span such as 10m or 7d, at most `max_s`: above 0, or also 0 where `zero_allowed`; `hint` says
// what to write instead.
Result<double> span_key(const YAML::Node& v, const std::string& key, const std::string& source,
                        bool zero_allowed, std::string_view hint,
                        double max_s = 365 * 24 * 3600.0) {
    auto written = scalar<std::string>(v, key, source);
    if (!written) {
        return tl::unexpected(written.error());
    }
    auto span = parse_duration(*written);
    if (!span || !(zero_allowed ? *span >= 0 : *span > 0) || *span > max_s) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: {} '{}' must be {}", source, v.Mark().line + 1, key,
                                *written, hint));
    }
    return *span;
}

// One string or a list of them; null or an empty list is none.
Result<void> string_list(const YAML::Node& v, const std::string& key, const std::string& source,
                         std::vector<std::string>& out) {
    out.clear();
    if (v.IsSequence()) {
        for (const auto& item : v) {
            auto one = scalar<std::string>(item, key, source);
            if (!one) {
                return tl::unexpected(one.error());
            }
            out.push_back(*one);
        }
    } else if (!v.IsNull()) {
        auto one = scalar<std::string>(v, key, source);
        if (!one) {
            return tl::unexpected(one.error());
        }
        out.push_back(*one);
    }
    return {};
}

// `shares:`: user or "@group" to a number of shares above 0.
Result<void> parse_shares(const YAML::Node& v, const std::string& source,
                          std::map<std::string, double>& out) {
    if (!v.IsMap()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: shares must map users (or \"@group\") to numbers, "
                                "e.g. {{alice: 2, \"@phd\": 3}}",
                                source, v.Mark().line + 1));
    }
    out.clear();
    for (const auto& kv : v) {
        const std::string who = kv.first.as<std::string>();
        auto d = scalar<double>(kv.second, "shares." + who, source);
        if (!d) {
            return tl::unexpected(d.error());
        }
        if (who.empty() || who == "@" || !(*d > 0) || *d > 1e6) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: shares of '{}' must be a user or \"@group\" "
                                    "with a number above 0",
                                    source, kv.first.Mark().line + 1, who));
        }
        out[who] = *d;
    }
    return {};
}

// The `limits:` section (core/user_limits.h): every key a number, 0 for no limit.
Result<void> parse_limits(const YAML::Node& v, const std::string& source, UserLimits& out) {
    if (!v.IsMap()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: limits must map limit names to numbers "
                                "(max_waiting_per_user, max_array_size, "
                                "max_submit_bytes_per_task, max_submit_bytes_per_request, "
                                "submit_rate_per_user, submit_burst_per_user, "
                                "max_gpus_per_user, max_running_per_user)",
                                source, v.Mark().line + 1));
    }
    for (const auto& kv : v) {
        const std::string name = kv.first.as<std::string>();
        const std::string key = "limits." + name;
        auto d = scalar<double>(kv.second, key, source);
        if (!d) {
            return tl::unexpected(d.error());
        }
        if (!(*d >= 0) || *d > 1e12) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: {} must be a number from 0 (no limit) up",
                                    source, kv.first.Mark().line + 1, key));
        }
        const auto count = static_cast<std::size_t>(*d);
        if (name == "max_waiting_per_user") {
            out.max_waiting_per_user = count;
        } else if (name == "max_array_size") {
            out.max_array_size = count;
        } else if (name == "max_submit_bytes_per_task") {
            out.max_submit_bytes_per_task = count;
        } else if (name == "max_submit_bytes_per_request") {
            out.max_submit_bytes_per_request = count;
        } else if (name == "submit_rate_per_user") {
            out.submit_rate_per_user = *d;
        } else if (name == "submit_burst_per_user") {
            out.submit_burst_per_user = *d;
        } else if (name == "max_gpus_per_user") {
            out.max_gpus_per_user = count;
        } else if (name == "max_running_per_user") {
            out.max_running_per_user = count;
        } else {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: unknown limit '{}'; known limits: "
                                    "max_waiting_per_user, max_array_size, "
                                    "max_submit_bytes_per_task, max_submit_bytes_per_request, "
                                    "submit_rate_per_user, submit_burst_per_user, "
                                    "max_gpus_per_user, max_running_per_user",
                                    source, kv.first.Mark().line + 1, name));
        }
    }
    return {};
}

}  // namespace

Result<DaemonConfig> parse_config(const std::string& text, const std::string& source,
                                  DaemonConfig c) {
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: {}", source, e.mark.line + 1, e.msg));
    }
    if (root.IsNull()) {
        return c;
    }
    if (!root.IsMap()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: the config must be a mapping of keys to values", source));
    }
    static const std::set<std::string> known = [] {
        std::set<std::string> top;
        for (const ConfigKey& k : config_keys()) {
            if (std::string_view(k.key).find('.') == std::string_view::npos) {
                top.insert(k.key);
            }
        }
        return top;
    }();
    for (const auto& kv : root) {
        const std::string key = kv.first.as<std::string>();
        const YAML::Node& v = kv.second;
        if (!known.contains(key)) {
            std::string list;
            for (const std::string& k : known) {
                list += (list.empty() ? "" : ", ") + k;
            }
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: unknown key '{}'; known keys: {}", source,
                                    kv.first.Mark().line + 1, key, list));
        }
        auto str = [&]() { return scalar<std::string>(v, key, source); };
        auto set_str = [&](std::string& out) -> Result<void> {
            auto s = str();
            if (!s) {
                return tl::unexpected(s.error());
            }
            out = *s;
            return {};
        };
        auto set_mem = [&](MiB& out) -> Result<void> {
            auto s = str();
            if (!s) {
                return tl::unexpected(s.error());
            }
            auto m = parse_memory(*s);
            if (!m) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{}: {}: {}", source, key, m.error().message));
            }
            out = *m;
            return {};
        };
        Result<void> r;
        if (key == "policy") {
            r = set_str(c.policy);
        } else if (key == "estimator") {
            r = set_str(c.estimator);
        } else if (key == "gpus") {
            r = set_str(c.gpus);
        } else if (key == "sharing") {
            r = set_str(c.sharing);
        } else if (key == "world") {
            r = set_str(c.world);
        } else if (key == "world_bias" || key == "world_noise") {
            auto d = scalar<double>(v, key, source);
            if (!d) {
                return tl::unexpected(d.error());
            }
            (key == "world_bias" ? c.world_bias : c.world_noise) = *d;
        } else if (key == "state_dir") {
            r = set_str(c.state_dir);
        } else if (key == "socket") {
            r = set_str(c.socket);
        } else if (key == "tcp") {
            r = set_str(c.tcp);
        } else if (key == "web") {
            r = set_str(c.web);
        } else if (key == "token_file") {
            r = set_str(c.token_file);
        } else if (key == "web_token_file") {
            r = set_str(c.web_token_file);
        } else if (key == "allowed_hosts") {
            r = string_list(v, key, source, c.allowed_hosts);
        } else if (key == "limits") {
            r = parse_limits(v, source, c.limits);
        } else if (key == "host") {
            r = parse_host_config(v, source, c.host);
        } else if (key == "fences") {
            r = parse_fences(v, source, c.host);
        } else if (key == "fair_share") {
            auto b = scalar<bool>(v, key, source);
            if (!b) {
                return tl::unexpected(b.error());
            }
            c.fair_share = *b;
        } else if (key == "fairshare_half_life" || key == "fairshare_horizon") {
            const bool horizon = key == "fairshare_horizon";
            auto span = horizon
                            ? span_key(v, key, source, true,
                                       "a span such as 1h or 30m, or 0s to order by usage alone")
                            : span_key(v, key, source, false, "a span above 0 such as 7d or 36h",
                                       std::numeric_limits<double>::infinity());
            if (!span) {
                return tl::unexpected(span.error());
            }
            (horizon ? c.fairshare_horizon_s : c.fairshare_half_life_s) = *span;
        } else if (key == "preemption") {
            auto b = scalar<bool>(v, key, source);
            if (!b) {
                return tl::unexpected(b.error());
            }
            c.preemption.enabled = *b;
        } else if (key == "preempt_min_run") {
            auto span = span_key(v, key, source, true, "a span such as 10m or 1h, or 0s");
            if (!span) {
                return tl::unexpected(span.error());
            }
            c.preemption.min_run_s = *span;
        } else if (key == "preempt_margin") {
            auto d = scalar<double>(v, key, source);
            if (!d) {
                return tl::unexpected(d.error());
            }
            if (!(*d >= 0) || *d > 1000) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{} line {}: preempt_margin must be a number from 0 to "
                                        "1000 (GPUs per share)",
                                        source, v.Mark().line + 1));
            }
            c.preemption.margin = *d;
        } else if (key == "shares") {
            r = parse_shares(v, source, c.shares);
        } else if (key == "priority_weight_fairshare" || key == "priority_weight_age") {
            auto d = scalar<double>(v, key, source);
            if (!d) {
                return tl::unexpected(d.error());
            }
            if (!(*d >= 0) || *d > 1e9) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{} line {}: {} must be a number from 0 to 1e9", source,
                                        v.Mark().line + 1, key));
            }
            (key == "priority_weight_fairshare" ? c.priority_weight_fairshare
                                                : c.priority_weight_age) = *d;
        } else if (key == "agents") {
            r = set_str(c.agents);
        } else if (key == "agent_token_file") {
            r = set_str(c.agent_token_file);
        } else if (key == "agent_auth") {
            r = set_str(c.agent_auth);
        } else if (key == "munge_socket") {
            r = set_str(c.munge_socket);
        } else if (key == "agent_uid" && v.IsNull()) {
            c.agent_uid.reset();  // null: the daemon's own uid
        } else if (key == "agent_uid") {
            auto n = scalar<std::uint32_t>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            c.agent_uid = *n;
        } else if (key == "tcp_run_as") {
            r = set_str(c.tcp_run_as);
        } else if (key == "shim_path") {
            r = set_str(c.shim_path);
        } else if (key == "sendmail") {
            r = set_str(c.sendmail);
        } else if (key == "dcgm_host") {
            r = set_str(c.dcgm_host);
        } else if (key == "mps_control") {
            r = set_str(c.mps_control);
        } else if (key == "exclude_gpus") {
            // One pattern or a list; an empty list leaves no GPU out.
            r = string_list(v, key, source, c.exclude_gpus);
        } else if (key == "mps") {
            auto b = scalar<bool>(v, key, source);
            if (!b) {
                return tl::unexpected(b.error());
            }
            c.mps = *b;
        } else if (key == "memory_margin") {
            r = set_mem(c.memory_margin_mib);
        } else if (key == "no_info_min_free") {
            r = set_mem(c.no_info_min_free_mib);
        } else if (key == "window") {
            auto n = scalar<int>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            c.window = static_cast<std::size_t>(std::max(*n, 0));
        } else if (key == "max_attempts") {
            auto n = scalar<int>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            c.max_attempts = *n;
        } else if (key == "retry_failures") {
            auto b = scalar<bool>(v, key, source);
            if (!b) {
                return tl::unexpected(b.error());
            }
            c.retry_failures = *b;
        } else if (key == "retention_days") {
            auto d = scalar<double>(v, key, source);
            if (!d) {
                return tl::unexpected(d.error());
            }
            c.retention_days = *d;
        } else if (key == "warmup_s" || key == "time_scale" || key == "kill_grace_s" ||
                   key == "node_timeout_s") {
            auto d = scalar<double>(v, key, source);
            if (!d) {
                return tl::unexpected(d.error());
            }
            (key == "warmup_s"         ? c.warmup_s
             : key == "time_scale"     ? c.time_scale
             : key == "node_timeout_s" ? c.node_timeout_s
                                       : c.kill_grace_s) = *d;
        } else if (key == "risk") {
            if (!v.IsMap()) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{}: risk must map smact/smocc/drama to thresholds",
                                        source));
            }
            for (const auto& t : v) {
                const std::string name = t.first.as<std::string>();
                auto d = scalar<double>(t.second, "risk." + name, source);
                if (!d) {
                    return tl::unexpected(d.error());
                }
                if (name == "smact") {
                    c.risk.smact = *d;
                } else if (name == "smocc") {
                    c.risk.smocc = *d;
                } else if (name == "drama") {
                    c.risk.drama = *d;
                } else {
                    return fail(ErrorCode::InvalidArgument,
                                fmt::format("{}: unknown risk threshold '{}'; use smact, smocc, "
                                            "drama",
                                            source, name));
                }
            }
        }
        if (!r) {
            return tl::unexpected(r.error());
        }
    }
    return c;
}

Result<DaemonConfig> load_config(const std::string& path, DaemonConfig base) {
    std::ifstream in(path);
    if (!in) {
        return fail(ErrorCode::Io, fmt::format("cannot read config file {}", path));
    }
    std::stringstream buf;
    buf << in.rdbuf();
    return parse_config(buf.str(), path, std::move(base));
}

Result<DaemonConfig> finalize(DaemonConfig c) {
    if (auto p = find_policy(c.policy); !p) {
        return tl::unexpected(p.error());
    }
    if (auto e = parse_estimator(c.estimator); !e) {
        return tl::unexpected(e.error());
    }
    if (c.window < 1 || c.window > 3600) {
        return fail(ErrorCode::InvalidArgument, "window must be 1..3600 samples");
    }
    if (c.max_attempts < 1 || c.max_attempts > 100) {
        return fail(ErrorCode::InvalidArgument, "max_attempts must be 1..100");
    }
    if (auto kind = model::parse_world_kind(c.world); !kind) {
        return fail(ErrorCode::InvalidArgument, fmt::format("world: {}", kind.error().message));
    } else if (auto w = model::checked(model::WorldConfig{*kind, c.world_bias, c.world_noise, 1});
               !w) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("world_bias/world_noise: {}", w.error().message));
    }
    if (!(c.time_scale > 0) || c.time_scale > 10000) {
        return fail(ErrorCode::InvalidArgument, "time_scale must be > 0 and <= 10000");
    }
    if (!(c.retention_days >= 0) || c.retention_days > 36500) {
        return fail(ErrorCode::InvalidArgument,
                    "retention_days must be 0 (keep everything) or a number of days up to 36500");
    }
    if (c.warmup_s < 0 || c.kill_grace_s < 0) {
        return fail(ErrorCode::InvalidArgument, "warmup_s and kill_grace_s must be >= 0");
    }
    if (!c.agent_auth.empty() && c.agent_auth != "token" && c.agent_auth != "munge") {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("agent_auth '{}' is not known: give token (HMAC keyed by "
                                "agent_token_file) or munge (the cluster's munged)",
                                c.agent_auth));
    }
    if (!c.agents.empty()) {
        const std::string mode =
            c.agent_auth.empty() ? (c.agent_token_file.empty() ? "" : "token") : c.agent_auth;
        if (mode.empty() || (mode == "token" && c.agent_token_file.empty())) {
            return fail(ErrorCode::InvalidArgument,
                        "agents need a way to prove who they are: agent_token_file "
                        "(--agent-token-file: a file of mode 600 with a token of at least 16 "
                        "characters) or agent_auth munge (--agent-auth munge, on a Slurm "
                        "cluster's munged)");
        }
        if (mode == "munge" && !c.agent_token_file.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        "agent_auth munge needs no agent_token_file; leave one of them out");
        }
        if (c.mps) {
            return fail(ErrorCode::InvalidArgument,
                        "mps is not available with agents yet: MPS runs per node, and the agents "
                        "do not start it; leave --mps out");
        }
    }
    if (!(c.node_timeout_s >= 1) || c.node_timeout_s > 86400) {
        return fail(ErrorCode::InvalidArgument,
                    "node_timeout_s must be 1..86400 seconds: how long an agent may be silent "
                    "before its node takes no new tasks");
    }
    if (c.limits.max_array_size > kMaxArrayMembers) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("limits.max_array_size {} is above what any array may hold ({} "
                                "members); give at most {}",
                                c.limits.max_array_size, kMaxArrayMembers, kMaxArrayMembers));
    }
    for (std::string& host : c.allowed_hosts) {
        host = to_lower(trim(host));
        const bool plain = !host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '.' || ch == '-' ||
                   ch == '_' || ch == ':';
        });
        if (!plain) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("allowed_hosts: '{}' is not a host name or address; list "
                                    "names without scheme, port or path (gpu-server, "
                                    "gpu-server.lab.example, 10.0.0.5)",
                                    host));
        }
    }
    if (auto h = check_host_config(c.host); !h) {
        return tl::unexpected(h.error());
    }
    if (c.state_dir.empty()) {
        c.state_dir = default_state_dir();
    }
    // Attempt directories are found again after a restart by the path the store recorded.
    c.state_dir = std::filesystem::absolute(c.state_dir).lexically_normal().string();
    if (c.state_dir.size() > 1 && c.state_dir.back() == '/') {
        c.state_dir.pop_back();
    }
    if (c.socket.empty()) {
        c.socket = c.state_dir + "/carma.sock";
    }
    return c;
}

device::BackendChoice backend_choice(const DaemonConfig& c) {
    return {.gpus = c.gpus, .dcgm_host = c.dcgm_host, .sharing = c.sharing, .world = c.world,
            .world_bias = c.world_bias, .world_noise = c.world_noise, .state_dir = c.state_dir};
}

}  // namespace carma::daemon
