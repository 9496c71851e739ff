#pragma once
// Cells of the CLI's text tables, shared so every table measures, cuts and spells times alike.

#include <cstddef>
#include <string>
#include <string_view>

namespace carma::cli {

// Columns are measured in code points so names with accents do not shift a table.
std::size_t display_width(std::string_view s);

// At most `width` code points, cut at a code point boundary and marked with "..."; unchanged
// when it fits or `width` is under 4 (no room for the mark).
std::string truncate(std::string_view s, std::size_t width);

// Compact like squeue's TIME: 45s, 3m05s, 1h02m, 2d03h; "-" for a nonsense value.
std::string format_duration(double seconds);

}  // namespace carma::cli
