// The same-owner rule for MPS GPUs (core/mps_share.h): a task that will be an MPS client is never
// placed on a GPU where another user's MPS clients run, by the paper's policies and by `carma`;
// the owner's own tasks and tasks outside MPS are.

#include "core/mps_share.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "builders.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using ::testing::HasSubstr;
using testing::MakeGpu;
using testing::MakeTask;

GpuView with_clients_of(int index, const std::string& user) {
    GpuView g = MakeGpu(index).Resident(100 + index, 4000, std::nullopt);
    g.mps_user = user;
    return g;
}

TaskSpec client_of(const std::string& user) {
    TaskSpec t = MakeTask(user).Profiled(4000).Knows(4000, 600);
    t.mps_user = user;
    return t;
}

// This test verifies the rule and its reason for the paper's policies: bob's task gets neither of
// the two GPUs where alice's clients run, with a reason naming both users; alice's own task and a
// task outside MPS (no mps_user: several GPUs, or no --mps) get one.
TEST(MpsShareTest, PaperPoliciesKeepAnotherUsersTaskOffMpsGpus) {
    const std::vector<GpuView> gpus = {with_clients_of(0, "alice"), with_clients_of(1, "alice")};
    const TaskSpec outside = MakeTask("outside").Profiled(4000);
    EXPECT_TRUE(mps_user_blocks(client_of("bob"), gpus[0]));
    EXPECT_FALSE(mps_user_blocks(client_of("alice"), gpus[0]));
    EXPECT_FALSE(mps_user_blocks(outside, gpus[0]));
    EXPECT_FALSE(mps_user_blocks(client_of("bob"), MakeGpu(2)));
    for (const char* name : {"oracle-MAGM", "oracle-FF", "oracle-RR"}) {
        const PolicySpec p = *find_policy(name);
        const Selection bob = select_gpus(p, client_of("bob"), gpus, PlacementConfig{}, 0);
        EXPECT_TRUE(bob.gpus.empty()) << name;
        EXPECT_THAT(bob.pending_reason,
                    HasSubstr("GPUs 0-1: MPS clients of alice run there, and MPS serves one user "
                              "at a time on a GPU: a task of bob would wait"))
            << name;
        EXPECT_EQ(select_gpus(p, client_of("alice"), gpus, {}, 0).gpus.size(), 1u) << name;
        EXPECT_EQ(select_gpus(p, outside, gpus, {}, 0).gpus.size(), 1u) << name;
    }
}

// This test verifies `carma`: alice's task is placed beside hers; bob's then waits while her
// clients are on both GPUs, and goes to an idle GPU once there is one.
TEST(MpsShareTest, CarmaKeepsAnotherUsersTaskOffMpsGpus) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma");
    Scheduler s(cfg);
    std::vector<GpuView> gpus = {with_clients_of(0, "alice"), with_clients_of(1, "alice")};
    s.enqueue(1, client_of("alice"), 0.0);
    StepResult r = s.step(gpus, 0.0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].task, 1);
    s.enqueue(2, client_of("bob"), 0.0);
    r = s.step(gpus, 1.0);
    EXPECT_TRUE(r.placed.empty());
    gpus.push_back(MakeGpu(2));
    r = s.step(gpus, 2.0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].task, 2);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{2});
}

// This test verifies that under `carma` a GPU kept for the head (bob's task, waiting for alice's
// clients to end) takes no more of alice's tasks: each would keep bob out until it ends too.
TEST(MpsShareTest, CarmaKeepsTheHeadsGpuFromAnotherMpsUser) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma");
    Scheduler s(cfg);
    const std::vector<GpuView> gpus = {with_clients_of(0, "alice")};
    s.enqueue(1, client_of("bob"), 0.0);
    EXPECT_TRUE(s.step(gpus, 0.0).placed.empty());
    s.enqueue(2, client_of("alice"), 0.0);
    EXPECT_TRUE(s.step(gpus, 1.0).placed.empty());
    s.enqueue(3, MakeTask("outside").Knows(4000, 600), 0.0);  // no MPS client: may pass
    const StepResult r = s.step(gpus, 2.0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].task, 3);
}

}  // namespace
}  // namespace carma
