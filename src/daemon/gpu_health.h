#pragma once
// When a GPU is unhealthy: a failed or stale read counts as missing, a few in a row make it
// unhealthy, and a good read makes it healthy again. Pure; the daemon acts on the changes
// (drops the GPU's window, records events, places nothing on it).

#include <optional>
#include <string>

#include "device/gpu_backend.h"

namespace carma::daemon {

// A GPU whose samples failed or were stale this many times in a row is unhealthy; a sample
// older than this many periods counts as missing (its free memory would mislead placement).
inline constexpr int kUnhealthyAfterMissing = 3;
inline constexpr double kStaleAfterPeriods = 3;

// Why the sample cannot be used (its error, or its age), or nothing when it is good. Periods are
// scaled by `time_scale`; a backend's age is in real seconds.
std::optional<std::string> sample_problem(const device::GpuSample& sample, double time_scale);

struct GpuHealth {
    int missing = 0;  // consecutive samples that failed or were stale
    bool unhealthy = false;
    std::string last_error;

    // A missing read; true when it is the one that makes the GPU unhealthy. A GPU CARMA leaves
    // alone (`excluded`) is counted but never becomes unhealthy.
    bool note_missing(const std::string& why, bool excluded);
    // A good read; true when the GPU was unhealthy until now.
    bool note_answered();
};

}  // namespace carma::daemon
