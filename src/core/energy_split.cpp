#include "core/energy_split.h"

#include <algorithm>
#include <cmath>

namespace carma {

std::vector<double> split_gpu_energy(double energy_j,
                                     std::span<const std::optional<double>> activity,
                                     double unattributed_activity) {
    std::vector<double> shares(activity.size(), 0.0);
    if (activity.empty() || !std::isfinite(energy_j) || energy_j <= 0) {
        return shares;
    }
    bool all_known = true;
    double attributed = 0;
    for (const std::optional<double>& a : activity) {
        if (!a || !std::isfinite(*a)) {
            all_known = false;
            break;
        }
        attributed += std::clamp(*a, 0.0, 1.0);
    }
    const double others = std::isfinite(unattributed_activity)
                              ? std::max(0.0, unattributed_activity)
                              : 0.0;
    if (all_known && attributed + others > 0) {
        for (std::size_t i = 0; i < activity.size(); ++i) {
            shares[i] = energy_j * std::clamp(*activity[i], 0.0, 1.0) / (attributed + others);
        }
        return shares;
    }
    std::fill(shares.begin(), shares.end(), energy_j / static_cast<double>(activity.size()));
    return shares;
}

}  // namespace carma
