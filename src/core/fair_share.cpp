#include "core/fair_share.h"

#include <algorithm>
#include <cmath>

namespace carma {

double charge_fraction(double memory_share, double sm_share, double reserved_share) {
    const double share = std::max({memory_share, sm_share, reserved_share});
    return std::isnan(share) ? 0 : std::clamp(share, 0.0, 1.0);
}

double expected_charge_rate(const Learned& learned, MiB usable_mib, int gpus,
                            double reserved_share) {
    const double memory_share =
        learned.need_mib && usable_mib > 0
            ? static_cast<double>(*learned.need_mib) / static_cast<double>(usable_mib)
            : 1.0;
    return static_cast<double>(std::max(1, gpus)) *
           charge_fraction(memory_share, learned.activity.value_or(1.0), reserved_share);
}

double decay(double usage, double dt_s, double half_life_s) {
    if (dt_s <= 0 || !(half_life_s > 0) || std::isinf(half_life_s)) {
        return usage;
    }
    return usage * std::exp2(-dt_s / half_life_s);
}

UsageLedger::UsageLedger(double half_life_s, std::map<std::string, UsageEntry> entries)
    : half_life_s_(half_life_s), entries_(std::move(entries)) {}

void UsageLedger::add(const std::string& user, double gpu_s, double now) {
    UsageEntry& e = entries_[user];
    if (now > e.at_s) {
        e.gpu_s = decay(e.gpu_s, now - e.at_s, half_life_s_);
        e.at_s = now;
    }
    e.gpu_s += std::max(0.0, gpu_s);
}

double UsageLedger::usage(const std::string& user, double now) const {
    auto it = entries_.find(user);
    if (it == entries_.end()) {
        return 0;
    }
    return decay(it->second.gpu_s, now - it->second.at_s, half_life_s_);
}

double UsageLedger::total(double now) const {
    double sum = 0;
    for (const auto& [user, e] : entries_) {
        sum += decay(e.gpu_s, now - e.at_s, half_life_s_);
    }
    return sum;
}

ShareTable build_share_table(const std::map<std::string, double>& configured,
                             const std::map<std::string, std::vector<std::string>>& groups_of,
                             const std::set<std::string>& users, double default_shares) {
    auto own = [&](const std::string& user) { return configured.find(user); };
    auto groups = [&](const std::string& user) -> const std::vector<std::string>* {
        auto it = groups_of.find(user);
        return it == groups_of.end() ? nullptr : &it->second;
    };
    // Members of each configured group that take a part of it: known users without an entry
    // of their own.
    std::map<std::string, std::size_t> members;
    for (const std::string& user : users) {
        if (own(user) != configured.end()) {
            continue;
        }
        if (const auto* gs = groups(user)) {
            for (const std::string& g : std::set<std::string>(gs->begin(), gs->end())) {
                if (configured.contains("@" + g)) {
                    ++members["@" + g];
                }
            }
        }
    }
    ShareTable table;
    for (const std::string& user : users) {
        if (auto it = own(user); it != configured.end()) {
            table[user] = std::max(0.0, it->second);
            continue;
        }
        double shares = 0;
        bool in_group = false;
        if (const auto* gs = groups(user)) {
            for (const std::string& g : std::set<std::string>(gs->begin(), gs->end())) {
                auto it = configured.find("@" + g);
                if (it != configured.end()) {
                    in_group = true;
                    shares += std::max(0.0, it->second) / static_cast<double>(members["@" + g]);
                }
            }
        }
        table[user] = in_group ? shares : default_shares;
    }
    return table;
}

double fair_share_factor(double usage_norm, double shares_norm) {
    if (!(shares_norm > 0)) {
        return 0;
    }
    return std::exp2(-std::max(0.0, usage_norm) / shares_norm);
}

std::map<std::string, double> fair_share_factors(const UsageLedger& ledger,
                                                 const ShareTable& shares, double now,
                                                 const ChargeRates& running, double horizon_s) {
    double share_sum = 0;
    for (const auto& [user, s] : shares) {
        share_sum += s;
    }
    const double horizon = std::isfinite(horizon_s) ? std::max(0.0, horizon_s) : 0.0;
    const auto committed = [&](const std::string& user) {
        const auto r = running.find(user);
        return r != running.end() && r->second > 0 ? r->second * horizon : 0.0;
    };
    double total = ledger.total(now);
    for (const auto& [user, rate] : running) {
        total += committed(user);
    }
    std::map<std::string, double> out;
    for (const auto& [user, s] : shares) {
        const double u = total > 0 ? (ledger.usage(user, now) + committed(user)) / total : 0;
        out[user] = fair_share_factor(u, share_sum > 0 ? s / share_sum : 0);
    }
    return out;
}

double task_priority(const PriorityWeights& weights, double factor, bool overdue, int nice) {
    return weights.fair_share * factor + (overdue ? weights.age : 0) - static_cast<double>(nice);
}

}  // namespace carma
