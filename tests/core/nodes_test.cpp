// Scheduling over several nodes: a task's GPUs are always on one node, in every placement path
// (the exclusive path, the paper's policies, `carma` and its head reservation), and a task asking
// for more GPUs than the largest node has is rejected.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "builders.h"
#include "core/carma.h"
#include "core/policy.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;
using testing::simple_model;

GpuView on(const char* node, GpuView g) {
    g.node = node;
    return g;
}

// A GPU whose memory is all taken: no policy collocates on it.
GpuView full(int index) { return MakeGpu(index).Busy().Free(0); }

Scheduler make(const char* policy) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy(policy);
    cfg.placement.predict_speeds = simple_model;
    return Scheduler(cfg);
}

// Two nodes of two GPUs: n1 holds GPUs 0 and 1, n2 GPUs 2 and 3.
std::vector<GpuView> two_nodes(GpuView g0, GpuView g1, GpuView g2, GpuView g3) {
    return {on("n1", std::move(g0)), on("n1", std::move(g1)), on("n2", std::move(g2)),
            on("n2", std::move(g3))};
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// This test verifies that a 2-GPU task with one idle GPU on each node waits under every kind of
// policy, with a reason that says the GPUs must be on one node; once both GPUs of a node are
// idle it takes them.
TEST(NodesTest, MultiGpuTaskWaitsForOneNode) {
    // (OR-RR is left out: it screens no memory, so it would share the full GPUs.)
    for (const char* policy : {"exclusive", "oracle-MAGM", "oracle-FF", "EST-LUG", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("pair").Gpus(2).Profiled(1000).Knows(1000, 600), 0);
        // GPU 1 (n1) and GPU 2 (n2) idle; the others full.
        StepResult r = s.step(two_nodes(full(0), MakeGpu(1), MakeGpu(2), full(3)), 0);
        EXPECT_TRUE(r.placed.empty()) << policy;
        EXPECT_EQ(r.pending_task, 1) << policy;
        EXPECT_TRUE(has(r.pending_reason, "on one node")) << policy << ": " << r.pending_reason;

        // n2 drains: both of its GPUs idle.
        r = s.step(two_nodes(full(0), MakeGpu(1), MakeGpu(2), MakeGpu(3)), 1);
        ASSERT_EQ(r.placed.size(), 1u) << policy;
        EXPECT_EQ(r.placed[0].gpus, (std::vector<int>{2, 3})) << policy;
        EXPECT_TRUE(r.placed[0].exclusive) << policy;
    }
}

// This test verifies that a policy's score cannot split a task: oracle-MAGM ranks GPU 2 (n2,
// most memory) first, but n2's other GPU is full, so the pair goes to n1's two GPUs.
TEST(NodesTest, CollocationKeepsATaskOnOneNode) {
    Scheduler s = make("oracle-MAGM");
    s.enqueue(1, MakeTask("pair").Gpus(2).Profiled(5000));
    StepResult r = s.step(two_nodes(MakeGpu(0).Busy().Free(20512), MakeGpu(1).Busy().Free(15512),
                                    MakeGpu(2).Busy().Free(30512), full(3)),
                          0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, (std::vector<int>{0, 1}));
    EXPECT_FALSE(r.placed[0].exclusive);
}

// This test verifies that the node chosen is the one whose n-th best GPU ranks best, and that
// a single node (every node "") keeps the plain first-n choice.
TEST(NodesTest, SelectGpusPicksTheBestCompleteNode) {
    const PolicySpec magm = *find_policy("oracle-MAGM");
    const TaskSpec pair = MakeTask("pair").Gpus(2).Profiled(1000);
    // MAGM order: GPU 0 (n1, 30,000), GPU 2 (n2, 25,000), GPU 3 (n2, 20,000), GPU 1 (n1, 10,000).
    std::vector<GpuView> gpus = two_nodes(
        MakeGpu(0).Busy().Free(30512), MakeGpu(1).Busy().Free(10512),
        MakeGpu(2).Busy().Free(25512), MakeGpu(3).Busy().Free(20512));
    EXPECT_EQ(select_gpus(magm, pair, gpus, PlacementConfig{}, 0).gpus, (std::vector<int>{2, 3}));
    for (GpuView& g : gpus) {
        g.node.clear();
    }
    EXPECT_EQ(select_gpus(magm, pair, gpus, PlacementConfig{}, 0).gpus, (std::vector<int>{0, 2}));
}

// This test verifies round robin across nodes: the cursor walks on until one node has enough
// passing GPUs, and the reason names the spread when none has.
TEST(NodesTest, RoundRobinStaysOnOneNode) {
    const PolicySpec rr = *find_policy("OR-RR");
    const TaskSpec pair = MakeTask("pair").Gpus(2);
    // From cursor 1: GPU 1 (n1) passes, GPU 2 (n2) passes, GPU 3 (n2) passes: n2 completes.
    std::vector<GpuView> gpus =
        two_nodes(MakeGpu(0), MakeGpu(1), MakeGpu(2), MakeGpu(3));
    Selection sel = select_gpus(rr, pair, gpus, PlacementConfig{}, 1);
    EXPECT_EQ(sel.gpus, (std::vector<int>{2, 3}));
    EXPECT_EQ(sel.rr_cursor, 0u);

    gpus = two_nodes(MakeGpu(0), MakeGpu(1).Unschedulable("unhealthy"), MakeGpu(2),
                     MakeGpu(3).Unschedulable("unhealthy"));
    sel = select_gpus(rr, pair, gpus, PlacementConfig{}, 0);
    EXPECT_TRUE(sel.gpus.empty());
    EXPECT_TRUE(has(sel.pending_reason, "pair needs 2 GPU(s) on one node, 2 pass OR-RR but at "
                                        "most 1 on one node"))
        << sel.pending_reason;
    EXPECT_TRUE(has(sel.pending_reason, "GPU 1 on n1: unhealthy")) << sel.pending_reason;
}

// This test verifies that a recovered task (out-of-memory) still runs alone on idle GPUs, on
// any node, and that its GPUs are on one node too.
TEST(NodesTest, RecoveryIsExclusiveOnAnyNode) {
    for (const char* policy : {"oracle-MAGM", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue_recovery(1, MakeTask("crashed").Profiled(1000).Knows(1000, 600), 0);
        s.enqueue_recovery(2, MakeTask("crashed-pair").Gpus(2).Profiled(1000).Knows(1000, 600),
                           0);
        // Only GPU 3 (n2) and GPU 0 (n1) are idle; GPU 1 has room but is shared.
        StepResult r = s.step(two_nodes(MakeGpu(0), MakeGpu(1).Busy().Free(30000), full(2),
                                        MakeGpu(3)),
                              0);
        ASSERT_EQ(r.placed.size(), 1u) << policy;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0}) << policy;
        EXPECT_TRUE(r.placed[0].recovered);
        EXPECT_EQ(r.pending_task, 2) << policy;
        EXPECT_TRUE(has(r.pending_reason, "idle GPU(s) on one node")) << r.pending_reason;
    }
    Scheduler s = make("oracle-MAGM");
    s.enqueue_recovery(1, MakeTask("crashed").Profiled(1000), 0);
    StepResult r =
        s.step(two_nodes(full(0), MakeGpu(1).Busy().Free(30000), full(2), MakeGpu(3)), 0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{3});
}

