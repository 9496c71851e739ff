// Fair-share preemption (core/preemption.h): the rule that lets an under-served user's waiting
// head take the place of an over-served user's running attempt, and only until the two are even.

#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/preemption.h"

namespace carma {
namespace {

constexpr double kNow = 10000;

PreemptionConfig on() {
    PreemptionConfig c;
    c.enabled = true;
    c.min_run_s = 600;
    return c;
}

RunningAttempt attempt(TaskId id, const char* user, double started_s, double rate = 1,
                       bool requeue = true, bool makes_room = true) {
    return RunningAttempt{id, user, started_s, rate, requeue, makes_room};
}

// This test verifies the swap rule: bob holds three GPUs' worth and alice none, so her head
// (one GPU's worth) may take the place of bob's attempt started last; once she holds one and
// bob two, taking another would leave her above him, so nothing is stopped (no ping-pong).
TEST(PreemptionTest, StopsTheOverServedUntilEven) {
    const std::vector<RunningAttempt> three{attempt(1, "bob", 0), attempt(2, "bob", 500),
                                            attempt(3, "bob", 100)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, three, {}, kNow, on()), TaskId{2});
    const std::vector<RunningAttempt> after{attempt(1, "bob", 0), attempt(3, "bob", 100),
                                            attempt(4, "alice", kNow)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, after, {}, kNow, on()), std::nullopt);
    // Nor may bob take it back.
    EXPECT_EQ(choose_preemption_victim({"bob", 1}, after, {}, kNow, on()), std::nullopt);
}

// This test verifies what may never be stopped: an attempt that did not opt in, one younger
// than min_run_s, one whose end would not let the head start, one of the head's own user, an
// out-of-memory relaunch; and nothing at all while preemption is off.
TEST(PreemptionTest, OnlyOptedInAttemptsPastTheirMinimumRun) {
    const std::vector<RunningAttempt> young{attempt(1, "bob", kNow - 60), attempt(2, "bob", 0),
                                            attempt(3, "bob", 0, 1, false)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, young, {}, kNow, on()), TaskId{2});
    const std::vector<RunningAttempt> none{
        attempt(1, "bob", kNow - 60), attempt(3, "bob", 0, 1, false), attempt(4, "bob", kNow - 599),
        attempt(5, "bob", 0, 1, true, false)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, none, {}, kNow, on()), std::nullopt);
    const std::vector<RunningAttempt> own{attempt(1, "alice", 0), attempt(2, "alice", 0)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, own, {}, kNow, on()), std::nullopt);
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, young, {}, kNow, PreemptionConfig{}),
              std::nullopt);
    // bob holds three GPUs' worth, so the swap rule alone would let alice stop his relaunch.
    RunningAttempt relaunch = attempt(6, "bob", 0);
    const std::vector<RunningAttempt> with_relaunch{attempt(7, "bob", 0, 2, false), relaunch};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, with_relaunch, {}, kNow, on()), TaskId{6});
    relaunch.recovered = true;
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, std::vector{with_relaunch[0], relaunch}, {},
                                       kNow, on()),
              std::nullopt);
}

// This test verifies that shares weigh the allocations: bob holds three GPUs' worth; with two
// shares against alice's one he is left at (3 - 1) / 2 = 1, even with her 1 / 1 (allowed); with
// three shares at 2 / 3, below her, so he keeps it.
TEST(PreemptionTest, SharesWeighTheAllocations) {
    const std::vector<RunningAttempt> three{attempt(1, "bob", 0), attempt(2, "bob", 0),
                                            attempt(3, "bob", 0)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, three, {{"bob", 2}}, kNow, on()), TaskId{3});
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, three, {{"bob", 3}}, kNow, on()),
              std::nullopt);
    // A user of no shares takes nothing by preemption.
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, three, {{"alice", 0}}, kNow, on()),
              std::nullopt);
}

// This test verifies the choice among users and rates: the most over-served user gives way
// first, and a task that is charged a small fraction of a GPU frees little, so a head expected to
// take a whole GPU may not stop it when that would leave its user below the head's.
TEST(PreemptionTest, MostOverServedUserFirst) {
    const std::vector<RunningAttempt> two_users{attempt(1, "bob", 0),   attempt(2, "bob", 0),
                                                attempt(3, "carol", 0), attempt(4, "carol", 0),
                                                attempt(5, "carol", 0), attempt(6, "carol", 50)};
    EXPECT_EQ(choose_preemption_victim({"alice", 1}, two_users, {}, kNow, on()), TaskId{6});
    // dave holds 1.2 GPUs' worth in two attempts; stopping his 0.2 leaves him at 1.0, and
    // alice's head (0.5 expected) would bring her to 0.5: allowed. A head expected at 1.1 is not.
    const std::vector<RunningAttempt> fractions{attempt(7, "dave", 0, 1.0),
                                                attempt(8, "dave", 100, 0.2)};
    EXPECT_EQ(choose_preemption_victim({"alice", 0.5}, fractions, {}, kNow, on()), TaskId{8});
    EXPECT_EQ(choose_preemption_victim({"alice", 1.1}, fractions, {}, kNow, on()), std::nullopt);
}

