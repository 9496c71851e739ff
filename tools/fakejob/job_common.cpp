#include "job_common.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "model/constants.h"
#include "model/memory.h"

namespace carma::fakejob {

namespace {

constexpr double kReportEveryS = 2.0;  // wall seconds between progress lines

}  // namespace

double now_s() {
    timespec ts = {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

MiB ramp_memory(const model::WorkloadProfile& profile, double model_t) {
    model::ResidentMemory r;
    r.active_at = 0;
    r.context_mib = std::min(model::kContextMiB, profile.m_peak_mib);
    r.peak_mib = profile.m_peak_mib;
    r.ramp_s = model::kRampSeconds;
    return static_cast<MiB>(std::llround(model::memory_at(r, model_t)));
}

bool report_progress(double fraction, double speed, double now, double& last_report) {
    if (fraction >= 1.0) {
        fmt::print("progress 100% speed {:.2f}\ndone\n", speed);
        std::fflush(stdout);
        return true;
    }
    if (now - last_report >= kReportEveryS) {
        fmt::print("progress {:.0f}% speed {:.2f}\n", 100 * fraction, speed);
        std::fflush(stdout);
        last_report = now;
    }
    return false;
}

}  // namespace carma::fakejob
