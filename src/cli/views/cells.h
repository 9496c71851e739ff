#pragma once
// Cells of the CLI's text tables, shared so every table measures, cuts and spells times alike.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/task_id.h"

namespace carma::cli {

// Seconds (~3,000 years): a time or span from the daemon beyond it is garbage, shown as "-".
inline constexpr double kLongestTime = 1e11;

// Columns are measured in code points so names with accents do not shift a table.
std::size_t display_width(std::string_view s);

// At most `width` code points, cut at a code point boundary and marked with "..."; unchanged
// when it fits or `width` is under 4 (no room for the mark).
std::string truncate(std::string_view s, std::size_t width);

// The array a task of the daemon's answers belongs to: its "array" {"id", "index"}; nothing for
// a lone task (or a field of another shape).
std::optional<ArrayMember> array_of_task(const nlohmann::json& task);

// A task's id as every view writes it (core/task_ref.h format_task_id): "12", or "138_2" for
// a member of array 138; `missing` without an id.
std::string task_id_text(const nlohmann::json& task, const std::string& missing = "?");

// Compact like squeue's TIME: 45s, 3m05s, 1h02m, 2d03h; "-" for a nonsense value.
std::string format_duration(double seconds);

}  // namespace carma::cli
