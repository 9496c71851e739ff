// A token bucket per sender (core/rate_limit.h), with the time given.

#include "core/rate_limit.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that a bucket lets a burst through at once, then one event per 1/rate
// seconds, and says how long a refused sender must wait.
TEST(RateLimitTest, BurstThenRate) {
    TokenBucket b(10, 20);
    for (int i = 0; i < 20; ++i) {
        EXPECT_TRUE(b.take(100.0)) << "event " << i << " of the burst";
    }
    EXPECT_FALSE(b.take(100.0));
    EXPECT_NEAR(b.wait_s(100.0), 0.1, 1e-9);
    EXPECT_FALSE(b.take(100.05));
    EXPECT_TRUE(b.take(100.1));
    EXPECT_FALSE(b.take(100.1));
    // Quiet for long enough, it is full again, never fuller.
    EXPECT_TRUE(b.full(110.0));
    for (int i = 0; i < 20; ++i) {
        EXPECT_TRUE(b.take(110.0));
    }
    EXPECT_FALSE(b.take(110.0));
}

// This test verifies that a sender that keeps to the rate is never refused over a long run,
// and one at twice the rate is refused about half the time once its burst is spent.
TEST(RateLimitTest, SteadySenderIsNeverRefused) {
    RateLimiter limiter(10, 20);
    int fast_refused = 0;
    for (int i = 0; i < 10000; ++i) {
        const double t = i * 0.1;
        EXPECT_TRUE(limiter.allow("steady", t)) << "at " << t << " s";
        if (!limiter.allow("fast", t)) {
            ++fast_refused;
        }
        if (!limiter.allow("fast", t + 0.05)) {
            ++fast_refused;
        }
    }
    EXPECT_GT(fast_refused, 9000);
    EXPECT_LT(fast_refused, 10000);
}

// This test verifies that senders have their own buckets, that a refusal gives the wait, that a
// clock going back gives no tokens, and that quiet senders are forgotten past the cap.
TEST(RateLimitTest, SendersAreApartAndQuietOnesForgotten) {
    RateLimiter limiter(1, 2, 3);
    EXPECT_TRUE(limiter.allow("a", 5));
    EXPECT_TRUE(limiter.allow("a", 5));
    double wait = 0;
    EXPECT_FALSE(limiter.allow("a", 5, &wait));
    EXPECT_NEAR(wait, 1.0, 1e-9);
    EXPECT_FALSE(limiter.allow("a", 4));  // earlier "now": nothing gained
    EXPECT_TRUE(limiter.allow("b", 5));
    EXPECT_TRUE(limiter.allow("c", 5));
    EXPECT_EQ(limiter.senders(), 3u);
    // At 100 s all three are full again: a fourth sender makes room by forgetting them.
    EXPECT_TRUE(limiter.allow("d", 100));
    EXPECT_EQ(limiter.senders(), 1u);
    EXPECT_TRUE(limiter.allow("a", 100));
    EXPECT_TRUE(limiter.allow("a", 100));
    EXPECT_FALSE(limiter.allow("a", 100));
}

}  // namespace
}  // namespace carma
