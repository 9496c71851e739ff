#include "core/units.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "core/text.h"

namespace carma {

Result<MiB> parse_memory(std::string_view text) {
    std::string_view rest = text;
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
        rest.remove_prefix(1);
    }
    double value = 0;
    const char* begin = rest.data();
    const char* end = rest.data() + rest.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr == begin) {
        return fail(ErrorCode::InvalidArgument,
                    "memory '" + std::string(text) +
                        "' does not start with a number; write e.g. 12GiB or 12000MiB");
    }
    std::string unit = to_lower(std::string_view(ptr, static_cast<size_t>(end - ptr)));
    while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) {
        unit.erase(unit.begin());
    }
    while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) {
        unit.pop_back();
    }
    double factor = 0;
    if (unit.empty() || unit == "mib" || unit == "m" || unit == "mi") {
        factor = 1;
    } else if (unit == "gib" || unit == "g" || unit == "gi") {
        factor = 1024;
    } else if (unit == "gb") {
        factor = 1000;  // the paper's tables: "GB" = MiB / 1000
    } else if (unit == "mb") {
        factor = 1;
    } else if (unit == "tib") {
        factor = 1024.0 * 1024.0;
    } else {
        return fail(ErrorCode::InvalidArgument,
                    "memory '" + std::string(text) + "' has unknown unit '" + unit +
                        "'; use MiB, GiB or GB");
    }
    if (!std::isfinite(value) || value < 0) {
        return fail(ErrorCode::InvalidArgument,
                    "memory '" + std::string(text) + "' must be a non-negative amount");
    }
    const double mib = std::round(value * factor);
    if (mib > static_cast<double>(kMaxMemoryMib)) {
        return fail(ErrorCode::InvalidArgument,
                    "memory '" + std::string(text) +
                        "' is too large; memory per GPU must be at most 16 TiB");
    }
    return static_cast<MiB>(mib);
}

std::string format_mib(MiB mib) {
    std::string digits = std::to_string(mib < 0 ? -mib : mib);
    std::string out;
    int count = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (count > 0 && count % 3 == 0) {
            out.insert(out.begin(), ',');
        }
        out.insert(out.begin(), *it);
        ++count;
    }
    if (mib < 0) {
        out.insert(out.begin(), '-');
    }
    return out + " MiB";
}

}  // namespace carma
