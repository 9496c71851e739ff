#pragma once
// One depth limit for every JSON the daemon reads, and messages that never recurse into what
// they quote. nlohmann parses any depth without recursing, but dump(), copying and comparing a
// value recurse once per level of nesting: a request body nested 70,000 deep (140 KB) overflowed
// the daemon's stack from an error message that quoted it. No CARMA message nests deeper than a
// few levels, so text nested deeper than kMaxJsonDepth is refused before it is parsed, and a
// message describes an offending value with json_excerpt, which looks one level deep at most.
// Pure: no I/O.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace carma {

inline constexpr std::size_t kMaxJsonDepth = 64;  // nesting of arrays and objects

// The byte offset of the first '[' or '{' that nests deeper than `max_depth`, or nullopt. Brackets
// inside strings do not count; exact for valid JSON (other text the parser refuses anyway).
std::optional<std::size_t> json_too_deep_at(std::string_view text,
                                            std::size_t max_depth = kMaxJsonDepth);

// Why text nested past `max_depth` at byte `at` is refused, for `what` ("the request body").
std::string json_too_deep_message(std::string_view what, std::size_t max_depth, std::size_t at);

// `text` parsed, or InvalidArgument naming `what` ("the request body") and why: nested deeper
// than `max_depth` (at which byte), or the parser's message.
Result<nlohmann::json> parse_json_within(std::string_view text, std::string_view what,
                                         std::size_t max_depth = kMaxJsonDepth);

// A value as a message may quote it: a number, boolean or null as JSON, a string as JSON cut to
// `max_chars` (with "..."), an array or object only by its size ("an array of 3 items"). Never
// recurses, whatever the value's depth.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 60);

}  // namespace carma
