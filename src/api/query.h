#pragma once
// Query parameters of the HTTP API, checked at the boundary: a value that is not a whole number,
// is out of its range, or is not one of the words a parameter takes is refused with 400 naming
// the parameter, what it got and what it takes, rather than wrapped, clamped or ignored.
// Pure functions of the text (no httplib), so they are tested and fuzzed on their own.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma::api {

// `text` is the parameter's value, nullopt when it is absent (then `fallback` is the answer).
Result<std::int64_t> integer_param(std::string_view name, std::optional<std::string_view> text,
                                   std::int64_t min, std::int64_t max, std::int64_t fallback);

// One of `words`, or `fallback` when absent.
Result<std::string> word_param(std::string_view name, std::optional<std::string_view> text,
                               std::initializer_list<std::string_view> words,
                               std::string_view fallback);

// A yes/no switch: absent = no; "", "1", "true", "yes" = yes; "0", "false", "no" = no.
Result<bool> flag_param(std::string_view name, std::optional<std::string_view> text);

// A decimal number ("1764441600", "1764441600.25") within [min, max], or `fallback` when absent.
Result<double> number_param(std::string_view name, std::optional<std::string_view> text,
                            double min, double max, double fallback);

// Free text such as a user name: non-empty, at most `max_bytes`, no control characters; "" when
// absent.
Result<std::string> text_param(std::string_view name, std::optional<std::string_view> text,
                               std::size_t max_bytes);

// A comma-separated list of non-empty words ("failed,cancelled"); empty when absent. Which words
// mean something is the caller's business.
Result<std::vector<std::string>> list_param(std::string_view name,
                                            std::optional<std::string_view> text);

}  // namespace carma::api
