#pragma once
// Points and spans of time as people write them on a command line (`carma acct --since`). Pure:
// the current time and the local time zone come in as arguments.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace carma {

// A span: a number and a unit, s, m, h, d or w ("90s", "15m", "2h", "1.5d", "1w"), or a sum of
// such terms ("1h30m"). Seconds. A bare number is refused: it could mean any unit.
Result<double> parse_duration(std::string_view text);

// A span as parse_duration reads it back, in the largest of d, h and m that divides it whole:
// "7d", "36h", "90m", "45s"; a fraction of a second is kept ("0.5s").
std::string format_duration(double seconds);

// A calendar date and time as written: zone-less (the reader's local time) or UTC (a trailing Z).
struct CivilTime {
    int year = 1970;
    int month = 1;  // 1..12
    int day = 1;    // 1..31
    int hour = 0;
    int minute = 0;
    int second = 0;
    bool utc = false;
};

// Unix time of a civil time read as UTC (proleptic Gregorian calendar).
double unix_from_utc(const CivilTime& t);

// Turns a zone-less civil time into unix time in the local zone; nullopt when it cannot.
using LocalTimeFn = std::function<std::optional<double>(const CivilTime&)>;

// A point in time, one of:
//   a unix time             "1764441600", "1764441600.5"
//   an ISO date or time     "2026-11-29", "2026-11-29T10:00", "2026-11-29 10:00:05", with a
//                           trailing "Z" for UTC, else in the local zone (`local`)
//   how long before `now`   "2h", "3d", "1h30m" (parse_duration)
Result<double> parse_time_point(std::string_view text, double now, const LocalTimeFn& local);

// The unit a set of durations is shown in, chosen by the largest of them so that a five-minute
// window reads "4.2 min", not "0.07 h": seconds below two minutes, minutes below two hours, hours
// above. One unit for a whole table or chart, so its figures stay comparable.
struct DurationUnit {
    std::string_view symbol = "h";    // "s", "min", "h"
    std::string_view word = "hours";  // "seconds", "minutes", "hours"
    double seconds = 3600;
};
DurationUnit duration_unit_for(double largest_s);

}  // namespace carma
