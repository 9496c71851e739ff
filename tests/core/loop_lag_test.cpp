#include "core/loop_lag.h"

#include <cmath>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies what counts as late: an overrun of half a period or more (rounds of 1.5
// periods run two where the clock assumes three); jitter below it does not, and the worst overrun
// is kept in periods.
TEST(LoopLagTest, LateMeansHalfAPeriodOverOrMore) {
    LoopLag lag(0.01);
    lag.record(-0.002);
    lag.record(0);
    lag.record(0.0049);  // jitter
    lag.record(0.005);
    lag.record(0.035);
    lag.record(std::nan(""));
    EXPECT_EQ(lag.periods(), 6u);
    EXPECT_EQ(lag.late(), 2u);
    EXPECT_NEAR(lag.worst_late_periods(), 3.5, 1e-9);
    EXPECT_NEAR(lag.recent_late_share(), 2.0 / 6.0, 1e-9);
}

// This test verifies that the loop is behind only over a full window with enough late periods,
// and that the recent share forgets what left the window while the run's counters do not.
TEST(LoopLagTest, BehindOverAFullWindowAndRecovers) {
    LoopLag lag(0.0025, LoopLagConfig{10, 0.2});
    for (int i = 0; i < 5; ++i) {
        lag.record(0.01);
    }
    EXPECT_FALSE(lag.behind());  // half a window: too few periods to say
    for (int i = 0; i < 5; ++i) {
        lag.record(0);
    }
    EXPECT_TRUE(lag.behind());
    EXPECT_NEAR(lag.recent_late_share(), 0.5, 1e-9);
    for (int i = 0; i < 4; ++i) {
        lag.record(0);
    }
    EXPECT_NEAR(lag.recent_late_share(), 0.1, 1e-9);  // one late period left in the window
    EXPECT_FALSE(lag.behind());
    EXPECT_EQ(lag.late(), 5u);
    EXPECT_EQ(lag.periods(), 14u);
}

// This test verifies that a nonsense period is taken as one second rather than dividing by zero.
TEST(LoopLagTest, NonsensePeriodIsOneSecond) {
    LoopLag lag(0);
    EXPECT_DOUBLE_EQ(lag.period_s(), 1.0);
    lag.record(2.5);
    EXPECT_NEAR(lag.worst_late_periods(), 2.5, 1e-9);
}

}  // namespace
}  // namespace carma
