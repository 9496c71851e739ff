// A running attempt taken up again after a restart (daemon/live_attempt.h), without a daemon.

#include <gtest/gtest.h>

#include "daemon/live_attempt.h"

namespace carma::daemon {
namespace {

store::AttemptRow stored_attempt(const std::string& node, pid_t shim_pid) {
    store::AttemptRow a;
    a.task = 7;
    a.number = 2;
    a.gpus = {1, 3};
    a.dir = node.empty() ? "/state/attempts/7/2" : "7-2";
    a.node = node;
    a.shim_pid = shim_pid;
    a.started_at = 1000;
    a.peak_mib = {{1, 4096}, {3, 2048}};
    a.energy_j = 55.5;
    return a;
}

TEST(ReattachedAttempt, GoesOnFromWhatTheStoreKept) {
    store::TaskRow t;
    t.id = 7;
    t.spec.time_limit_s = 3600;
    t.spec.learned.need_mib = 8000;
    const LiveAttempt live = reattached_attempt(t, stored_attempt("", 4242), 12.5, "alice");
    EXPECT_EQ(live.task, 7);
    EXPECT_EQ(live.number, 2);
    EXPECT_EQ(live.gpus, (std::vector<int>{1, 3}));
    EXPECT_EQ(live.handle.shim_pid, 4242);
    EXPECT_EQ(live.handle.attempt_dir, "/state/attempts/7/2");
    EXPECT_TRUE(live.settled) << "no warm-up lock for an attempt that has run a while";
    EXPECT_EQ(live.peak_mib, (std::map<int, MiB>{{1, 4096}, {3, 2048}}));
    EXPECT_EQ(live.energy_j, 55.5);
    EXPECT_EQ(live.learned.need_mib, 8000);
    EXPECT_FALSE(live.sharing_known) << "its time before the restart is unknown";
    EXPECT_EQ(live.mps_user, "alice");
    EXPECT_EQ(live.started_clock, 12.5);
    EXPECT_EQ(live.started_unix, 1000);
    EXPECT_EQ(live.time_limit_s, 3600);
    EXPECT_FALSE(live.launch_unconfirmed);
}

TEST(ReattachedAttempt, ARemoteOneWithoutItsLaunchReplyIsUnconfirmed) {
    const store::TaskRow t;
    EXPECT_TRUE(reattached_attempt(t, stored_attempt("gpu-3", 0), 0, "").launch_unconfirmed);
    EXPECT_FALSE(reattached_attempt(t, stored_attempt("gpu-3", 99), 0, "").launch_unconfirmed);
    EXPECT_FALSE(reattached_attempt(t, stored_attempt("", 0), 0, "").launch_unconfirmed)
        << "a local one's supervisor pid is read from its directory";
    EXPECT_EQ(reattached_attempt(t, stored_attempt("gpu-3", 0), 0, "").handle.node, "gpu-3");
}

// This test verifies the GPUs a preemption's probe sees with an attempt gone: off both GPUs it
// held, its memory free there; a GPU with another attempt stays busy with that attempt's MPS
// server; one with only a foreign process stays busy though the process reports no memory; one
// left empty is idle with no MPS server; a GPU it never held is as it was.
TEST(ViewsWithout, TakeTheAttemptOffEveryGpuItHeld) {
    LiveAttempt gone;
    gone.task = 7;
    gone.gpus = {0, 1, 2};
    gone.held_now = {{0, 4000}, {1, 3000}, {2, 2000}};
    gone.mps_user = "bob";
    LiveAttempt other;
    other.task = 8;
    other.gpus = {0};
    other.mps_user = "carol";
    const std::map<TaskId, LiveAttempt> live{{7, gone}, {8, other}};
    std::vector<GpuView> views(4);
    for (int g = 0; g < 4; ++g) {
        views[static_cast<std::size_t>(g)].index = g;
        views[static_cast<std::size_t>(g)].has_processes = true;
        views[static_cast<std::size_t>(g)].stats.available_mib = 1000;
        views[static_cast<std::size_t>(g)].mps_user = "bob";
    }
    const auto resident = [](TaskId id) {
        ResidentView r;
        r.task = id;
        return r;
    };
    views[0].residents = {resident(7), resident(8)};
    views[1].residents = {resident(7)};
    views[2].residents = {resident(7)};
    views[3].residents = {resident(9)};
    std::vector<GpuState> gpus(4);
    gpus[2].foreign.push_back(ForeignProcess{});  // reports no memory (a container's)

    const std::vector<GpuView> after = views_without(views, gone, live, gpus);
    ASSERT_EQ(after.size(), 4u);
    EXPECT_EQ(after[0].residents.size(), 1u);
    EXPECT_EQ(after[0].residents[0].task, 8);
    EXPECT_TRUE(after[0].has_processes);
    EXPECT_EQ(after[0].mps_user, "carol");
    EXPECT_EQ(after[0].stats.available_mib, 5000);
    EXPECT_TRUE(after[1].residents.empty());
    EXPECT_FALSE(after[1].has_processes);
    EXPECT_EQ(after[1].mps_user, "");
    EXPECT_EQ(after[1].stats.available_mib, 4000);
    EXPECT_TRUE(after[2].has_processes) << "a foreign process keeps it busy";
    EXPECT_EQ(after[2].stats.available_mib, 3000);
    EXPECT_EQ(after[3].residents.size(), 1u);
    EXPECT_EQ(after[3].stats.available_mib, 1000);
    EXPECT_EQ(after[3].mps_user, "bob");
}

// This test verifies the GPUs as a round left them: an attempt it placed on two GPUs is a resident
// of both, planned with its learned figures and margin, the GPU no longer idle and its MPS server
// the attempt's; a GPU it did not take is as it was.
TEST(ViewsWith, PutARoundsPlacementsOnTheirGpus) {
    LiveAttempt placed;
    placed.task = 11;
    placed.gpus = {1, 2};
    placed.learned.need_mib = 8000;
    placed.learned.margin_mib = 1000;
    placed.learned.activity = 0.4;
    placed.learned.duration_s = 600;
    placed.started_clock = 50;
    placed.exclusive = true;
    placed.mps_user = "dora";
    std::vector<GpuView> views(3);
    for (int g = 0; g < 3; ++g) {
        views[static_cast<std::size_t>(g)].index = g;
    }
    const std::vector<GpuView> after = views_with(views, std::vector<LiveAttempt>{placed});
    EXPECT_TRUE(after[0].residents.empty());
    EXPECT_FALSE(after[0].has_processes);
    for (std::size_t g : {1u, 2u}) {
        ASSERT_EQ(after[g].residents.size(), 1u);
        const ResidentView& r = after[g].residents[0];
        EXPECT_EQ(r.task, 11);
        EXPECT_EQ(r.need_mib, 9000);
        EXPECT_DOUBLE_EQ(r.activity, 0.4);
        EXPECT_EQ(r.expected_end, 650.0);
        EXPECT_TRUE(r.exclusive);
        EXPECT_TRUE(after[g].has_processes);
        EXPECT_EQ(after[g].mps_user, "dora");
    }
}

}  // namespace
}  // namespace carma::daemon
