#include "core/scheduler.h"

#include <gtest/gtest.h>

#include "builders.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;

Scheduler make(const char* policy) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy(policy);
    return Scheduler(cfg);
}

std::vector<int> placed_tasks(const StepResult& r) {
    std::vector<int> ids;
    for (const Placement& p : r.placed) {
        ids.push_back(static_cast<int>(p.task));
    }
    return ids;
}

// This test verifies that idle GPUs are used first, in index order, by every policy, and that
// several tasks can be placed in one step.
TEST(SchedulerTest, ExclusivePathFirst) {
    for (const char* policy : {"exclusive", "oracle-MAGM", "OR-RR"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("a").Profiled(1000));
        s.enqueue(2, MakeTask("b").Gpus(2).Profiled(1000));
        std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(39000), MakeGpu(1), MakeGpu(2),
                                     MakeGpu(3)};
        StepResult r = s.step(gpus, 0);
        ASSERT_EQ(r.placed.size(), 2u) << policy;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1}) << policy;
        EXPECT_TRUE(r.placed[0].exclusive);
        EXPECT_EQ(r.placed[1].gpus, (std::vector<int>{2, 3})) << policy;
        EXPECT_TRUE(s.idle());
    }
}

// This test verifies strict FIFO head-of-line blocking: a head that cannot be placed stops the
// round even though the small task behind it would fit.
TEST(SchedulerTest, HeadOfLineBlocking) {
    Scheduler s = make("oracle-MAGM");
    s.enqueue(1, MakeTask("big").Profiled(30000));   // needs avail >= 32,048
    s.enqueue(2, MakeTask("small").Profiled(1000));  // would fit on GPU0
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(20512), MakeGpu(1).Busy().Free(10512)};
    StepResult r = s.step(gpus, 0);
    EXPECT_TRUE(r.placed.empty());
    EXPECT_EQ(r.pending_task, 1);
    EXPECT_NE(r.pending_reason.find("big"), std::string::npos);
    EXPECT_EQ(s.main_queue().size(), 2u);
}

// This test verifies the collocation path: with no idle GPU the policy places the head on a
// shared GPU, and the GPU it chose is locked for the rest of the step (warm-up).
TEST(SchedulerTest, CollocatesAndLocksChosenGpu) {
    Scheduler s = make("oracle-MAGM");
    s.enqueue(1, MakeTask("a").Profiled(5000));
    s.enqueue(2, MakeTask("b").Profiled(5000));
    s.enqueue(3, MakeTask("c").Profiled(5000));
    // avail 30,000 and 20,000: both pass 7,048. a -> GPU0 (most), b -> GPU1 (GPU0 now locked),
    // c waits (both locked).
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(30512), MakeGpu(1).Busy().Free(20512)};
    StepResult r = s.step(gpus, 0);
    EXPECT_EQ(placed_tasks(r), (std::vector<int>{1, 2}));
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0});
    EXPECT_EQ(r.placed[1].gpus, std::vector<int>{1});
    EXPECT_FALSE(r.placed[0].exclusive);
    EXPECT_EQ(r.pending_task, 3);
    EXPECT_NE(r.pending_reason.find("warming up"), std::string::npos);
}

// This test verifies the warm-up lock across steps: a GPU stays closed until its new task has
// been seen for more than 30 s, then opens.
TEST(SchedulerTest, WarmupLockAcrossSteps) {
    Scheduler s = make("oracle-FF");
    s.enqueue(1, MakeTask("a").Profiled(1000));
    s.enqueue(2, MakeTask("b").Profiled(1000));
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(30000)};
    EXPECT_EQ(placed_tasks(s.step(gpus, 0)), std::vector<int>{1});
    EXPECT_TRUE(s.step(gpus, 10).placed.empty());  // not seen yet
    s.task_seen(1, 12);
    EXPECT_TRUE(s.step(gpus, 42).placed.empty());  // 42 - 12 = 30, not > 30
    EXPECT_EQ(placed_tasks(s.step(gpus, 43)), std::vector<int>{2});
}

// This test verifies recovery priority (spec §1.5, §1.10): the recovery queue's head goes first,
// only on idle GPUs, and while it waits the main queue is frozen even if it could collocate.
TEST(SchedulerTest, RecoveryFirstAndExclusiveOnly) {
    Scheduler s = make("OR-MAGM");
    s.enqueue(1, MakeTask("fresh").Profiled(1000));
    s.enqueue_recovery(2, MakeTask("crashed").Profiled(1000));
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(30000), MakeGpu(1).Busy().Free(30000)};
    StepResult r = s.step(gpus, 0);
    EXPECT_TRUE(r.placed.empty());
    EXPECT_EQ(r.pending_task, 2);
    EXPECT_NE(r.pending_reason.find("recovered"), std::string::npos);

    gpus[1].has_processes = false;  // GPU1 becomes idle
    r = s.step(gpus, 1);
    ASSERT_EQ(r.placed.size(), 2u);
    EXPECT_EQ(r.placed[0].task, 2);
    EXPECT_TRUE(r.placed[0].recovered);
    EXPECT_TRUE(r.placed[0].exclusive);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});
    EXPECT_EQ(r.placed[1].task, 1);  // then the main queue may collocate on GPU0
    EXPECT_EQ(r.placed[1].gpus, std::vector<int>{0});
}

