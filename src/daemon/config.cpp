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
#include "daemon/config_check.h"
#include "model/world.h"

namespace carma::daemon {

std::string default_state_dir() {
    // The directory of the default socket, so a daemon and its clients agree without flags.
    return std::filesystem::path(api::default_socket_path()).parent_path().string();
}

namespace {

template <typename T>
Result<T> scalar(const YAML::Node& node, const std::string& key, const std::string& source) {
    return config_scalar<T>(node, key, source);
}

// A number of `key` that `ok` accepts, else an error with what was found and the key's words.
template <typename T, typename Ok>
Result<T> number_key(const YAML::Node& v, const std::string& key, const std::string& source,
                     Ok ok) {
    auto n = scalar<T>(v, key, source);
    if (n && !ok(*n)) {
        return tl::unexpected(value_error(source, v, key, expected_text(key, "another number")));
    }
    return n;
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
                    fmt::format("{} line {}: {}: found '{}', expected {}", source,
                                v.Mark().line + 1, key, *written, hint));
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
        return tl::unexpected(value_error(source, v, "shares",
                                          "a mapping of users (or \"@group\") to numbers, e.g. "
                                          "{alice: 2, \"@phd\": 3}"));
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
        return tl::unexpected(value_error(
            source, v, "limits",
            "a mapping of limit names to numbers (max_waiting_per_user, max_array_size, "
            "max_submit_bytes_per_task, max_submit_bytes_per_request, submit_rate_per_user, "
            "submit_burst_per_user, max_gpus_per_user, max_running_per_user)"));
    }
    for (const auto& kv : v) {
        const std::string name = kv.first.as<std::string>();
        const std::string key = "limits." + name;
        auto d = scalar<double>(kv.second, key, source);
        if (!d) {
            return tl::unexpected(d.error());
        }
        if (!(*d >= 0) || *d > 1e12) {
            return tl::unexpected(
                value_error(source, kv.second, key, "a number from 0 (no limit) up"));
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
                    explain_yaml_error(text, source, e.mark.line, e.mark.column, e.msg));
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
                return tl::unexpected(
                    value_error(source, v, key, "an amount of memory such as 2GiB or 512MiB"));
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
        } else if (key == "preempt_max_stops") {
            auto n = scalar<int>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            if (*n < 1 || *n > 10000) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{} line {}: preempt_max_stops must be a whole number "
                                        "from 1 to 10000 (stops one user's waiting tasks may "
                                        "make per preempt_stops_window); `preemption: false` "
                                        "turns preemption off",
                                        source, v.Mark().line + 1));
            }
            c.preemption.max_stops_per_user = *n;
        } else if (key == "preempt_stops_window") {
            auto span = span_key(v, key, source, false, "a span above 0 such as 1h or 1d");
            if (!span) {
                return tl::unexpected(span.error());
            }
            c.preemption.stops_window_s = *span;
        } else if (key == "groups_refresh") {
            auto span = span_key(v, key, source, false, "a span above 0 such as 5m or 1h");
            if (!span) {
                return tl::unexpected(span.error());
            }
            c.groups_refresh_s = *span;
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
        } else if (key == "agent_connections" || key == "agent_connections_per_node") {
            auto n = scalar<std::uint32_t>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            (key == "agent_connections" ? c.agent_connections : c.agent_connections_per_node) =
                *n;
        } else if (key == "agent_head_timeout_s" || key == "agent_request_timeout_s") {
            auto n = scalar<int>(v, key, source);
            if (!n) {
                return tl::unexpected(n.error());
            }
            (key == "agent_head_timeout_s" ? c.agent_head_timeout_s
                                           : c.agent_request_timeout_s) = *n;
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
            auto n = number_key<int>(v, key, source, [](int x) { return x >= 1 && x <= 3600; });
            if (!n) {
                return tl::unexpected(n.error());
            }
            c.window = static_cast<std::size_t>(*n);
        } else if (key == "max_attempts") {
            auto n = number_key<int>(v, key, source, [](int x) { return x >= 1 && x <= 100; });
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
            auto d = number_key<double>(v, key, source,
                                        [](double x) { return x >= 0 && x <= 36500; });
            if (!d) {
                return tl::unexpected(d.error());
            }
            c.retention_days = *d;
        } else if (key == "warmup_s" || key == "time_scale" || key == "kill_grace_s" ||
                   key == "node_timeout_s") {
            auto d = number_key<double>(v, key, source, [&](double x) {
                return key == "time_scale"       ? x > 0 && x <= 10000
                       : key == "node_timeout_s" ? x >= 1 && x <= 86400
                                                 : x >= 0 && std::isfinite(x);
            });
            if (!d) {
                return tl::unexpected(d.error());
            }
            (key == "warmup_s"         ? c.warmup_s
             : key == "time_scale"     ? c.time_scale
             : key == "node_timeout_s" ? c.node_timeout_s
                                       : c.kill_grace_s) = *d;
        } else if (key == "risk") {
            if (!v.IsMap()) {
                return tl::unexpected(value_error(
                    source, v, key, "a mapping of smact, smocc and drama to thresholds, such as "
                                    "{smact: 0.8, smocc: 0.45, drama: 0.4}"));
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
                                fmt::format("{} line {}: unknown risk threshold '{}'; use smact, "
                                            "smocc, drama",
                                            source, t.first.Mark().line + 1, name));
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
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("window: found {}, expected {}", c.window,
                                expected_text("window", "")));
    }
    if (c.max_attempts < 1 || c.max_attempts > 100) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("max_attempts: found {}, expected {}", c.max_attempts,
                                expected_text("max_attempts", "")));
    }
    if (auto kind = model::parse_world_kind(c.world); !kind) {
        return fail(ErrorCode::InvalidArgument, fmt::format("world: {}", kind.error().message));
    } else if (auto w = model::checked(model::WorldConfig{*kind, c.world_bias, c.world_noise, 1});
               !w) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("world_bias/world_noise: {}", w.error().message));
    }
    if (!(c.time_scale > 0) || c.time_scale > 10000) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("time_scale: found {}, expected {}", c.time_scale,
                                expected_text("time_scale", "")));
    }
    if (!(c.retention_days >= 0) || c.retention_days > 36500) {
        return fail(ErrorCode::InvalidArgument,
                    "retention_days must be 0 (keep everything) or a number of days up to 36500");
    }
    if (c.warmup_s < 0 || c.kill_grace_s < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("warmup_s {} and kill_grace_s {}: expected seconds from 0 up",
                                c.warmup_s, c.kill_grace_s));
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
    if (c.agent_connections < 1 || c.agent_connections > 4096) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("agent_connections is {}; give 1..4096: the agents' connections "
                                "open at once, each with a thread (one per node is enough)",
                                c.agent_connections));
    }
    if (c.agent_connections_per_node < 1 ||
        c.agent_connections_per_node > c.agent_connections) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("agent_connections_per_node is {}; give 1..agent_connections "
                                "({}): an agent opens one connection per report",
                                c.agent_connections_per_node, c.agent_connections));
    }
    if (c.agent_head_timeout_s < 1 || c.agent_head_timeout_s > 60 ||
        c.agent_request_timeout_s < c.agent_head_timeout_s || c.agent_request_timeout_s > 600) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("agent_head_timeout_s {} and agent_request_timeout_s {}: give a "
                                "head deadline of 1..60 s and a request deadline from it to "
                                "600 s",
                                c.agent_head_timeout_s, c.agent_request_timeout_s));
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
