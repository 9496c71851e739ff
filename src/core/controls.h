#pragma once
// The words of the scheduling controls people type: time limits ("2h", "1:30:00") and array
// index sets ("0-9", "1,3,8-12:2"). Pure.

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma {

// The most members one `--array` may create: enough for any sweep, small enough that one
// submission cannot flood the store.
inline constexpr std::size_t kMaxArrayMembers = 10000;
inline constexpr int kMaxArrayIndex = 1'000'000;
// A year: beyond any training run, and far from overflowing anything that adds to it.
inline constexpr double kMaxTimeLimitS = 366.0 * 24 * 3600;

// Seconds from a duration ("45s", "90m", "2h", "1h30m", "2d": core/time_text.h) or sbatch's
// forms: "MINUTES" (a bare whole number is minutes, as sbatch reads it), "MM:SS", "HH:MM:SS",
// "D-HH", "D-HH:MM", "D-HH:MM:SS".
Result<double> parse_time_limit(std::string_view text);
// A time limit as parse_time_limit reads it, in its largest whole unit: "2h", "90m", "45s".
std::string format_time_limit(double seconds);

// "0-9" (both ends included), "0-20:5" (step), "1,3,8-12" (lists of those); ascending, no
// duplicates. A throttle "%N" at the end is allowed and left out (parse_array_spec reads it).
Result<std::vector<int>> parse_array_indices(std::string_view text);

// sbatch's --array in full: the indices and, after '%', how many members may run at once
// ("0-5%2"); max_running 0 = no bound.
struct ArraySpec {
    std::vector<int> indices;
    int max_running = 0;
};
Result<ArraySpec> parse_array_spec(std::string_view text);

// Slurm's bound on --nice, either way.
inline constexpr int kMaxNice = 2147483645 / 1000;
// --max-slowdown: a number from 1 (no slowdown accepted) to 1000, "1.3" = at most 30 % slower.
Result<double> parse_max_slowdown_value(std::string_view text);
// --nice: a whole number within kMaxNice either way; positive lowers the task's priority.
Result<int> parse_nice_value(std::string_view text);

}  // namespace carma
