#include "core/csv.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

std::vector<std::string> split(std::string_view line) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        std::size_t comma = line.find(',', start);
        if (comma == std::string_view::npos) {
            out.emplace_back(trim(line.substr(start)));
            break;
        }
        out.emplace_back(trim(line.substr(start, comma - start)));
        start = comma + 1;
    }
    return out;
}

}  // namespace

int CsvTable::column(std::string_view name) const {
    for (std::size_t i = 0; i < header.size(); ++i) {
        if (header[i] == name) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

Result<CsvTable> parse_csv(std::string_view text, std::string_view source) {
    CsvTable table;
    int line_no = 0;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t nl = text.find('\n', pos);
        std::string_view line =
            text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        ++line_no;
        pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
        const std::string trimmed(trim(line));
        if (trimmed.empty() || trimmed.front() == '#') {
            continue;
        }
        if (trimmed.find('"') != std::string::npos) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: quoted fields are not supported; remove the "
                                    "quotes and commas inside fields",
                                    source, line_no));
        }
        std::vector<std::string> fields = split(line);
        if (table.header.empty()) {
            table.header = std::move(fields);
            continue;
        }
        if (fields.size() != table.header.size()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: {} fields but the header has {}", source,
                                    line_no, fields.size(), table.header.size()));
        }
        table.rows.push_back(std::move(fields));
        table.line_numbers.push_back(line_no);
    }
    if (table.header.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} is empty; expected a header row and data rows", source));
    }
    return table;
}

Result<double> csv_number(const CsvTable& t, std::size_t row, int col, std::string_view source) {
    const std::string& field = t.rows[row][static_cast<std::size_t>(col)];
    double value = 0;
    auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec != std::errc() || ptr != field.data() + field.size() || !std::isfinite(value)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: column '{}' must be a number, got '{}'", source,
                                t.line_numbers[row], t.header[static_cast<std::size_t>(col)],
                                field));
    }
    return value;
}

}  // namespace carma
