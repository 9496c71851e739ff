#include "core/time_text.h"

#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

bool is_decimal_digit(char c) { return c >= '0' && c <= '9'; }

// A non-negative decimal number at the start of `text` ("90", "1.5"); advances past it.
std::optional<double> take_number(std::string_view& text) {
    std::size_t n = 0;
    bool digits = false;
    while (n < text.size() && is_decimal_digit(text[n])) {
        ++n;
        digits = true;
    }
    if (n < text.size() && text[n] == '.') {
        ++n;
        while (n < text.size() && is_decimal_digit(text[n])) {
            ++n;
            digits = true;
        }
    }
    if (!digits) {
        return std::nullopt;
    }
    double value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + n, value);
    if (ec != std::errc() || ptr != text.data() + n || !std::isfinite(value)) {
        return std::nullopt;
    }
    text.remove_prefix(n);
    return value;
}

std::optional<double> unit_seconds(char unit) {
    switch (unit) {
        case 's': return 1.0;
        case 'm': return 60.0;
        case 'h': return 3600.0;
        case 'd': return 86400.0;
        case 'w': return 7 * 86400.0;
        default: return std::nullopt;
    }
}

// A fixed-width field of digits ("2026", "09"); advances past it.
std::optional<int> take_field(std::string_view& text, std::size_t width) {
    if (text.size() < width) {
        return std::nullopt;
    }
    int value = 0;
    for (std::size_t i = 0; i < width; ++i) {
        if (!is_decimal_digit(text[i])) {
            return std::nullopt;
        }
        value = value * 10 + (text[i] - '0');
    }
    text.remove_prefix(width);
    return value;
}

bool take_char(std::string_view& text, char c) {
    if (!text.empty() && text.front() == c) {
        text.remove_prefix(1);
        return true;
    }
    return false;
}

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// "YYYY-MM-DD" then optionally ("T" or " ") "HH:MM" [":SS"], then optionally "Z".
std::optional<CivilTime> parse_civil(std::string_view text) {
    CivilTime t;
    auto year = take_field(text, 4);
    if (!year || !take_char(text, '-')) {
        return std::nullopt;
    }
    auto month = take_field(text, 2);
    if (!month || !take_char(text, '-')) {
        return std::nullopt;
    }
    auto day = take_field(text, 2);
    if (!day) {
        return std::nullopt;
    }
    t.year = *year;
    t.month = *month;
    t.day = *day;
    if (take_char(text, 'T') || take_char(text, 't') || take_char(text, ' ')) {
        auto hour = take_field(text, 2);
        if (!hour || !take_char(text, ':')) {
            return std::nullopt;
        }
        auto minute = take_field(text, 2);
        if (!minute) {
            return std::nullopt;
        }
        t.hour = *hour;
        t.minute = *minute;
        if (take_char(text, ':')) {
            auto second = take_field(text, 2);
            if (!second) {
                return std::nullopt;
            }
            t.second = *second;
        }
    }
    t.utc = take_char(text, 'Z') || take_char(text, 'z');
    if (!text.empty() || t.month < 1 || t.month > 12 || t.day < 1 ||
        t.day > days_in_month(t.year, t.month) || t.hour > 23 || t.minute > 59 || t.second > 59) {
        return std::nullopt;
    }
    return t;
}

std::string time_point_hint() {
    return "give a unix time (1764441600), a date or date and time (2026-11-29, "
           "2026-11-29T10:00, 2026-11-29T10:00:00Z for UTC) or how long ago (90m, 2h, 3d)";
}

}  // namespace

Result<double> parse_duration(std::string_view text) {
    const std::string shown(trim(text));
    std::string_view rest = trim(text);
    if (rest.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "an empty duration; give a number and a unit: 90s, 15m, 2h, 3d, 1w or 1h30m");
    }
    double total = 0;
    while (!rest.empty()) {
        auto number = take_number(rest);
        if (!number) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' is not a duration; give a number and a unit: 90s, 15m, "
                                    "2h, 3d, 1w or 1h30m",
                                    shown));
        }
        const std::optional<double> unit = rest.empty() ? std::nullopt : unit_seconds(rest[0]);
        if (!unit) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' needs a unit after {} (s, m, h, d or w), e.g. 90s, 2h, "
                                    "3d",
                                    shown, *number));
        }
        rest.remove_prefix(1);
        total += *number * *unit;
    }
    return total;
}

std::string format_duration(double seconds) {
    if (seconds != 0 && seconds == std::floor(seconds) && std::abs(seconds) < 1e15) {
        const auto whole = static_cast<long long>(seconds);
        for (const auto& [unit, size] : {std::pair{'d', 86400LL}, {'h', 3600LL}, {'m', 60LL}}) {
            if (whole % size == 0) {
                return fmt::format("{}{}", whole / size, unit);
            }
        }
    }
    return fmt::format("{}s", seconds);
}

double unix_from_utc(const CivilTime& t) {
    // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    const int y = t.year - (t.month <= 2 ? 1 : 0);
    const int era = (y >= 0 ? y : y - 399) / 400;
    const int yoe = y - era * 400;
    const int mp = (t.month + 9) % 12;
    const int doy = (153 * mp + 2) / 5 + t.day - 1;
    const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    const long long days = static_cast<long long>(era) * 146097 + doe - 719468;
    return static_cast<double>(days * 86400 + t.hour * 3600 + t.minute * 60 + t.second);
}

Result<double> parse_time_point(std::string_view text, double now, const LocalTimeFn& local) {
    const std::string_view trimmed = trim(text);
    if (trimmed.empty()) {
        return fail(ErrorCode::InvalidArgument, "an empty time; " + time_point_hint());
    }
    // Bare digits (with a fraction): a unix time.
    std::string_view rest = trimmed;
    if (auto number = take_number(rest); number && rest.empty()) {
        return *number;
    }
    if (trimmed.size() >= 5 && is_decimal_digit(trimmed[0]) && trimmed[4] == '-') {
        const std::optional<CivilTime> civil = parse_civil(trimmed);
        if (!civil) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' is not a date or time: write 2026-11-29, "
                                    "2026-11-29T10:00 or 2026-11-29T10:00:05 (a trailing Z for "
                                    "UTC), with a month of 01-12 and a day that month has",
                                    trimmed));
        }
        if (civil->utc) {
            return unix_from_utc(*civil);
        }
        std::optional<double> at = local ? local(*civil) : std::nullopt;
        if (!at) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' cannot be read in the local time zone; add a Z to "
                                    "give it in UTC",
                                    trimmed));
        }
        return *at;
    }
    auto ago = parse_duration(trimmed);
    if (!ago) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("'{}' is not a time; {}", trimmed, time_point_hint()));
    }
    return now - *ago;
}

DurationUnit duration_unit_for(double largest_s) {
    constexpr double kSecondsUpTo = 120;
    constexpr double kMinutesUpTo = 2 * 3600;
    if (!(largest_s >= kSecondsUpTo)) {  // NaN too: nothing to measure reads best in seconds
        return {"s", "seconds", 1};
    }
    if (largest_s < kMinutesUpTo) {
        return {"min", "minutes", 60};
    }
    return {"h", "hours", 3600};
}

}  // namespace carma
