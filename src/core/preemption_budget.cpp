#include "core/preemption_budget.h"

#include <algorithm>
#include <cmath>

namespace carma {

double lost_gpu_s(double charged_gpu_s, double run_s, double charge_rate) {
    const double charged = std::isfinite(charged_gpu_s) ? charged_gpu_s : 0.0;
    if (charged > 0) {
        return charged;
    }
    const double expected = run_s * charge_rate;
    return std::isfinite(expected) && expected > 0 ? expected : 0.0;
}

PreemptionBudget::PreemptionBudget(int max_stops, double window_s)
    : max_stops_(std::max(max_stops, 1)), window_s_(window_s > 0 ? window_s : 1) {}

void PreemptionBudget::reconfigure(int max_stops, double window_s) {
    max_stops_ = std::max(max_stops, 1);
    window_s_ = window_s > 0 ? window_s : 1;
}

int PreemptionBudget::stops_for(const std::string& user, double now) const {
    return static_cast<int>(std::count_if(recent_.begin(), recent_.end(), [&](const StopMade& s) {
        return s.user == user && s.at_s > now - window_s_ && s.at_s <= now;
    }));
}

bool PreemptionBudget::may_stop_for(const std::string& user, double now) const {
    return stops_for(user, now) < max_stops_;
}

void PreemptionBudget::record(const StopMade& stop) {
    remember(stop);
    owe(stop);
}

std::optional<StopMade> PreemptionBudget::head_forfeited(TaskId head) {
    const auto it = pending_.find(head);
    if (it == pending_.end()) {
        return std::nullopt;
    }
    StopMade stop = it->second;
    pending_.erase(it);
    return stop;
}

void PreemptionBudget::forget_before(double now) {
    std::erase_if(recent_, [&](const StopMade& s) { return s.at_s <= now - window_s_; });
}

}  // namespace carma
