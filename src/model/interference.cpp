#include "model/interference.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/constants.h"

namespace carma::model {

std::string_view to_string(SharingMode mode) {
    return mode == SharingMode::Mps ? "mps" : "timeslice";
}

Result<SharingMode> parse_sharing_mode(std::string_view text) {
    if (text == "mps") {
        return SharingMode::Mps;
    }
    if (text == "timeslice" || text == "time-slice" || text == "naive") {
        return SharingMode::Timeslice;
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("sharing mode '{}' is unknown; use mps or timeslice", text));
}

SlowdownParams slowdown_params(SharingMode mode) {
    if (mode == SharingMode::Mps) {
        return {kMpsCapacity, kMpsSharpness};
    }
    return {kTimesliceCapacity, kTimesliceSharpness};
}

double smooth_load(double x, const SlowdownParams& p) {
    return std::pow(1.0 + std::pow(std::max(0.0, x) / p.capacity, p.sharpness),
                    1.0 / p.sharpness);
}

double task_speed(double u_i, double summed_u, const SlowdownParams& p) {
    return smooth_load(u_i, p) / smooth_load(std::max(summed_u, u_i), p);
}

double demand_from_smact(double smact) {
    if (smact <= 0) {
        return 0;
    }
    return std::clamp(std::pow(smact / 0.905, 1.0 / 1.52), 0.0, 1.0);
}

SpeedPredictor speed_predictor(SharingMode mode) {
    const SlowdownParams p = slowdown_params(mode);
    return [p](std::span<const double> activities, std::span<double> speeds) {
        // task_speed(d_i, D) = f(d_i) / f(max(D, d_i)) with D >= d_i here: f(D) once.
        const std::size_t n = std::min(activities.size(), speeds.size());
        double total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            speeds[i] = demand_from_smact(activities[i]);
            total += speeds[i];
        }
        const double f_total = smooth_load(total, p);
        for (std::size_t i = 0; i < n; ++i) {
            speeds[i] = std::min(1.0, smooth_load(speeds[i], p) / f_total);
        }
    };
}

GpuActivity aggregate_activity(std::span<const Contribution> tasks) {
    GpuActivity a;
    double idle_drama = 1;
    double idle_util = 1;
    for (const Contribution& c : tasks) {
        a.active = true;
        a.smact += c.smact * c.speed;
        a.smocc += c.smocc * c.speed;
        idle_drama *= 1 - std::clamp(c.drama * c.speed, 0.0, 1.0);
        idle_util *= 1 - std::clamp(c.util, 0.0, 1.0);
    }
    a.smact = std::min(1.0, a.smact);
    a.smocc = std::min(1.0, a.smocc);
    a.drama = 1 - idle_drama;
    a.util = 1 - idle_util;
    return a;
}

double gpu_power_w(const GpuActivity& activity, const GpuType& type, double scale) {
    if (!activity.active) {
        return type.idle_power_w;
    }
    const double p = scale * (kPowerIntercept + kPowerPerSmact * activity.smact +
                              kPowerPerDrama * activity.drama);
    return std::min(type.max_power_w, std::max(type.idle_power_w, p));
}

}  // namespace carma::model
