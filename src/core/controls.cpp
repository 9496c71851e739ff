#include "core/controls.h"

#include <cctype>
#include <charconv>
#include <stdexcept>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "core/text.h"
#include "core/time_text.h"

namespace carma {

namespace {

std::optional<long long> whole_number(std::string_view s) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) {
        return std::nullopt;
    }
    return v;
}

tl::unexpected<Error> bad_limit(std::string_view text, std::string_view why) {
    return fail(ErrorCode::InvalidArgument,
                fmt::format("time limit '{}' {}; write it like 45s, 90m, 2h, 1h30m, 2d, or as "
                            "sbatch does: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
                            text, why));
}

// sbatch's forms: "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS".
std::optional<double> clock_form(std::string_view s) {
    long long days = 0;
    const bool has_days = s.find('-') != std::string_view::npos;
    if (has_days) {
        const auto dash = s.find('-');
        const auto d = whole_number(s.substr(0, dash));
        if (!d) {
            return std::nullopt;
        }
        days = *d;
        s.remove_prefix(dash + 1);
    }
    const std::vector<std::string> parts = split_list(s, ':');
    if (parts.size() == 1 && has_days) {  // D-HH
        const auto hours = whole_number(parts.front());
        if (!hours || *hours >= 24) {
            return std::nullopt;
        }
        return static_cast<double>(days) * 86400 + static_cast<double>(*hours) * 3600;
    }
    if (parts.size() < 2 || parts.size() > 3) {
        return std::nullopt;
    }
    double total = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const auto v = whole_number(parts[i]);
        if (!v || (i > 0 && *v >= 60)) {
            return std::nullopt;
        }
        total = total * 60 + static_cast<double>(*v);
    }
    if (parts.size() == 2 && !has_days) {
        return total;  // MM:SS
    }
    if (parts.size() == 2) {
        total *= 60;  // D-HH:MM
    }
    return total + static_cast<double>(days) * 86400;
}

}  // namespace

std::string format_time_limit(double seconds) {
    return format_duration(static_cast<double>(static_cast<long long>(seconds + 0.5)));
}

Result<double> parse_time_limit(std::string_view text) {
    const std::string_view s = trim(text);
    if (s.empty()) {
        return bad_limit(text, "is empty");
    }
    double total = 0;
    if (const auto minutes = whole_number(s)) {
        // sbatch reads a bare number as minutes; people coming from Slurm type `-t 100`.
        total = static_cast<double>(*minutes) * 60;
    } else if (s.find(':') != std::string_view::npos || (s.find('-') != std::string_view::npos &&
                                                         s.front() != '-')) {
        const auto v = clock_form(s);
        if (!v) {
            return bad_limit(text, "is not a valid clock time");
        }
        total = *v;
    } else {
        // The unit forms are the durations people write everywhere (core/time_text.h).
        auto d = parse_duration(to_lower(s));  // sbatch users write 2H as often as 2h
        if (!d) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("time limit: {}; or as sbatch writes it: MINUTES, HH:MM:SS "
                                    "or D-HH:MM:SS",
                                    d.error().message));
        }
        total = *d;
    }
    if (total <= 0) {
        return bad_limit(text, "is zero");
    }
    if (total > kMaxTimeLimitS) {
        return bad_limit(text, "is longer than a year");
    }
    return total;
}

Result<std::vector<int>> parse_array_indices(std::string_view text) {
    auto spec = parse_array_spec(text);
    if (!spec) {
        return tl::unexpected(spec.error());
    }
    return std::move(spec->indices);
}

Result<ArraySpec> parse_array_spec(std::string_view text) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("array '{}' {}; write it like 0-9, 0-20:5 or 1,3,8-12, and "
                                "%N after it to run at most N at once (0-9%2)",
                                text, why));
    };
    ArraySpec out;
    std::set<int> indices;
    std::string_view s = trim(text);
    if (const auto percent = s.rfind('%'); percent != std::string_view::npos) {
        const std::string_view n = trim(s.substr(percent + 1));
        const auto limit = whole_number(n);
        if (!limit || *limit < 1 || *limit > static_cast<long long>(kMaxArrayMembers)) {
            return bad(fmt::format("has the throttle '%{}', which is not a whole number of "
                                   "members from 1 to {}",
                                   n, kMaxArrayMembers));
        }
        out.max_running = static_cast<int>(*limit);
        s = trim(s.substr(0, percent));
    }
    if (s.empty()) {
        return bad("is empty");
    }
    for (const std::string& piece : split_list(s, ',')) {
        std::string_view range = trim(piece);
        long long step = 1;
        if (const auto colon = range.find(':'); colon != std::string_view::npos) {
            const auto st = whole_number(range.substr(colon + 1));
            if (!st || *st < 1) {
                return bad(fmt::format("has a step '{}' that is not a whole number >= 1",
                                       range.substr(colon + 1)));
            }
            step = *st;
            range = range.substr(0, colon);
        }
        const auto dash = range.find('-');
        const auto first = whole_number(range.substr(0, dash));
        const auto last = dash == std::string_view::npos ? first
                                                         : whole_number(range.substr(dash + 1));
        if (!first || !last) {
            return bad(fmt::format("has '{}', which is not an index or a range of indices",
                                   piece));
        }
        if (*last < *first) {
            return bad(fmt::format("has the range '{}', which ends before it starts", piece));
        }
        if (*last > kMaxArrayIndex) {
            return bad(fmt::format("has an index above {}", kMaxArrayIndex));
        }
        for (long long i = *first; i <= *last; i += step) {
            indices.insert(static_cast<int>(i));
            if (indices.size() > kMaxArrayMembers) {
                return bad(fmt::format("has more than {} members", kMaxArrayMembers));
            }
        }
    }
    out.indices.assign(indices.begin(), indices.end());
    return out;
}

Result<double> parse_max_slowdown_value(std::string_view text) {
    const std::string t(trim(text));
    double value = 0;
    std::size_t used = 0;
    try {
        value = std::stod(t, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (t.empty() || used != t.size() || !(value >= 1) || value > 1000) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("max slowdown '{}' must be a number from 1 (no slowdown accepted) "
                                "to 1000, e.g. 1.3 for at most 30 % slower than alone",
                                text));
    }
    return value;
}

Result<int> parse_nice_value(std::string_view text) {
    const std::string t(trim(text));
    long long value = 0;
    std::size_t used = 0;
    try {
        value = std::stoll(t, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (t.empty() || used != t.size() || value < -kMaxNice || value > kMaxNice) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("nice '{}' must be a whole number from {} to {}; a positive one "
                                "lowers the task's priority",
                                text, -kMaxNice, kMaxNice));
    }
    return static_cast<int>(value);
}

}  // namespace carma
