#include "model/interference.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

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

namespace {

// The predictor's pow() calls, remembered per thread: a task's demand and f(demand), which
// depend only on its learned activity, and f(summed demand) of a GPU's set of tasks. The `carma`
// policy asks about the same few activities and the same GPUs over and over (every waiting
// task of a command, on every GPU, at every decision), so nearly all are hits. A hit returns the
// very number the computation would, so predictions do not change by a bit. Direct-mapped: a
// collision only costs a recomputation.
struct DemandTerms {
    std::uint64_t activity = 0;  // bits
    SlowdownParams params;
    double demand = 0;
    double load = 0;
    bool used = false;
};

struct LoadTerm {
    std::uint64_t x = 0;  // bits
    SlowdownParams params;
    double load = 0;
    bool used = false;
};

std::size_t slot_of(std::uint64_t bits, unsigned slot_bits) {
    return static_cast<std::size_t>((bits * 0x9E3779B97F4A7C15ULL) >> (64 - slot_bits));
}

bool same_params(const SlowdownParams& a, const SlowdownParams& b) {
    return a.capacity == b.capacity && a.sharpness == b.sharpness;
}

const DemandTerms& demand_terms(double activity, const SlowdownParams& p) {
    thread_local std::array<DemandTerms, 256> table{};
    const auto bits = std::bit_cast<std::uint64_t>(activity);
    DemandTerms& t = table[slot_of(bits, 8)];
    if (!t.used || t.activity != bits || !same_params(t.params, p)) {
        t.used = true;
        t.activity = bits;
        t.params = p;
        t.demand = demand_from_smact(activity);
        t.load = smooth_load(t.demand, p);
    }
    return t;
}

double remembered_load(double x, const SlowdownParams& p) {
    thread_local std::array<LoadTerm, 512> table{};
    const auto bits = std::bit_cast<std::uint64_t>(x);
    LoadTerm& t = table[slot_of(bits, 9)];
    if (!t.used || t.x != bits || !same_params(t.params, p)) {
        t.used = true;
        t.x = bits;
        t.params = p;
        t.load = smooth_load(x, p);
    }
    return t.load;
}

}  // namespace

SpeedPredictor speed_predictor(SharingMode mode) {
    const SlowdownParams p = slowdown_params(mode);
    return [p](std::span<const double> activities, std::span<double> speeds) {
        // task_speed(d_i, D) = f(d_i) / f(max(D, d_i)) with D >= d_i here: f(D) once.
        const std::size_t n = std::min(activities.size(), speeds.size());
        double total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            total += demand_terms(activities[i], p).demand;
        }
        const double f_total = remembered_load(total, p);
        for (std::size_t i = 0; i < n; ++i) {
            speeds[i] = std::min(1.0, demand_terms(activities[i], p).load / f_total);
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
