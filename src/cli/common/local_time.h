#pragma once
// The reader's clock and time zone for the commands that show or take times (`carma queue`,
// `carma top`, `carma acct --since`, `carma report --since/--until`): the edge where
// core/time_text's pure parsing meets the system.

#include <chrono>
#include <ctime>
#include <optional>

#include "core/time_text.h"

namespace carma::cli {

// A zone-less civil time read in the local zone (core/time_text's LocalTimeFn).
inline std::optional<double> local_to_unix(const CivilTime& c) {
    std::tm tm{};
    tm.tm_year = c.year - 1900;
    tm.tm_mon = c.month - 1;
    tm.tm_mday = c.day;
    tm.tm_hour = c.hour;
    tm.tm_min = c.minute;
    tm.tm_sec = c.second;
    tm.tm_isdst = -1;  // whatever the zone says for that date
    const std::time_t t = std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1)) {
        return std::nullopt;
    }
    return static_cast<double>(t);
}

// Now, in unix seconds with the fraction: what the daemon stamps, so ages compare.
inline double now_epoch() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace carma::cli
