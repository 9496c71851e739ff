#pragma once
// A reader for the simple CSV files CARMA ships and accepts (traces, workload catalog): a header
// row, comma-separated fields, no quoting. Pure: it parses text handed to it.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma {

struct CsvTable {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    std::vector<int> line_numbers;  // 1-based source line of each row, for error messages

    // Index of a column, or -1.
    int column(std::string_view name) const;
};

// `source` names the text in error messages (a file name or "embedded trace t1").
Result<CsvTable> parse_csv(std::string_view text, std::string_view source);

// Field helpers with messages that name the source, line and column.
Result<double> csv_number(const CsvTable& t, std::size_t row, int col, std::string_view source);

}  // namespace carma