// This test verifies feasibility over nodes: four GPUs in all, but a task asking for three is
// rejected because no node has three; the message names the task, what it asks and the largest
// node. On one server the old message stays.
TEST(NodesTest, MoreGpusThanTheLargestNodeIsRejected) {
    std::vector<GpuCapacity> caps = {{0, 40441, "n1"}, {1, 40441, "n1"}, {2, 40441, "n2"},
                                     {3, 40441, "n3"}};
    auto three = check_feasible(MakeTask("trio").Gpus(3), caps);
    ASSERT_FALSE(three);
    EXPECT_EQ(three.error().code, ErrorCode::Infeasible);
    EXPECT_TRUE(has(three.error().message, "task 'trio' asks for 3 GPUs but the largest node, "
                                           "n1, has 2"))
        << three.error().message;
    EXPECT_TRUE(check_feasible(MakeTask("pair").Gpus(2), caps));

    for (GpuCapacity& c : caps) {
        c.node.clear();
    }
    EXPECT_TRUE(check_feasible(MakeTask("trio").Gpus(3), caps));
    auto five = check_feasible(MakeTask("five").Gpus(5), caps);
    ASSERT_FALSE(five);
    EXPECT_TRUE(has(five.error().message, "this server has 4")) << five.error().message;

    for (const char* policy : {"oracle-MAGM", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("trio").Gpus(3).Knows(1000, 60), 0);
        StepResult r = s.step(two_nodes(MakeGpu(0), MakeGpu(1), MakeGpu(2), MakeGpu(3)), 0);
        ASSERT_EQ(r.rejected.size(), 1u) << policy;
        EXPECT_TRUE(has(r.rejected[0].reason, "largest node, n1, has 2")) << r.rejected[0].reason;
        EXPECT_TRUE(s.idle());
    }
}

