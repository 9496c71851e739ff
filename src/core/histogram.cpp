#include "core/histogram.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace carma {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), in_bucket_(bounds_.size(), 0) {}

void Histogram::observe(double value) {
    if (std::isnan(value)) {
        return;
    }
    value = std::max(0.0, value);
    const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    if (at != bounds_.end()) {
        ++in_bucket_[static_cast<std::size_t>(at - bounds_.begin())];
    }
    ++count_;
    sum_ += value;
}

std::vector<std::uint64_t> Histogram::cumulative() const {
    std::vector<std::uint64_t> out(in_bucket_.size());
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < in_bucket_.size(); ++i) {
        running += in_bucket_[i];
        out[i] = running;
    }
    return out;
}

std::vector<double> duration_buckets_s() {
    return {1, 10, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200};
}

}  // namespace carma
