// Preemption priced by user (core/preemption_budget.h; issue 44, break 3): the bait loop, in which
// a user with no GPU time submits a bait, waits for a stop, cancels the bait and repeats.

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/fair_share.h"
#include "core/preemption.h"
#include "core/preemption_budget.h"

namespace carma {
namespace {

// This test verifies the bait loop on core's rule: mallory (no usage) baits 20 times, a minute
// apart, against alice's --requeue attempt, which is started again after each stop and has run
// preempt_min_run each time; the rule alone would stop it every time. With the budget, mallory's
// stops within any hour are at most max_stops, each cancelled bait charges mallory what its stop
// lost, and her factor falls below alice's.
TEST(PreemptionBudgetTest, TheBaitLoopIsBoundedAndChargesTheBaiter) {
    PreemptionConfig config;
    config.enabled = true;
    config.min_run_s = 600;
    PreemptionBudget budget(3, 3600);
    UsageLedger ledger(7 * 24 * 3600.0);
    const ShareTable shares{{"alice", 1}, {"mallory", 1}};

    double victim_started = 0;
    double now = 600;
    int stops = 0;
    int rule_would_have = 0;
    double lost_total = 0;
    for (TaskId bait = 100; bait < 120; ++bait, now += 60) {
        const std::vector<RunningAttempt> running{
            RunningAttempt{1, "alice", victim_started, 1.0, true},
            RunningAttempt{2, "alice", 0, 1.0, false}};
        const auto victim = choose_preemption(PreemptionAsk{"mallory", 1.0}, running, shares, now,
                                              config, [](TaskId) { return true; });
        rule_would_have += victim.has_value() ? 1 : 0;
        if (!victim || !budget.may_stop_for("mallory", now)) {
            continue;  // the bait waits; mallory cancels it for the next one
        }
        const double lost = lost_gpu_s(0, now - victim_started, 1.0);
        budget.record(StopMade{now, "mallory", bait, *victim, "alice", lost});
        ++stops;
        // mallory cancels the bait before it starts: the stop was wasted.
        const auto owed = budget.head_forfeited(bait);
        ASSERT_TRUE(owed);
        EXPECT_DOUBLE_EQ(owed->lost_gpu_s, lost);
        ledger.add("mallory", owed->lost_gpu_s, now);
        lost_total += lost;
        victim_started = now;  // alice's task is queued again and starts again at once
        now += config.min_run_s;
    }
    EXPECT_EQ(rule_would_have, 20) << "the rule alone stops alice's task for every bait";
    EXPECT_LE(stops, 3 * 3) << "three stops per hour over less than three hours";
    EXPECT_LT(stops, rule_would_have);
    for (double t = 600; t <= now; t += 60) {
        EXPECT_LE(budget.stops_for("mallory", t), 3) << "at " << t;
    }
    EXPECT_GT(lost_total, 0);
    EXPECT_NEAR(ledger.usage("mallory", now), lost_total, lost_total * 0.01);
    // The charge makes the bait unprofitable: mallory now stands below alice, who was charged
    // only for her attempts' runs so far.
    ledger.add("alice", 600, now);
    const auto factors = fair_share_factors(ledger, shares, now);
    EXPECT_LT(factors.at("mallory"), factors.at("alice"));
}

// This test verifies the budget's bookkeeping: stops count per user within a sliding window, a
// head that starts owes nothing, a head forfeits its stop once, and forgetting old stops keeps
// what is owed.
TEST(PreemptionBudgetTest, CountsPerUserWithinTheWindow) {
    PreemptionBudget budget(2, 100);
    budget.record(StopMade{0, "bob", 1, 9, "alice", 50});
    budget.record(StopMade{10, "bob", 2, 9, "alice", 40});
    budget.record(StopMade{20, "carol", 3, 9, "alice", 30});
    EXPECT_TRUE(budget.made_room_for(1));
    EXPECT_EQ(budget.stops_for("bob", 20), 2);
    EXPECT_FALSE(budget.may_stop_for("bob", 20)) << "a new task is no new licence";
    EXPECT_TRUE(budget.may_stop_for("carol", 20));
    EXPECT_TRUE(budget.may_stop_for("bob", 100)) << "the first stop left the window";
    budget.head_started(1);
    EXPECT_FALSE(budget.made_room_for(1));
    EXPECT_FALSE(budget.head_forfeited(1)) << "a head that started owes nothing";
    EXPECT_EQ(budget.stops_for("bob", 20), 2) << "a stop that bought a start still counts";
    budget.forget_before(200);
    EXPECT_EQ(budget.remembered(), 0u);
    const auto owed = budget.head_forfeited(2);
    ASSERT_TRUE(owed) << "forgetting the window keeps what is owed";
    EXPECT_DOUBLE_EQ(owed->lost_gpu_s, 40);
    EXPECT_FALSE(budget.head_forfeited(2)) << "charged once";
    EXPECT_DOUBLE_EQ(lost_gpu_s(12, 100, 1), 12);
    EXPECT_DOUBLE_EQ(lost_gpu_s(0, 100, 0.5), 50) << "not charged yet: its run at its rate";
    EXPECT_DOUBLE_EQ(lost_gpu_s(0, -5, 1), 0);
}

}  // namespace
}  // namespace carma