// This test verifies carma's reservation for a waiting multi-GPU head: its shadow is n GPUs of
// one node, the node that frees n GPUs first, and its predicted start is when that node does.
TEST(NodesTest, CarmaShadowIsOnOneNode) {
    const TaskSpec head = MakeTask("head").Gpus(2).Knows(30000, 3600);
    const CarmaNeed need = carma_need(head, false, PlacementConfig{});
    // Residents end at 100 (GPU 0), 500 (GPU 1), 200 (GPU 2) and 300 (GPU 3).
    std::vector<GpuView> gpus = two_nodes(MakeGpu(0).Resident(10, 30000, 100),
                                          MakeGpu(1).Resident(11, 30000, 500),
                                          MakeGpu(2).Resident(12, 30000, 200),
                                          MakeGpu(3).Resident(13, 30000, 300));
    const std::vector<char> open = {1, 1, 1, 1};
    HeadPlan plan = plan_head(head, need, gpus, open, 0, 30);
    EXPECT_EQ(plan.shadow, (std::vector<char>{0, 0, 1, 1}));
    EXPECT_DOUBLE_EQ(plan.start, 300);

    for (GpuView& g : gpus) {
        g.node.clear();
    }
    plan = plan_head(head, need, gpus, open, 0, 30);
    EXPECT_EQ(plan.shadow, (std::vector<char>{1, 0, 1, 0}));
    EXPECT_DOUBLE_EQ(plan.start, 200);
}

// This test verifies carma's collocation path: the least-slowdown GPUs (0 and 2, where the
// pair adds no predicted slowdown) are on two nodes, so the pair takes n1's GPUs 0 and 1 (GPU 1
// would slow by 0.2) rather than n2's, where GPU 3 has no room.
TEST(NodesTest, CarmaCollocationKeepsATaskOnOneNode) {
    Scheduler s = make("carma");
    s.enqueue(1, MakeTask("pair").Gpus(2).Knows(5000, 600, 0.2), 0);
    // Quiet GPUs 0 (n1) and 2 (n2); n2's GPU 3 is full; n1's GPU 1 is busier but has room.
    StepResult r = s.step(two_nodes(MakeGpu(0).Resident(10, 5000, 1000, 0.1),
                                    MakeGpu(1).Resident(11, 5000, 1000, 0.9),
                                    MakeGpu(2).Resident(12, 5000, 1000, 0.1),
                                    MakeGpu(3).Resident(13, std::nullopt, 1000, 0.1)),
                          0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, (std::vector<int>{0, 1}));
}

// This test verifies the pick itself: more distinct nodes than it counts on the stack still
// count right, and a node's GPUs need not be adjacent.
TEST(NodesTest, PickOnOneNodeManyNodes) {
    std::vector<std::string> nodes;
    for (int i = 0; i < 40; ++i) {
        nodes.push_back(fmt::format("n{}", i));
    }
    nodes.push_back("n39");  // node 39 completes a pair at the end
    nodes.push_back("n5");
    std::vector<std::size_t> taken;
    NodePick pick = pick_on_one_node(
        nodes.size(), 2, [](std::size_t) { return true; },
        [&](std::size_t k) -> const std::string& { return nodes[k]; },
        [&](std::size_t k) { taken.push_back(k); });
    EXPECT_TRUE(pick.found);
    EXPECT_EQ(taken, (std::vector<std::size_t>{39, 40}));

    taken.clear();
    pick = pick_on_one_node(
        nodes.size(), 3, [](std::size_t) { return true; },
        [&](std::size_t k) -> const std::string& { return nodes[k]; },
        [&](std::size_t k) { taken.push_back(k); });
    EXPECT_FALSE(pick.found);
    EXPECT_TRUE(taken.empty());
    EXPECT_EQ(pick.most_on_one_node, 2u);
    EXPECT_EQ(nodes[pick.most_at], "n39");
}

}  // namespace
}  // namespace carma
