#pragma once
// What a config file's mistakes are told as: every error names the key, its line, what was
// found and what is expected; and the warnings a config that parses still deserves (shares of
// users and groups this machine does not know).

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/result.h"

namespace carma::daemon {

// What a value of the node is, for "found ...": 'fast' for a scalar, else "a mapping", "a list"
// or "nothing".
std::string found_text(const YAML::Node& node);

// What `key` expects, for "expected ...": the key's own words (time_scale: "a number above 0
// and at most 10000, such as 1 or 60"), else `fallback`.
std::string expected_text(const std::string& key, const std::string& fallback);

// "SOURCE line N: KEY: found 'X', expected Y".
Error value_error(const std::string& source, const YAML::Node& node, const std::string& key,
                  const std::string& expected);

// A YAML syntax error at `mark` of `text` as a person can act on: an `@` or a backquote, which
// YAML reserves, starting a key or value gets "'@phd' must be quoted in YAML ("@phd")"; any
// other is passed on with its line.
std::string explain_yaml_error(const std::string& text, const std::string& source, int line,
                               int column, const std::string& message);

// The config's value of `key` as T, or value_error() with the key's expected words (T's kind
// when the key has none).
template <typename T>
Result<T> config_scalar(const YAML::Node& node, const std::string& key,
                        const std::string& source);

// Warnings for `shares:` entries this machine cannot resolve: a user with no account, an
// "@group" with no group. Not errors: accounts may come later (LDAP, useradd after the config).
std::vector<std::string> share_warnings(const std::map<std::string, double>& shares);

}  // namespace carma::daemon
