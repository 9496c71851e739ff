#include "core/speed_correction.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace carma {

namespace {

long long activity_key(double activity) { return std::llround(activity * 1e6); }

constexpr std::array<const char*, 3> kLoads = {"light", "medium", "heavy"};

std::size_t load_of(double others_activity) {
    return others_activity < 0.3 ? 0 : others_activity < 0.7 ? 1 : 2;
}

}  // namespace

std::string sharing_class(std::string_view mode, double others_activity) {
    return fmt::format("{}/{}", mode, kLoads[load_of(others_activity)]);
}

std::optional<double> observed_factor(const SpeedObservation& o, const SpeedCorrectionConfig& c) {
    if (o.run_s <= 0 || o.solo_s <= 0 || o.shared_s < c.min_shared_fraction * o.run_s ||
        o.predicted_shared_progress_s <= 0) {
        return std::nullopt;
    }
    const double observed = o.solo_s - (o.run_s - o.shared_s);
    // Less progress than nothing: the solo figure does not fit this run (other input, other
    // arguments); slower than max_k says nothing either way.
    if (observed <= 0) {
        return std::nullopt;
    }
    return std::clamp(o.predicted_shared_progress_s / observed, c.min_k, c.max_k);
}

bool SpeedCorrection::observe(const SpeedObservation& o) {
    auto k = observed_factor(o, config_);
    if (!k) {
        return false;
    }
    add(o.family, o.sharing_class, *k);
    return true;
}

void SpeedCorrection::add(const std::string& family, const std::string& cls, double k) {
    auto& v = samples_[{family, cls}];
    Pool& own = own_[{family, cls}];
    Pool& in_class = by_class_[cls];
    auto account = [&](double l, int sign) {
        for (Pool* p : {&own, &in_class, &all_}) {
            p->sum += sign * l;
            p->n = sign > 0 ? p->n + 1 : p->n - 1;
        }
    };
    const double l = std::log(std::clamp(k, config_.min_k, config_.max_k));
    v.push_back(l);
    account(l, +1);
    while (v.size() > config_.max_samples) {
        account(v.front(), -1);
        v.erase(v.begin());
    }
    for (std::size_t load = 0; load < kLoads.size(); ++load) {
        unbound_k_[load] = factor("", fmt::format("{}/{}", mode_, kLoads[load])).k;
    }
    for (auto& [key, bound] : bound_) {
        refresh(key, bound.family);
    }
}

SpeedCorrection::Factor SpeedCorrection::factor(std::string_view family,
                                                std::string_view cls) const {
    const double prior = config_.prior_weight;
    auto shrunk = [prior](const Pool& p) {
        return std::exp(p.sum / (static_cast<double>(p.n) + prior));
    };
    if (!family.empty()) {
        auto own = own_.find({std::string(family), std::string(cls)});
        if (own != own_.end() && own->second.n >= config_.min_samples) {
            return {shrunk(own->second), own->second.n, "family"};
        }
    }
    auto in_class = by_class_.find(cls);
    if (in_class != by_class_.end() && in_class->second.n >= config_.min_samples) {
        return {shrunk(in_class->second), in_class->second.n, "class"};
    }
    if (all_.n >= config_.min_samples) {
        return {shrunk(all_), all_.n, "all"};
    }
    return {1.0, 0, "none"};
}

void SpeedCorrection::refresh(long long key, const std::string& family) {
    Bound& b = bound_[key];
    b.family = family;
    for (std::size_t load = 0; load < kLoads.size(); ++load) {
        b.k[load] = factor(family, fmt::format("{}/{}", mode_, kLoads[load])).k;
    }
}

void SpeedCorrection::bind(double activity, const std::string& family) {
    const long long key = activity_key(activity);
    auto it = bound_.find(key);
    if (it == bound_.end()) {
        refresh(key, family);
    } else if (!it->second.family.empty() && it->second.family != family) {
        refresh(key, "");
    }
}

std::vector<SpeedCorrection::Entry> SpeedCorrection::entries() const {
    std::vector<Entry> out;
    for (const auto& [key, logs] : samples_) {
        Entry e{key.first, key.second, {}};
        for (double l : logs) {
            e.k.push_back(std::exp(l));
        }
        out.push_back(std::move(e));
    }
    return out;
}

void SpeedCorrection::correct(std::span<const double> activities, std::span<double> speeds) const {
    const std::size_t n = std::min(activities.size(), speeds.size());
    if (n < 2 || samples_.empty()) {
        return;
    }
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        total += activities[i];
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t load = load_of(total - activities[i]);
        auto it = bound_.find(activity_key(activities[i]));
        const double k = it == bound_.end() ? unbound_k_[load] : it->second.k[load];
        speeds[i] = std::min(1.0, speeds[i] / k);
    }
}

SpeedPredictor corrected_predictor(SpeedPredictor raw,
                                   std::shared_ptr<const SpeedCorrection> correction) {
    if (!raw || !correction) {
        return raw;
    }
    return [raw = std::move(raw), correction = std::move(correction)](
               std::span<const double> activities, std::span<double> speeds) {
        raw(activities, speeds);
        correction->correct(activities, speeds);
    };
}

}  // namespace carma
