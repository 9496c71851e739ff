// Nodes whose agent is not root (core/agent_user.h): such an agent starts only its own user's
// tasks, so every policy keeps other users' tasks off its GPUs, on the idle path and the
// collocation path alike, and says why.

#include "core/agent_user.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "builders.h"
#include "core/carma.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using ::testing::HasSubstr;
using testing::MakeGpu;
using testing::MakeTask;

TaskSpec task_of(const std::string& user, bool exclusive = false) {
    TaskSpec t = MakeTask(user).Profiled(4000).Knows(4000, 600);
    t.user = user;
    t.exclusive = exclusive;
    return t;
}

// The GPU on `node`, whose agent runs as `agent` ("": root). Moved in: assigning a literal
// trips g++ 12's -Wrestrict false positive here.
GpuView on_node(GpuView g, std::string node, std::string agent) {
    g.node = std::move(node);
    g.agent_user = std::move(agent);
    return g;
}

// GPU 0 on node a, whose agent runs as alice; GPU 1 on node b, a root agent.
std::vector<GpuView> two_nodes() {
    return {on_node(MakeGpu(0), "a", "alice"), on_node(MakeGpu(1), "b", "")};
}

// This test verifies the rule: a root agent's node admits anyone; alice's agent's node only her.
TEST(AgentUserTest, OnlyTheAgentsOwnUserIsAdmitted) {
    const std::vector<GpuView> gpus = two_nodes();
    EXPECT_TRUE(agent_admits(task_of("alice"), gpus[0]));
    EXPECT_FALSE(agent_admits(task_of("bob"), gpus[0]));
    EXPECT_TRUE(agent_admits(task_of("bob"), gpus[1]));
    const auto why = agent_refusal(task_of("bob"), gpus[0]);
    ASSERT_TRUE(why);
    EXPECT_EQ(*why, "its node's agent runs as alice, not root, and starts only alice's tasks");
}

// This test verifies every path, under the paper's policies and `carma`: bob's task goes to the
// root agent's GPU although alice's comes first in index order, alice's may use hers; with the
// root agent's GPU busy, bob's exclusive task waits and its reason names alice's agent.
TEST(AgentUserTest, EveryPolicyKeepsOtherUsersOffANonRootAgentsNode) {
    for (const char* name : {"oracle-FF", "exclusive", "carma"}) {
        SchedulerConfig cfg;
        cfg.policy = *find_policy(name);
        Scheduler s(cfg);
        const std::vector<GpuView> gpus = two_nodes();
        s.enqueue(1, task_of("bob"), 0.0);
        StepResult r = s.step(gpus, 0.0);
        ASSERT_EQ(r.placed.size(), 1u) << name;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1}) << name;

        Scheduler own(cfg);
        own.enqueue(2, task_of("alice"), 0.0);
        r = own.step(gpus, 0.0);
        ASSERT_EQ(r.placed.size(), 1u) << name;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0}) << name;

        Scheduler waits(cfg);
        std::vector<GpuView> busy = two_nodes();
        busy[1] = on_node(MakeGpu(1).Resident(9, 30000, std::nullopt).ResidentExclusive(), "b",
                          "");
        waits.enqueue(3, task_of("bob", true), 0.0);
        r = waits.step(busy, 0.0);
        EXPECT_TRUE(r.placed.empty()) << name;
        EXPECT_THAT(r.pending_reason, HasSubstr("GPU 0 on a: its node's agent runs as alice"))
            << name;
    }
}

// This test verifies the collocation path's reason: bob's task, which may share, names alice's
// agent for GPU 0 beside why GPU 1 is turned down.
TEST(AgentUserTest, TheCollocationReasonNamesTheAgent) {
    std::vector<GpuView> gpus = two_nodes();
    gpus[0] = on_node(MakeGpu(0).Resident(8, 4000, std::nullopt), "a", "alice");
    gpus[1] = on_node(MakeGpu(1).Resident(9, 30000, std::nullopt).ResidentExclusive(), "b", "");
    const Selection sel =
        select_gpus(*find_policy("oracle-FF"), task_of("bob"), gpus, PlacementConfig{}, 0);
    EXPECT_TRUE(sel.gpus.empty());
    EXPECT_THAT(sel.pending_reason, HasSubstr("GPU 0 on a: its node's agent runs as alice"));
}

// This test verifies carma's plan for a waiting head: bob's head is planned on the root agent's
// GPU although alice's node frees first, so its reservation keeps nothing bob could not use;
// alice's own head is planned on her node.
TEST(AgentUserTest, TheHeadIsPlannedOnlyWhereItsAgentWouldStartIt) {
    std::vector<GpuView> gpus = two_nodes();
    gpus[0] = on_node(MakeGpu(0).Resident(8, 30000, 100), "a", "alice");
    gpus[1] = on_node(MakeGpu(1).Resident(9, 30000, 1000), "b", "");
    const std::vector<char> open = {1, 1};
    for (const auto& [user, gpu, start] :
         {std::tuple{"bob", std::vector<char>{0, 1}, 1000.0},
          std::tuple{"alice", std::vector<char>{1, 0}, 100.0}}) {
        TaskSpec head = MakeTask(user).Knows(30000, 3600, 0.3);
        head.user = user;
        const HeadPlan plan =
            plan_head(head, carma_need(head, false, PlacementConfig{}), gpus, open, 0, 30);
        EXPECT_EQ(plan.shadow, gpu) << user;
        EXPECT_DOUBLE_EQ(plan.start, start) << user;
    }
}

}  // namespace
}  // namespace carma
