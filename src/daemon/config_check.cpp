#include "daemon/config_check.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <sstream>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace carma::daemon {

namespace {

// Keys whose values are easy to get wrong, with what they take in words.
const std::map<std::string, std::string, std::less<>>& key_expectations() {
    static const std::map<std::string, std::string, std::less<>> words = {
        {"time_scale", "a number above 0 and at most 10000, such as 1 or 60"},
        {"window", "a whole number of samples from 1 to 3600, such as 30"},
        {"max_attempts", "a whole number from 1 to 100, such as 3"},
        {"warmup_s", "a number of seconds from 0 up, such as 30"},
        {"kill_grace_s", "a number of seconds from 0 up, such as 10"},
        {"retention_days", "a number of days from 0 (keep everything) to 36500, such as 30"},
        {"node_timeout_s", "a number of seconds from 1 to 86400, such as 30"},
        {"world_bias", "a number, such as 0 or 0.1"},
        {"world_noise", "a number from 0 up, such as 0 or 0.05"},
        {"preempt_margin", "a number from 0 to 1000 (GPUs per share), such as 0 or 0.5"},
        {"preempt_max_stops", "a whole number from 1 to 10000, such as 4"},
        {"priority_weight_fairshare", "a number from 0 to 1e9, such as 10000"},
        {"priority_weight_age", "a number from 0 to 1e9, such as 1000"},
        {"agent_uid", "a uid (a whole number from 0 up) or null"},
        {"agent_connections", "a whole number from 1 to 4096, such as 256"},
        {"agent_connections_per_node", "a whole number from 1 up, such as 4"},
        {"agent_head_timeout_s", "a whole number of seconds from 1 to 60, such as 5"},
        {"agent_request_timeout_s", "a whole number of seconds up to 600, such as 15"},
    };
    return words;
}

template <typename T>
std::string kind_of() {
    if constexpr (std::is_same_v<T, bool>) {
        return "true or false";
    } else if constexpr (std::is_same_v<T, std::string>) {
        return "a single value (a string)";
    } else if constexpr (std::is_same_v<T, std::uint32_t>) {
        return "a whole number from 0 up";
    } else if constexpr (std::is_integral_v<T>) {
        return "a whole number";
    } else {
        return "a number";
    }
}

// The line of `text` numbered from 0, without its end.
std::string_view line_of(std::string_view text, int line) {
    std::size_t start = 0;
    for (int i = 0; i < line; ++i) {
        const std::size_t nl = text.find('\n', start);
        if (nl == std::string_view::npos) {
            return {};
        }
        start = nl + 1;
    }
    const std::size_t end = text.find('\n', start);
    return text.substr(start, end == std::string_view::npos ? text.size() - start : end - start);
}

bool user_exists(const std::string& name) {
    long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::string buf(size > 0 ? static_cast<std::size_t>(size) : 16384, '\0');
    passwd pw{};
    passwd* found = nullptr;
    while (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) == ERANGE) {
        buf.resize(buf.size() * 2);
    }
    return found != nullptr;
}

bool group_exists(const std::string& name) {
    long size = ::sysconf(_SC_GETGR_R_SIZE_MAX);
    std::string buf(size > 0 ? static_cast<std::size_t>(size) : 16384, '\0');
    group gr{};
    group* found = nullptr;
    while (::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) == ERANGE) {
        buf.resize(buf.size() * 2);
    }
    return found != nullptr;
}

}  // namespace

std::string found_text(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) {
        return "nothing";
    }
    if (node.IsMap()) {
        return "a mapping";
    }
    if (node.IsSequence()) {
        return "a list";
    }
    return "'" + node.Scalar() + "'";
}

std::string expected_text(const std::string& key, const std::string& fallback) {
    const auto it = key_expectations().find(key);
    return it != key_expectations().end() ? it->second : fallback;
}

Error value_error(const std::string& source, const YAML::Node& node, const std::string& key,
                  const std::string& expected) {
    return Error{ErrorCode::InvalidArgument,
                 fmt::format("{} line {}: {}: found {}, expected {}", source,
                             node.Mark().line + 1, key, found_text(node), expected)};
}

std::string explain_yaml_error(const std::string& text, const std::string& source, int line,
                               int column, const std::string& message) {
    const std::string_view where = line_of(text, line);
    if (column >= 0 && static_cast<std::size_t>(column) < where.size() &&
        (where[column] == '@' || where[column] == '`')) {
        // The token as written: up to what ends a plain key or value.
        const std::size_t end = where.find_first_of(":,}] \t#", column);
        const std::string token(where.substr(column, end == std::string_view::npos
                                                         ? std::string_view::npos
                                                         : end - column));
        const bool key = end != std::string_view::npos && where[end] == ':';
        return fmt::format("{} line {}: {} '{}' must be quoted in YAML (\"{}\"{}): YAML reserves "
                           "'{}' at the start of a plain {}",
                           source, line + 1, key ? "the key" : "the value", token, token,
                           key ? ": ..." : "", where[column], key ? "key" : "value");
    }
    return fmt::format("{} line {}: {}", source, line + 1, message);
}

template <typename T>
Result<T> config_scalar(const YAML::Node& node, const std::string& key,
                        const std::string& source) {
    try {
        return node.as<T>();
    } catch (const YAML::Exception&) {
    }
    return tl::unexpected(value_error(source, node, key, expected_text(key, kind_of<T>())));
}

template Result<bool> config_scalar<bool>(const YAML::Node&, const std::string&,
                                          const std::string&);
template Result<int> config_scalar<int>(const YAML::Node&, const std::string&,
                                        const std::string&);
template Result<std::uint32_t> config_scalar<std::uint32_t>(const YAML::Node&,
                                                            const std::string&,
                                                            const std::string&);
template Result<double> config_scalar<double>(const YAML::Node&, const std::string&,
                                              const std::string&);
template Result<std::string> config_scalar<std::string>(const YAML::Node&, const std::string&,
                                                        const std::string&);

std::vector<std::string> share_warnings(const std::map<std::string, double>& shares) {
    std::vector<std::string> out;
    for (const auto& [who, n] : shares) {
        if (who.starts_with("@")) {
            const std::string name = who.substr(1);
            if (!group_exists(name)) {
                out.push_back(fmt::format(
                    "shares: no group '{}' on this machine (getent group {} finds none); its {} "
                    "share(s) go to nobody until it exists: check the spelling",
                    name, name, n));
            }
        } else if (!user_exists(who)) {
            out.push_back(fmt::format(
                "shares: no user '{}' on this machine (getent passwd {} finds none); its {} "
                "share(s) apply once the account exists: check the spelling, or write a group "
                "as \"@{}\"",
                who, who, n, who));
        }
    }
    return out;
}

}  // namespace carma::daemon
