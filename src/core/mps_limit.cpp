#include "core/mps_limit.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

// --- the memory limit's value --------------------------------------------------------------------

bool is_ordinal(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "12000M", "12G", "512MB": MiB, or nothing.
std::optional<MiB> parse_amount(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    std::int64_t number = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
    if (digits == 0 || ec != std::errc() || ptr != text.data() + digits) {
        return std::nullopt;
    }
    const std::string unit = to_lower(trim(text.substr(digits)));
    std::int64_t scale = 0;
    if (unit == "m" || unit == "mb" || unit == "mib") {
        scale = 1;
    } else if (unit == "g" || unit == "gb" || unit == "gib") {
        scale = 1024;
    } else {
        return std::nullopt;
    }
    // Division, not multiplication: number * scale could overflow before the comparison.
    if (number > kMaxMemoryMib / scale) {
        return std::nullopt;
    }
    return number * scale;
}

tl::unexpected<Error> bad_mps_limit(std::string_view text, std::string_view why) {
    return fail(ErrorCode::InvalidArgument,
                fmt::format("{}='{}': {}; write DEVICE=AMOUNT entries separated by commas, DEVICE "
                            "a CUDA ordinal or GPU UUID and AMOUNT an integer with M or G "
                            "(e.g. 0=12000M,1=8G)",
                            kMpsMemLimitEnv, text, why));
}

}  // namespace

std::string format_pinned_mem_limit(std::span<const MpsMemLimit> limits) {
    std::string out;
    for (const MpsMemLimit& l : limits) {
        if (l.limit_mib <= 0) {
            continue;
        }
        out += fmt::format("{}{}={}M", out.empty() ? "" : ",", l.device, l.limit_mib);
    }
    return out;
}

Result<std::vector<MpsMemLimit>> parse_pinned_mem_limit(std::string_view text) {
    std::vector<MpsMemLimit> out;
    if (trim(text).empty()) {
        return bad_mps_limit(text, "names no device");
    }
    std::string_view rest = text;
    while (true) {
        const std::size_t comma = rest.find(',');
        const std::string_view entry = trim(rest.substr(0, comma));
        const std::size_t eq = entry.find('=');
        if (eq == std::string_view::npos) {
            return bad_mps_limit(text, fmt::format("'{}' has no '='", entry));
        }
        const std::string_view device = trim(entry.substr(0, eq));
        const std::string_view amount = trim(entry.substr(eq + 1));
        if (!is_ordinal(device) && !device.starts_with("GPU-") && !device.starts_with("MIG-")) {
            return bad_mps_limit(text,
                             fmt::format("'{}' is neither a CUDA ordinal nor a GPU UUID", device));
        }
        const auto mib = parse_amount(amount);
        if (!mib) {
            return bad_mps_limit(text, fmt::format("'{}' is not an amount like 12000M or 12G of at "
                                               "most 16 TiB",
                                               amount));
        }
        if (std::any_of(out.begin(), out.end(),
                        [&](const MpsMemLimit& l) { return l.device == device; })) {
            return bad_mps_limit(text, fmt::format("device '{}' is named twice", device));
        }
        out.push_back(MpsMemLimit{std::string(device), *mib});
        if (comma == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace carma
