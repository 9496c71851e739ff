#include "core/loop_lag.h"

#include <algorithm>
#include <cmath>

namespace carma {

LoopLag::LoopLag(double period_s, LoopLagConfig config)
    : period_s_(period_s > 0 && std::isfinite(period_s) ? period_s : 1.0), config_(config) {
    recent_.reserve(std::max<std::size_t>(config_.window, 1));
}

void LoopLag::record(double overrun_s) {
    const double spanned = std::isfinite(overrun_s) ? std::max(0.0, overrun_s) / period_s_ : 0;
    const bool is_late = spanned >= 0.5;
    ++periods_;
    late_ += is_late ? 1 : 0;
    worst_late_periods_ = std::max(worst_late_periods_, spanned);
    const std::size_t window = std::max<std::size_t>(config_.window, 1);
    if (recent_.size() < window) {
        recent_.push_back(is_late ? 1 : 0);
    } else {
        recent_late_ -= recent_[next_] != 0 ? 1 : 0;
        recent_[next_] = is_late ? 1 : 0;
        next_ = (next_ + 1) % window;
    }
    recent_late_ += is_late ? 1 : 0;
}

double LoopLag::recent_late_share() const {
    return recent_.empty() ? 0.0
                           : static_cast<double>(recent_late_) / static_cast<double>(recent_.size());
}

bool LoopLag::behind() const {
    return recent_.size() >= std::max<std::size_t>(config_.window, 1) &&
           recent_late_share() >= config_.behind_share;
}

}  // namespace carma