// This test verifies that a task that would go before the head once queued again is never
// stopped: it would take its own place back. bob's attempt would wait at priority 6000 against
// alice's head at 5000; carol's at 4000 may give way.
TEST(PreemptionTest, NeverOneThatWouldGoFirst) {
    RunningAttempt bob = attempt(1, "bob", 0);
    bob.requeued_priority = 6000;
    RunningAttempt bob2 = attempt(2, "bob", 0);
    bob2.requeued_priority = 6000;
    RunningAttempt carol = attempt(3, "carol", 0);
    carol.requeued_priority = 4000;
    RunningAttempt carol2 = attempt(4, "carol", 0);
    carol2.requeued_priority = 4000;
    const std::vector<RunningAttempt> running{bob, bob2, carol, carol2};
    EXPECT_EQ(choose_preemption_victim({"alice", 1, 5000}, running, {}, kNow, on()), TaskId{4});
    EXPECT_EQ(choose_preemption_victim({"alice", 1, 3000}, running, {}, kNow, on()), std::nullopt);
}

// This test verifies that the order a stop is checked against is the one the round after it
// reads: the factor counts each user's running charge an hour ahead, so stopping one of bob's
// two 2-GPU attempts lifts his F and lowers alice's. alice (5.5 GPU-hours used) waits at F
// 0.515 against bob's 0.485 (2 GPU-hours used and 4 GPUs running), but once the attempt stopped
// bob's task would wait at F 0.558 against her 0.448, go first and take the GPUs back: nothing
// is stopped. With 20 GPU-hours used bob stays behind her, and his attempt is stopped.
TEST(PreemptionTest, PricedAsTheRoundAfterTheStopReadsThem) {
    const ShareTable shares{{"alice", 1}, {"bob", 1}};
    const PriorityWeights weights;
    const auto stop_for_alice = [&](double bob_used_h) {
        UsageLedger ledger;
        ledger.add("alice", 5.5 * 3600, kNow);
        ledger.add("bob", bob_used_h * 3600, kNow);
        std::vector<RunningAttempt> running{attempt(1, "bob", 0, 2), attempt(2, "bob", 0, 2)};
        const auto factors = fair_share_factors(ledger, shares, kNow, {{"bob", 4}}, 3600);
        for (RunningAttempt& a : running) {
            a.requeued_priority = task_priority(weights, factors.at("bob"), false, 0);
        }
        const PreemptionAsk head{"alice", 1, task_priority(weights, factors.at("alice"), false, 0)};
        const auto before = choose_preemption_victim(head, running, shares, kNow, on());
        price_stops(running, head, factors.at("alice"), ledger, shares, kNow, 3600, weights);
        return std::pair{before, choose_preemption_victim(head, running, shares, kNow, on())};
    };
    const auto [unpriced, priced] = stop_for_alice(2);
    EXPECT_EQ(unpriced, TaskId{2}) << "read before the stop, bob's task looked behind alice's";
    EXPECT_EQ(priced, std::nullopt);
    EXPECT_EQ(stop_for_alice(20).second, TaskId{2});
}

// This test verifies the search the simulator and the daemon share: the rule's choice is stopped
// only where the head would then start; where it would not, the rule's next choice is asked, and
// where none would let it start, nothing is stopped.
TEST(PreemptionTest, ChoosesOnlyWhereTheHeadWouldStart) {
    const std::vector<RunningAttempt> running{attempt(1, "bob", 0), attempt(2, "bob", 500),
                                              attempt(3, "bob", 100)};
    std::vector<TaskId> asked;
    const auto only = [&](TaskId yes) {
        return [&asked, yes](TaskId v) {
            asked.push_back(v);
            return v == yes;
        };
    };
    EXPECT_EQ(choose_preemption({"alice", 1}, running, {}, kNow, on(), only(2)), TaskId{2});
    EXPECT_EQ(asked, (std::vector<TaskId>{2}));
    asked.clear();
    EXPECT_EQ(choose_preemption({"alice", 1}, running, {}, kNow, on(), only(1)), TaskId{1});
    EXPECT_EQ(asked, (std::vector<TaskId>{2, 3, 1})) << "latest started first";
    asked.clear();
    EXPECT_EQ(choose_preemption({"alice", 1}, running, {}, kNow, on(), only(9)), std::nullopt);
    EXPECT_EQ(asked.size(), 3u);
    PreemptionConfig off = on();
    off.enabled = false;
    EXPECT_EQ(choose_preemption({"alice", 1}, running, {}, kNow, off, only(2)), std::nullopt);
}

}  // namespace
}  // namespace carma
