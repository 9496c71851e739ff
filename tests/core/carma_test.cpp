#include "core/carma.h"

#include <gtest/gtest.h>

#include "builders.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;
using testing::simple_model;

SchedulerConfig carma_config(const char* name = "carma") {
    SchedulerConfig cfg;
    cfg.policy = *find_policy(name);
    cfg.placement.predict_speeds = simple_model;
    return cfg;
}

std::vector<int> placed_ids(const StepResult& r) {
    std::vector<int> ids;
    for (const Placement& p : r.placed) {
        ids.push_back(static_cast<int>(p.task));
    }
    return ids;
}

const Placement* placement_of(const StepResult& r, TaskId id) {
    for (const Placement& p : r.placed) {
        if (p.task == id) {
            return &p;
        }
    }
    return nullptr;
}

// This test verifies the names: `carma` and its ablations, each ingredient once.
TEST(CarmaTest, Names) {
    auto p = find_policy("CARMA");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->name, "carma");
    EXPECT_TRUE(p->carma && p->backfill && p->by_run_time() && p->collocate);
    EXPECT_EQ(p->order, RunTimeOrder::ShortestFirst);
    EXPECT_EQ(p->knowledge, MemoryKnowledge::Learned);
    EXPECT_EQ(p->score, Score::LeastSlowdown);
    EXPECT_FALSE(p->risk_filter);
    auto a = find_policy("carma-fifo-nobackfill-magm-risk");
    ASSERT_TRUE(a);
    EXPECT_FALSE(a->backfill || a->by_run_time());
    EXPECT_EQ(a->score, Score::MostAvailableMemory);
    EXPECT_TRUE(a->risk_filter);
    EXPECT_FALSE(find_policy("carma-fifo-fifo"));
    EXPECT_FALSE(find_policy("carma-bogus"));
    EXPECT_NE(find_policy("carma-bogus").error().message.find(
                  "carma[-nobackfill][-fifo|-longfirst]"),
              std::string::npos);
}

// This test verifies the placement score: of two shared GPUs with room, the newcomer goes where
// the predicted added slowdown is least, not where most memory is free.
//   GPU0: resident activity 0.9, 10,000 MiB held -> with a 0.5 newcomer: sum 1.4, both slow down
//   GPU1: resident activity 0.3, 20,000 MiB held -> sum 0.8, nobody slows down
TEST(CarmaTest, LeastPredictedSlowdown) {
    Scheduler s(carma_config());
    s.enqueue(1, MakeTask("new").Knows(4000, 600, 0.5), 0);
    std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 10000, 1000, 0.9),
                                 MakeGpu(1).Resident(11, 20000, 1000, 0.3)};
    StepResult r = s.step(gpus, 0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});
    EXPECT_FALSE(r.placed[0].exclusive);

    // The ablation that scores by memory picks GPU0, which has more available.
    Scheduler m(carma_config("carma-magm"));
    m.enqueue(1, MakeTask("new").Knows(4000, 600, 0.5), 0);
    EXPECT_EQ(m.step(gpus, 0).placed.at(0).gpus, std::vector<int>{0});
}

// This test verifies the gain rule: a GPU where the model predicts that a newcomer adds no
// progress in sum (the tasks only share the same saturated GPU) is not shared.
TEST(CarmaTest, NoSharingWithoutPredictedGain) {
    Scheduler s(carma_config());
    s.enqueue(1, MakeTask("heavy").Knows(4000, 600, 1.0), 0);
    // Under the simple model a GPU already at summed activity >= 1 gains nothing from another.
    std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 4000, 1000, 1.0)};
    StepResult r = s.step(gpus, 0);
    EXPECT_TRUE(r.placed.empty());
    EXPECT_NE(r.pending_reason.find("would add 0.00 GPU of progress"), std::string::npos)
        << r.pending_reason;
}

