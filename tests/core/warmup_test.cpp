#include "core/warmup.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the warm-up state machine of spec §1.7: locked from launch until the task
// has been seen for more than 30 s; unlocked at once when the task exits.
TEST(WarmupTest, LocksFromLaunchUntilSettled) {
    WarmupTracker w;
    w.launched(7, {1, 2}, 100);
    EXPECT_TRUE(w.locked(1, 100));
    EXPECT_TRUE(w.locked(2, 500));  // not seen yet: still locked
    EXPECT_FALSE(w.locked(0, 100));
    w.seen(7, 110);
    w.seen(7, 115);  // later sightings keep the first
    EXPECT_TRUE(w.locked(1, 140));   // 140 - 110 = 30: not yet > 30
    EXPECT_FALSE(w.locked(1, 141));  // 31 > 30
    EXPECT_EQ(w.next_unlock(120), 140.0);
    w.expire(141);
    EXPECT_TRUE(w.empty());
}

// This test verifies the resolver timeout and that an exit releases the lock.
TEST(WarmupTest, TimeoutAndExit) {
    WarmupTracker w(WarmupConfig{.settle_s = 30, .unseen_timeout_s = 1000});
    w.launched(1, {0}, 0);
    EXPECT_TRUE(w.locked(0, 999));
    EXPECT_FALSE(w.locked(0, 1000));
    w.launched(2, {3}, 0);
    w.exited(2);
    EXPECT_FALSE(w.locked(3, 1));
}

// This test verifies that each GPU of a multi-GPU task settles on its own: a rank seen on GPU 1
// does not unlock GPU 2, whose rank has not shown up yet.
TEST(WarmupTest, EachGpuSettlesWhenTheTaskIsSeenThere) {
    WarmupTracker w(WarmupConfig{.settle_s = 30, .unseen_timeout_s = 1000});
    w.launched(7, {1, 2}, 100);
    w.seen(7, 1, 110);
    EXPECT_FALSE(w.locked(1, 141));
    EXPECT_TRUE(w.locked(2, 141));  // never seen there: still waiting
    w.seen(7, 2, 200);
    EXPECT_TRUE(w.locked(2, 230));
    EXPECT_FALSE(w.locked(2, 231));
}

}  // namespace
}  // namespace carma
