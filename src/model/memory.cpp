#include "model/memory.h"

#include <algorithm>
#include <vector>

namespace carma::model {

double memory_at(const ResidentMemory& r, double t) {
    if (t < r.active_at) {
        return 0;
    }
    const double base = static_cast<double>(std::min(r.context_mib, r.peak_mib));
    if (r.ramp_s <= 0 || t >= r.active_at + r.ramp_s) {
        return static_cast<double>(r.peak_mib);
    }
    const double frac = (t - r.active_at) / r.ramp_s;
    return base + (static_cast<double>(r.peak_mib) - base) * frac;
}

double total_memory_at(std::span<const ResidentMemory> residents, double t) {
    double sum = 0;
    for (const ResidentMemory& r : residents) {
        sum += memory_at(r, t);
    }
    return sum;
}

namespace {

// The task to blame at time t: among those ramping at t (or jumping exactly at t), the newest.
TaskId victim_at(std::span<const ResidentMemory> residents, double t) {
    const ResidentMemory* best = nullptr;
    for (const ResidentMemory& r : residents) {
        const bool growing = t >= r.active_at && t <= r.active_at + std::max(r.ramp_s, 0.0);
        if (!growing) {
            continue;
        }
        if (!best || r.active_at > best->active_at ||
            (r.active_at == best->active_at && r.order > best->order)) {
            best = &r;
        }
    }
    if (!best) {
        // Nothing grows at t (capacity was already exceeded); blame the newest task.
        for (const ResidentMemory& r : residents) {
            if (!best || r.order > best->order) {
                best = &r;
            }
        }
    }
    return best ? best->task : 0;
}

}  // namespace

std::optional<OomCrash> next_oom(std::span<const ResidentMemory> residents, MiB capacity,
                                 double from) {
    const auto cap = static_cast<double>(capacity);
    // Memory only grows between launches and exits, piecewise linearly with breakpoints at each
    // activation and each ramp end: check every segment's end, then solve inside the first one
    // that ends above capacity.
    std::vector<double> points = {from};
    for (const ResidentMemory& r : residents) {
        for (double p : {r.active_at, r.active_at + std::max(r.ramp_s, 0.0)}) {
            if (p > from) {
                points.push_back(p);
            }
        }
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());

    if (total_memory_at(residents, from) > cap) {
        return OomCrash{from, victim_at(residents, from)};
    }
    for (std::size_t i = 1; i < points.size(); ++i) {
        const double a = points[i - 1];
        const double b = points[i];
        // Jumps happen exactly at activations: the value at b includes a jump at b.
        const double at_b = total_memory_at(residents, b);
        if (at_b <= cap) {
            continue;
        }
        // Value just before b along the linear piece (without b's jumps).
        const double eps_left = total_memory_at(residents, b - 1e-9 * std::max(1.0, b));
        const double at_a = total_memory_at(residents, a);
        if (eps_left <= cap) {
            // The jump at b carries it over.
            return OomCrash{b, victim_at(residents, b)};
        }
        const double slope = (eps_left - at_a) / (b - a);
        const double t = slope > 0 ? a + (cap - at_a) / slope : a;
        const double crash_at = std::clamp(t, a, b);
        return OomCrash{crash_at, victim_at(residents, crash_at)};
    }
    return std::nullopt;
}

}  // namespace carma::model
