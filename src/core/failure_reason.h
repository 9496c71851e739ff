#pragma once
// Why a task failed, in its own words: the last meaningful line of its stderr
// ("ModuleNotFoundError: No module named 'torch'", "python3: can't open file '/x/train.py':
// [Errno 2] No such file or directory"), so that `carma queue`, `show`, `acct`, `top` and the
// page say it where the exit code alone ("exit code 2") sent people to `carma logs`. Pure.

#include <cstddef>
#include <string>
#include <string_view>

namespace carma {

// The longest reason kept; the rest of the line is in `carma logs --stderr`.
inline constexpr std::size_t kMaxFailureReasonBytes = 200;

// The last line of `stderr_tail` that says something: not blank, not only punctuation or box
// drawing (`^^^^^`, `-----`), not a traceback's frame or header, and what a progress bar drew
// last on it (after its final '\r'). Trimmed, control characters dropped, cut at
// kMaxFailureReasonBytes on a UTF-8 boundary (with "..."); "" when there is none.
std::string last_meaningful_line(std::string_view stderr_tail);

// What a fenced task ran into at its fence, from its stderr: an open of a GPU device file it was
// not given (EPERM on /dev/nvidiaN), or a fork past its process limit (EAGAIN: "Resource
// temporarily unavailable" with fork, "can't start new thread"); "" when it names neither.
std::string fence_denial(std::string_view stderr_tail);

}  // namespace carma