// This test verifies the memory ledger: a GPU counts what its residents' learned needs will
// reach, even while the measured free memory still shows room (a resident still ramping up), and
// a resident of unknown need fills its GPU.
TEST(CarmaTest, MemoryLedger) {
    Scheduler s(carma_config());
    s.enqueue(1, MakeTask("t").Knows(10000, 600, 0.2), 0);
    GpuView ramping = MakeGpu(0).Resident(10, 30000, 1000, 0.2);
    ramping.stats.available_mib = 39000;  // measured: the resident holds 1 GiB so far
    GpuView unknown = MakeGpu(1).Resident(11, std::nullopt, 1000, 0.2);
    unknown.stats.available_mib = 39000;
    StepResult r = s.step(std::vector<GpuView>{ramping, unknown}, 0);
    EXPECT_TRUE(r.placed.empty());
    // 39,929 - 30,000 = 9,929 < 12,048 on GPU0; nothing on GPU1.
    EXPECT_NE(r.pending_reason.find("GPU 0: 9,929 MiB available < 12,048 MiB"),
              std::string::npos)
        << r.pending_reason;
    EXPECT_NE(r.pending_reason.find("GPU 1: 0 MiB available"), std::string::npos)
        << r.pending_reason;
}

// This test verifies the rule for a task whose memory need is unknown: never beside others
// (it could crash them), only on an idle GPU; where per-task memory limits protect co-runners,
// beside others with the no-information floor free.
TEST(CarmaTest, UnknownNeedOnlyWhereItCannotCrashOthers) {
    std::vector<GpuView> shared = {MakeGpu(0).Resident(10, 2000, 1000, 0.2)};
    {
        Scheduler s(carma_config());
        s.enqueue(1, MakeTask("mystery").Knows(std::nullopt, std::nullopt, 0.2), 0);
        StepResult r = s.step(shared, 0);
        EXPECT_TRUE(r.placed.empty());
        EXPECT_NE(r.pending_reason.find("memory need unknown"), std::string::npos);
        std::vector<GpuView> idle = {shared[0], MakeGpu(1)};
        r = s.step(idle, 1);
        ASSERT_EQ(r.placed.size(), 1u);
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});
        EXPECT_TRUE(r.placed[0].exclusive);
    }
    {
        SchedulerConfig cfg = carma_config();
        cfg.placement.memory_limits = true;
        Scheduler s(cfg);
        s.enqueue(1, MakeTask("mystery").Knows(std::nullopt, std::nullopt, 0.2), 0);
        StepResult r = s.step(shared, 0);
        ASSERT_EQ(r.placed.size(), 1u);
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0});
    }
}

// The backfilling scene: the head needs 30,000 MiB (+2,048 margin = 32,048 available). GPU0's
// resident (20,000 MiB) is expected to end at t=100, after which the head fits there: the head's
// predicted start is 100 on GPU0 (its shadow). GPU1 holds 30,000 MiB until t=1000, 9,929 left.
std::vector<GpuView> backfill_scene() {
    return {MakeGpu(0).Resident(10, 20000, 100, 0.3), MakeGpu(1).Resident(11, 30000, 1000, 0.3)};
}

