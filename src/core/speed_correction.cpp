#include "core/speed_correction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace carma {

namespace {

long long activity_key(double activity) { return std::llround(activity * 1e6); }

constexpr std::array<const char*, 3> kLoads = {"light", "medium", "heavy"};
constexpr std::array<const char*, 3> kCounts = {"2", "3", "4+"};

std::size_t load_of(double others_activity) {
    return others_activity < 0.3 ? 0 : others_activity < 0.7 ? 1 : 2;
}

std::size_t count_of(double tasks) {
    return tasks < 2.5 ? 0 : tasks < 3.5 ? 1 : 2;
}

// The index of a class in SpeedCorrection::classes_.
std::size_t class_of(double others_activity, double tasks) {
    return load_of(others_activity) * kCounts.size() + count_of(tasks);
}

std::string class_name(std::string_view mode, std::size_t load, std::size_t count) {
    return fmt::format("{}/{}/{}", mode, kLoads[load], kCounts[count]);
}

}  // namespace

std::string sharing_class(std::string_view mode, double others_activity, double tasks) {
    return class_name(mode, load_of(others_activity), count_of(tasks));
}

std::string_view sharing_load(std::string_view cls) {
    const std::size_t first = cls.find('/');
    if (first == std::string_view::npos) {
        return cls;
    }
    return cls.substr(0, cls.find('/', first + 1));
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

SpeedCorrection::SpeedCorrection(std::string mode, SpeedCorrectionConfig config)
    : mode_(std::move(mode)), config_(config) {
    for (std::size_t load = 0; load < kLoads.size(); ++load) {
        for (std::size_t count = 0; count < kCounts.size(); ++count) {
            classes_[load * kCounts.size() + count] = class_name(mode_, load, count);
        }
    }
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
    Pool& in_load = by_load_[std::string(sharing_load(cls))];
    auto account = [&](double l, int sign) {
        for (Pool* p : {&own, &in_class, &in_load, &all_}) {
            p->sum += sign * l;
            p->sum_sq += sign * l * l;
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
    // Everything's pool changed, so every fallback may have; of the families' own figures only
    // this family's in this class.
    for (std::size_t c = 0; c < kClasses; ++c) {
        const Factor f = factor("", classes_[c]);
        fallback_k_[c] = {f.k, f.cautious_k};
        if (!family.empty() && cls == classes_[c]) {
            own_k_[family_id(family)][c] =
                own.n >= config_.min_samples ? std::optional<Figure>(figure(own)) : std::nullopt;
        }
    }
    ++version_;
}

SpeedCorrection::Figure SpeedCorrection::figure(const Pool& p) const {
    const double n = static_cast<double>(p.n);
    const double log_k = p.sum / (n + config_.prior_weight);
    // The mean unshrunk (the prior's k = 1 is the optimistic side), plus its standard error (none
    // from one observation).
    const double mean = p.n > 0 ? p.sum / n : 0;
    const double variance = p.n > 1 ? std::max(0.0, (p.sum_sq - p.sum * mean) / (n - 1)) : 0;
    const double upper = mean + config_.cautious_z * std::sqrt(variance / std::max(n, 1.0));
    return {std::exp(log_k), std::exp(std::max(log_k, upper))};
}

SpeedCorrection::Factor SpeedCorrection::factor(std::string_view family,
                                                std::string_view cls) const {
    auto of = [this](const Pool& p, const char* basis) {
        const Figure f = figure(p);
        return Factor{f.k, f.cautious_k, p.n, basis};
    };
    if (!family.empty()) {
        auto own = own_.find({std::string(family), std::string(cls)});
        if (own != own_.end() && own->second.n >= config_.min_samples) {
            return of(own->second, "family");
        }
    }
    auto in_class = by_class_.find(cls);
    if (in_class != by_class_.end() && in_class->second.n >= config_.min_samples) {
        return of(in_class->second, "class");
    }
    auto in_load = by_load_.find(sharing_load(cls));
    if (in_load != by_load_.end() && in_load->second.n >= config_.min_samples) {
        return of(in_load->second, "load");
    }
    if (all_.n >= config_.min_samples) {
        return of(all_, "all");
    }
    return {1.0, 1.0, 0, "none"};
}

std::size_t SpeedCorrection::family_id(const std::string& family) {
    if (family.empty()) {
        return kNoFamily;
    }
    auto [it, added] = family_ids_.try_emplace(family, own_k_.size());
    if (added) {
        own_k_.emplace_back();
    }
    return it->second;
}

const SpeedCorrection::Figure& SpeedCorrection::bound_k(std::size_t family,
                                                        std::size_t cls) const {
    if (family != kNoFamily && own_k_[family][cls]) {
        return *own_k_[family][cls];
    }
    return fallback_k_[cls];
}

void SpeedCorrection::bind(double activity, const std::string& family) {
    const long long key = activity_key(activity);
    auto it = bound_.find(key);
    std::size_t before = kNoFamily;  // an unbound activity is corrected as one of no family
    if (it == bound_.end()) {
        it = bound_.emplace(key, family_id(family)).first;
    } else if (it->second != kNoFamily && it->second != family_id(family)) {
        before = it->second;
        it->second = kNoFamily;
    } else {
        return;
    }
    for (std::size_t c = 0; c < kClasses; ++c) {
        if (bound_k(before, c) != bound_k(it->second, c)) {
            ++version_;
            return;
        }
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
    apply<false>(activities, speeds);
}

void SpeedCorrection::correct_cautiously(std::span<const double> activities,
                                         std::span<double> speeds) const {
    apply<true>(activities, speeds);
}

template <bool kCautious>
void SpeedCorrection::apply(std::span<const double> activities, std::span<double> speeds) const {
    const std::size_t n = std::min(activities.size(), speeds.size());
    if (n < 2 || samples_.empty()) {
        return;
    }
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        total += activities[i];
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t cls = class_of(total - activities[i], static_cast<double>(n));
        auto it = bound_.find(activity_key(activities[i]));
        const Figure& f = bound_k(it == bound_.end() ? kNoFamily : it->second, cls);
        const double k = kCautious ? f.cautious_k : f.k;
        speeds[i] = std::min(1.0, speeds[i] / k);
    }
}

namespace {

// `raw`, then corrected by the mean factors or the cautious ones.
template <bool kCautious>
SpeedPredictor wrapped(SpeedPredictor raw, std::shared_ptr<const SpeedCorrection> correction) {
    if (!raw || !correction) {
        return raw;
    }
    return [raw = std::move(raw), correction = std::move(correction)](
               std::span<const double> activities, std::span<double> speeds) {
        raw(activities, speeds);
        if constexpr (kCautious) {
            correction->correct_cautiously(activities, speeds);
        } else {
            correction->correct(activities, speeds);
        }
    };
}

}  // namespace

SpeedPredictor corrected_predictor(SpeedPredictor raw,
                                   std::shared_ptr<const SpeedCorrection> correction) {
    return wrapped<false>(std::move(raw), std::move(correction));
}

SpeedPredictor cautious_predictor(SpeedPredictor raw,
                                  std::shared_ptr<const SpeedCorrection> correction) {
    return wrapped<true>(std::move(raw), std::move(correction));
}

PredictorVersion corrected_predictor_version(std::shared_ptr<const SpeedCorrection> correction) {
    if (!correction) {
        return [] { return std::uint64_t{0}; };
    }
    return [correction = std::move(correction)] { return correction->version(); };
}

void use_correction(PlacementConfig& placement, std::shared_ptr<const SpeedCorrection> correction) {
    placement.predict_cautious_speeds = cautious_predictor(placement.predict_speeds, correction);
    placement.predict_speeds = corrected_predictor(std::move(placement.predict_speeds), correction);
    placement.predictor_version = corrected_predictor_version(std::move(correction));
}

}  // namespace carma
