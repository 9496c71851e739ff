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

}  // namespace
}  // namespace carma::daemon
