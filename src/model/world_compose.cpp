#include "model/world_compose.h"

#include <algorithm>
#include <array>
#include <limits>

namespace carma::model {

namespace {

enum class Resource { SmActivity, SmOccupancy, DramBandwidth };
constexpr std::array<Resource, 3> kResources = {Resource::SmActivity, Resource::SmOccupancy,
                                                Resource::DramBandwidth};

// A task's solo demand of a resource, a fraction of the GPU. A task with no activity profile
// (a hand-made or class-only task) still occupies the SMs as much as it keeps the GPU busy.
double demand(const WorldTask& t, Resource r) {
    const bool profiled = t.smact > 0 || t.smocc > 0 || t.drama > 0;
    double d = 0;
    switch (r) {
        case Resource::SmActivity:
            d = profiled ? t.smact : t.util;
            break;
        case Resource::SmOccupancy:
            d = t.smocc;
            break;
        case Resource::DramBandwidth:
            d = t.drama;
            break;
    }
    return d > 0 ? std::min(d, 1.0) : 0.0;  // a NaN demands nothing
}

// The max-min fair level lambda of a resource: sum_i min(d_i, lambda) = 1; infinity when the
// demands fit (load <= 1). Raising lambda from the equal share 1/k: the tasks below it keep their
// demand, the rest split what is left; each round caps at least one more task or stops, so at
// most k rounds.
double fair_level(std::span<const WorldTask> tasks, Resource r) {
    double load = 0;
    for (const WorldTask& t : tasks) {
        load += demand(t, r);
    }
    if (load <= 1.0) {
        return std::numeric_limits<double>::infinity();
    }
    double level = 1.0 / static_cast<double>(tasks.size());
    for (std::size_t round = 0; round < tasks.size(); ++round) {
        double kept = 0;
        std::size_t capped = 0;
        for (const WorldTask& t : tasks) {
            const double d = demand(t, r);
            if (d <= level) {
                kept += d;
            } else {
                ++capped;
            }
        }
        if (capped == 0) {
            break;  // only by rounding: the load is above 1, so someone is capped
        }
        const double next = (1.0 - kept) / static_cast<double>(capped);
        if (next <= level) {
            break;
        }
        level = next;
    }
    return level;
}

}  // namespace

void bottleneck_speeds(std::span<const WorldTask> tasks, std::span<double> out) {
    std::array<double, kResources.size()> level{};
    for (std::size_t r = 0; r < kResources.size(); ++r) {
        level[r] = fair_level(tasks, kResources[r]);
    }
    const std::size_t n = std::min(tasks.size(), out.size());
    for (std::size_t i = 0; i < n; ++i) {
        double speed = 1.0;
        for (std::size_t r = 0; r < kResources.size(); ++r) {
            const double d = demand(tasks[i], kResources[r]);
            if (d > 0) {
                speed = std::min(speed, level[r] / d);
            }
        }
        out[i] = std::clamp(speed, 0.05, 1.0);
    }
}

}  // namespace carma::model