// This test verifies that backfilling never delays the head's predicted start: a task that
// ends before it may use the head's GPU, one that would run past it may not (unless it leaves
// the head room), one with no run-time estimate may not, and one that would slow the head's
// blocker past the start may not; the head's plan is the same after the backfilled placement.
TEST(CarmaTest, BackfillNeverDelaysTheHead) {
    const std::vector<GpuView> gpus = backfill_scene();
    const TaskSpec head = MakeTask("head").Knows(30000, 3600, 0.3);
    const CarmaNeed head_need = carma_need(head, false, PlacementConfig{});
    const std::vector<char> open = {1, 1};
    const HeadPlan plan = plan_head(head, head_need, gpus, open, 0, 30);
    EXPECT_DOUBLE_EQ(plan.start, 100);
    EXPECT_EQ(plan.shadow, (std::vector<char>{1, 0}));

    const SpeedPredictor model = simple_model;
    // Ends at 50 (speed 1: summed activity 0.6), 12,048 fits beside the resident: allowed.
    EXPECT_TRUE(may_pass_head(MakeTask("short").Knows(10000, 50, 0.3), gpus[0], plan, head_need,
                              0, model));
    // Ends at 500: after the start, and 39,929 - 12,048 < 32,048 leaves no room for the head.
    EXPECT_FALSE(may_pass_head(MakeTask("long").Knows(10000, 500, 0.3), gpus[0], plan, head_need,
                               0, model));
    // No estimate: cannot be shown to end in time.
    EXPECT_FALSE(may_pass_head(MakeTask("unknown").Knows(10000, std::nullopt, 0.3), gpus[0], plan,
                               head_need, 0, model));
    // Short, but its 0.9 activity slows the resident (sum 1.2 -> speed 0.83) for its 60 s: the
    // resident's end moves to 100 + 60 x 0.2 = 112 > 100.
    EXPECT_FALSE(may_pass_head(MakeTask("noisy").Knows(1000, 50, 0.9), gpus[0], plan, head_need,
                               0, model));
    // Long but small: 39,929 - 3,048 leaves the head its 32,048 whatever runs until the start.
    EXPECT_TRUE(may_pass_head(MakeTask("small").Knows(1000, 5000, 0.3), gpus[0], plan, head_need,
                              0, model));

    // Through the scheduler, longest first so that the head leads: the long task waits with a
    // reason, the short one backfills on GPU0; the head's predicted start is unchanged by it.
    Scheduler s(carma_config("carma-longfirst"));
    s.enqueue(1, head, 0);
    s.enqueue(2, MakeTask("long").Knows(10000, 500, 0.3), 0);
    s.enqueue(3, MakeTask("short").Knows(10000, 50, 0.3), 0);
    StepResult r = s.step(gpus, 0);
    EXPECT_EQ(placed_ids(r), std::vector<int>{3});
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0});
    EXPECT_EQ(r.pending_task, 1);
    ASSERT_EQ(r.waiting.size(), 2u);
    EXPECT_EQ(r.waiting[0].task, 1);
    EXPECT_EQ(r.waiting[1].task, 2);
    EXPECT_NE(r.waiting[1].reason.find("behind head (predicted start of head in 2 min)"),
              std::string::npos)
        << r.waiting[1].reason;
    EXPECT_NE(r.waiting[1].reason.find("GPU 0: kept for a task ahead in the queue"),
              std::string::npos)
        << r.waiting[1].reason;

    std::vector<GpuView> after = gpus;
    after[0].residents.push_back(ResidentView{3, 0.3, 10000, 50});
    EXPECT_DOUBLE_EQ(plan_head(head, head_need, after, open, 0, 30).start, plan.start);
}

// This test verifies that tasks without a run-time estimate still backfill on GPUs outside the
// head's shadow, where they cannot delay it. (The head leads by having waited max_wait_s: an
// unknown run time goes first otherwise.)
TEST(CarmaTest, UnknownRunTimeBackfillsOutsideTheShadow) {
    SchedulerConfig cfg = carma_config();
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("head").Knows(30000, 3600, 0.3), -cfg.carma.max_wait_s);
    // 6,000 + 2,048: fits GPU1 (9,929 available); on GPU0 it would leave the head too little
    // (39,929 - 8,048 < 32,048) for an unknown time.
    s.enqueue(2, MakeTask("unknown").Knows(6000, std::nullopt, 0.3), 0);
    StepResult r = s.step(backfill_scene(), 0);
    EXPECT_EQ(r.pending_task, 1);
    ASSERT_EQ(placed_ids(r), std::vector<int>{2});
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});
}

