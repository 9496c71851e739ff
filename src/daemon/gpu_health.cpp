#include "daemon/gpu_health.h"

#include <fmt/format.h>

namespace carma::daemon {

std::optional<std::string> sample_problem(const device::GpuSample& sample, double time_scale) {
    if (!sample.error.empty()) {
        return sample.error;
    }
    if (sample.age_s * time_scale > kStaleAfterPeriods) {
        return fmt::format("its newest reading is {:.1f} s old", sample.age_s);
    }
    return std::nullopt;
}

bool GpuHealth::note_missing(const std::string& why, bool excluded) {
    missing += 1;
    last_error = why;
    if (unhealthy || missing < kUnhealthyAfterMissing || excluded) {
        return false;
    }
    unhealthy = true;
    return true;
}

bool GpuHealth::note_answered() {
    const bool was_unhealthy = unhealthy;
    missing = 0;
    unhealthy = false;
    last_error.clear();
    return was_unhealthy;
}

}  // namespace carma::daemon