// This test verifies that a multi-GPU task takes n distinct GPUs from the exclusive path only
// when n are idle, else from the collocation path where each of the n passes.
TEST(SchedulerTest, MultiGpu) {
    Scheduler s = make("oracle-MAGM");
    s.enqueue(1, MakeTask("pair").Gpus(2).Profiled(9000));  // needs avail >= 11,048
    std::vector<GpuView> gpus = {MakeGpu(0), MakeGpu(1).Busy().Free(12000),
                                 MakeGpu(2).Busy().Free(25000), MakeGpu(3).Busy().Free(8000)};
    // one idle GPU is not enough for the exclusive path; collocation: passing 0 (40,441-512),
    // 2 (24,488), 1 (11,488); GPU3 (7,488) fails. MAGM: 0 then 2.
    StepResult r = s.step(gpus, 0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, (std::vector<int>{0, 2}));
    EXPECT_FALSE(r.placed[0].exclusive);
}

// This test verifies that tasks that can never fit are rejected with the limit named, and the
// queue moves on.
TEST(SchedulerTest, InfeasibleRejected) {
    Scheduler s = make("exclusive");
    s.enqueue(1, MakeTask("wide").Gpus(5));
    s.enqueue(2, MakeTask("huge").Profiled(50000));
    s.enqueue(3, MakeTask("fine").Profiled(1000));
    std::vector<GpuView> gpus = {MakeGpu(0), MakeGpu(1), MakeGpu(2), MakeGpu(3)};
    StepResult r = s.step(gpus, 0);
    ASSERT_EQ(r.rejected.size(), 2u);
    EXPECT_NE(r.rejected[0].reason.find("asks for 5 GPUs but this server has 4"),
              std::string::npos);
    EXPECT_NE(r.rejected[1].reason.find("needs 50,000 MiB per GPU but the largest GPU here has "
                                        "40,441 MiB"),
              std::string::npos);
    EXPECT_EQ(placed_tasks(r), std::vector<int>{3});

    std::vector<GpuCapacity> caps = {{0, 40441}};
    // No GPU is a CPU-only task, whatever its GPU memory says; fewer is an error.
    EXPECT_TRUE(check_feasible(MakeTask("z").Gpus(0).Profiled(50000), caps));
    auto negative = check_feasible(MakeTask("n").Gpus(-1), caps);
    ASSERT_FALSE(negative);
    EXPECT_EQ(negative.error().code, ErrorCode::InvalidArgument);
}

// This test verifies that the exclusive policy never shares and that cancel removes a waiting
// task from either queue.
TEST(SchedulerTest, ExclusiveWaitsAndCancel) {
    Scheduler s = make("exclusive");
    s.enqueue(1, MakeTask("a").Profiled(100));
    s.enqueue_recovery(2, MakeTask("b").Profiled(100));
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(40000)};
    EXPECT_TRUE(s.step(gpus, 0).placed.empty());
    EXPECT_TRUE(s.cancel(2));
    StepResult r = s.step(gpus, 1);
    EXPECT_TRUE(r.placed.empty());
    EXPECT_NE(r.pending_reason.find("policy exclusive"), std::string::npos);
    EXPECT_TRUE(s.cancel(1));
    EXPECT_FALSE(s.cancel(1));
    EXPECT_TRUE(s.idle());
}

// This test verifies determinism: the same inputs give the same decisions.
TEST(SchedulerTest, Deterministic) {
    auto run = [] {
        Scheduler s = make("OR-RR");
        for (int i = 0; i < 6; ++i) {
            s.enqueue(i, MakeTask("t").Profiled(100));
        }
        std::vector<GpuView> gpus = {MakeGpu(0).Busy(), MakeGpu(1).Busy(), MakeGpu(2).Busy()};
        std::vector<std::vector<int>> out;
        for (int t = 0; t < 200; t += 40) {
            for (const Placement& p : s.step(gpus, t).placed) {
                out.push_back(p.gpus);
                s.task_seen(p.task, t);
            }
        }
        return out;
    };
    EXPECT_EQ(run(), run());
    EXPECT_EQ(run().size(), 6u);
}

}  // namespace
}  // namespace carma
