#pragma once
// A node's name, as agents give it and the hub, the logs' directories and `carma slurm status`
// use it: one rule, in one place. Names become path components (an attempt's remote logs are
// kept under its node's name), so "." and ".." are refused as well as anything outside
// [A-Za-z0-9._-]: a node named ".." had its logs land in the attempt's parent directory.
// Pure.

#include <cstddef>
#include <string_view>

namespace carma {

inline constexpr std::size_t kMaxNodeNameLength = 255;

// 1..255 characters of [A-Za-z0-9._-], and not "." or "..".
bool valid_node_name(std::string_view name);

}  // namespace carma