// This test verifies the order: the shortest expected run first (an unknown run time goes
// first), and a task that has waited max_wait_s goes to the front; `carma-longfirst` takes the
// longest first, `carma-fifo` arrival order, and they do not combine.
TEST(CarmaTest, ShortFirstWithBoundedWait) {
    auto make = [&](const char* policy) {
        SchedulerConfig cfg = carma_config(policy);
        cfg.carma.max_wait_s = 50;
        Scheduler s(cfg);
        s.enqueue(1, MakeTask("long").Knows(1000, 1000, 0.3), 0);
        s.enqueue(2, MakeTask("short").Knows(1000, 100, 0.3), 10);
        s.enqueue(3, MakeTask("unknown").Knows(1000, std::nullopt, 0.3), 20);
        s.enqueue(4, MakeTask("middle").Knows(1000, 500, 0.3), 25);
        return s;
    };
    const std::vector<GpuView> one_idle = {MakeGpu(0)};
    {
        Scheduler s = make("carma");
        EXPECT_EQ(s.next_order_change(30), 50);  // "long" ages at 0 + 50
        EXPECT_EQ(s.waiting_order(30), (std::vector<TaskId>{3, 2, 4, 1}));
        EXPECT_EQ(placed_ids(s.step(one_idle, 30)), std::vector<int>{3});
    }
    {
        Scheduler s = make("carma");
        s.cancel(3);
        EXPECT_EQ(placed_ids(s.step(one_idle, 30)), std::vector<int>{2});
    }
    {
        Scheduler s = make("carma");
        // At 60 "long" (queued at 0) and "short" (at 10) have waited 50 s or more: arrival order.
        EXPECT_EQ(placed_ids(s.step(one_idle, 60)), std::vector<int>{1});
        EXPECT_EQ(s.next_order_change(60), 70);  // "unknown" ages at 20 + 50
    }
    EXPECT_EQ(make("carma-longfirst").waiting_order(30), (std::vector<TaskId>{3, 1, 4, 2}));
    EXPECT_EQ(make("carma-fifo").waiting_order(30), (std::vector<TaskId>{1, 2, 3, 4}));
    EXPECT_FALSE(find_policy("carma-fifo-longfirst"));
    EXPECT_FALSE(find_policy("carma-longfirst-fifo"));
    EXPECT_FALSE(find_policy("carma-longfirst-longfirst"));
    ASSERT_TRUE(find_policy("carma-longfirst-nobackfill"));
    EXPECT_EQ(find_policy("carma-longfirst-nobackfill")->order, RunTimeOrder::LongestFirst);
}

// This test verifies that the order a person is shown (Scheduler::waiting_order) is the one a
// round takes: the recovery queue first, then aged tasks in arrival order, then shortest first; the
// paper's policies keep arrival order.
TEST(CarmaTest, WaitingOrderIsTheOrderARoundTakes) {
    SchedulerConfig cfg = carma_config();
    cfg.carma.max_wait_s = 50;
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("short").Knows(1000, 100, 0.3), 0);
    s.enqueue(2, MakeTask("long").Knows(1000, 1000, 0.3), 10);
    s.enqueue(3, MakeTask("unknown").Knows(1000, std::nullopt, 0.3), 20);
    s.enqueue(4, MakeTask("middle").Knows(1000, 500, 0.3), 40);
    s.enqueue_recovery(5, MakeTask("crashed").Knows(1000, 50, 0.3), 45);
    EXPECT_EQ(s.waiting_order(30), (std::vector<TaskId>{5, 3, 1, 4, 2}));
    // At 60 "short" (0) and "long" (10) have waited 50 s: they lead, in arrival order.
    EXPECT_EQ(s.waiting_order(60), (std::vector<TaskId>{5, 1, 2, 3, 4}));
    // The head a round places from an idle GPU is the first of that order.
    EXPECT_EQ(placed_ids(s.step(std::vector<GpuView>{MakeGpu(0)}, 30)), std::vector<int>{5});

    SchedulerConfig paper;
    paper.policy = *find_policy("oracle-MAGM");
    Scheduler p(paper);
    p.enqueue(1, MakeTask("short").Knows(1000, 100, 0.3), 0);
    p.enqueue(2, MakeTask("long").Knows(1000, 1000, 0.3), 10);
    p.enqueue_recovery(3, MakeTask("crashed").Knows(1000, 50, 0.3), 20);
    EXPECT_EQ(p.waiting_order(30), (std::vector<TaskId>{3, 1, 2}));
}

