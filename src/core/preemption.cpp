#include "core/preemption.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace carma {

void price_stops(std::vector<RunningAttempt>& running, const PreemptionAsk& head,
                 double head_factor, const UsageLedger& ledger, const ShareTable& shares,
                 double now, double horizon_s, const PriorityWeights& weights) {
    ChargeRates rates;
    for (const RunningAttempt& a : running) {
        rates[a.user] += a.charge_rate;
    }
    for (RunningAttempt& a : running) {
        if (!a.requeue || a.recovered || a.user == head.user) {
            continue;
        }
        ChargeRates without = rates;
        without[a.user] = std::max(0.0, without[a.user] - a.charge_rate);
        const std::map<std::string, double> factors =
            fair_share_factors(ledger, shares, now, without, horizon_s);
        const auto factor_of = [&](const std::string& user, double otherwise) {
            const auto f = factors.find(user);
            return f != factors.end() ? f->second : otherwise;
        };
        a.requeued_priority = task_priority(weights, factor_of(a.user, 1), false, a.nice);
        // The head keeps its age and nice: only its factor moves.
        a.head_priority_once_stopped =
            head.priority + weights.fair_share * (factor_of(head.user, head_factor) - head_factor);
    }
}

std::optional<TaskId> choose_preemption_victim(const PreemptionAsk& head,
                                               std::span<const RunningAttempt> running,
                                               const ShareTable& shares, double now,
                                               const PreemptionConfig& config,
                                               double default_shares) {
    if (!config.enabled) {
        return std::nullopt;
    }
    auto shares_of = [&](const std::string& user) {
        const auto it = shares.find(user);
        return it != shares.end() ? it->second : default_shares;
    };
    std::map<std::string, double> allocated;
    for (const RunningAttempt& a : running) {
        allocated[a.user] += a.charge_rate;
    }
    const double head_shares = shares_of(head.user);
    if (head_shares <= 0) {
        return std::nullopt;  // a user of no shares takes nothing from anyone
    }
    const double head_after = (allocated[head.user] + head.expected_rate) / head_shares;
    std::optional<TaskId> victim;
    // (victim user's allocation after the swap, start, id): the largest wins.
    std::tuple<double, double, TaskId> best{};
    for (const RunningAttempt& a : running) {
        if (!a.requeue || a.recovered || !a.makes_room || a.user == head.user ||
            now - a.started_s < config.min_run_s ||
            a.requeued_priority >= a.head_priority_once_stopped.value_or(head.priority)) {
            continue;
        }
        const double s = shares_of(a.user);
        // A user of no shares is allocated nothing: any attempt of theirs is over-served.
        const double victim_after =
            s > 0 ? (allocated[a.user] - a.charge_rate) / s : std::numeric_limits<double>::max();
        if (head_after + config.margin > victim_after) {
            continue;
        }
        const std::tuple<double, double, TaskId> key{victim_after, a.started_s, a.task};
        if (!victim || key > best) {
            victim = a.task;
            best = key;
        }
    }
    return victim;
}

std::optional<TaskId> choose_preemption(const PreemptionAsk& head,
                                        std::vector<RunningAttempt> running,
                                        const ShareTable& shares, double now,
                                        const PreemptionConfig& config,
                                        const std::function<bool(TaskId)>& head_starts_without,
                                        double default_shares) {
    for (std::size_t tries = 0; tries < running.size(); ++tries) {
        const auto victim =
            choose_preemption_victim(head, running, shares, now, config, default_shares);
        if (!victim || head_starts_without(*victim)) {
            return victim;
        }
        for (RunningAttempt& a : running) {
            a.makes_room = a.makes_room && a.task != *victim;
        }
    }
    return std::nullopt;
}

}  // namespace carma