// This test verifies that a waiting task's order follows what it learns while it waits.
TEST(CarmaTest, RelearnReorders) {
    Scheduler s(carma_config());
    s.enqueue(1, MakeTask("a").Knows(1000, 100, 0.3), 0);
    s.enqueue(2, MakeTask("b").Knows(1000, 200, 0.3), 0);
    EXPECT_EQ(s.waiting_order(1), (std::vector<TaskId>{1, 2}));
    Learned longer = MakeTask().Knows(1000, 900, 0.3).Obj().learned;
    EXPECT_TRUE(s.relearn(1, longer));
    EXPECT_FALSE(s.relearn(7, longer));
    EXPECT_EQ(placed_ids(s.step(std::vector<GpuView>{MakeGpu(0)}, 1)), std::vector<int>{2});
}

// This test verifies that tasks behind a recovered head (which waits for an idle GPU) may still
// start where they cannot delay it, unlike the paper's frozen main queue.
TEST(CarmaTest, BackfillAroundRecoveryHead) {
    Scheduler s(carma_config());
    s.enqueue_recovery(1, MakeTask("crashed").Knows(8000, 600, 0.3), 0);
    s.enqueue(2, MakeTask("small").Knows(2000, std::nullopt, 0.3), 0);
    // GPU0 drains first (end 100): the recovered head's shadow. GPU1 is free for others.
    std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 4000, 100, 0.3),
                                 MakeGpu(1).Resident(11, 4000, 1000, 0.3)};
    StepResult r = s.step(gpus, 0);
    EXPECT_EQ(r.pending_task, 1);
    const Placement* p = placement_of(r, 2);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->gpus, std::vector<int>{1});
}

// This test verifies that a task behind the head that only an idle GPU takes (--exclusive, or a
// need nothing is known of) is told no GPU is idle, not that "no GPU has 0 MiB available".
TEST(CarmaTest, RunsAloneTaskBehindHeadIsToldNoGpuIsIdle) {
    Scheduler s(carma_config());
    s.enqueue(1, MakeTask("head").Knows(39000, 600, 0.3), 0);
    s.enqueue(2, MakeTask("alone").Exclusive().Knows(1000, 600, 0.3), 0);
    std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 4000, 1000, 0.3)};
    StepResult r = s.step(gpus, 0);
    const Waiting* alone = nullptr;
    for (const Waiting& w : r.waiting) {
        alone = w.task == 2 ? &w : alone;
    }
    ASSERT_NE(alone, nullptr);
    EXPECT_EQ(alone->reason.find("0 MiB"), std::string::npos) << alone->reason;
    EXPECT_NE(alone->reason.find("no GPU is idle (exclusive: runs alone)"), std::string::npos)
        << alone->reason;
}

// This test verifies feasibility under learned knowledge: a need learned from history above the
// largest GPU is rejected, an estimate above it is not (estimates err; the task runs alone).
TEST(CarmaTest, FeasibilityUsesLearnedHistoryOnly) {
    std::vector<GpuCapacity> caps = {{0, 40441}};
    TaskSpec estimated = MakeTask("est").Knows(50000, std::nullopt);
    estimated.learned.runs = 0;
    EXPECT_TRUE(check_feasible(estimated, caps, MemoryKnowledge::Learned));
    TaskSpec learned = MakeTask("hist").Knows(50000, std::nullopt);
    EXPECT_FALSE(check_feasible(learned, caps, MemoryKnowledge::Learned));
    // The oracle value is not read.
    TaskSpec oracle = MakeTask("oracle").Profiled(50000).Knows(1000, std::nullopt);
    EXPECT_TRUE(check_feasible(oracle, caps, MemoryKnowledge::Learned));
}

}  // namespace
}  // namespace carma
