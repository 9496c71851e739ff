// `carma replay`'s warning when the daemon fell behind its period while the trace ran.

#include "cli/views/loop_lag_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::cli {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json status(double periods, double late, double worst = 0) {
    return json{{"time_scale", 400},
                {"loop",
                 {{"period_s", 0.0025},
                  {"periods", periods},
                  {"late_periods", late},
                  {"recent_late_share", 0},
                  {"worst_late_periods", worst},
                  {"behind", false}}}};
}

// This test verifies that a replay during which a tenth or more of the daemon's periods ended
// late is told so, with the share, the period, the time scale and what to do; the periods
// before the replay do not count.
TEST(ReplayLagTest, WarnsWhenTheDaemonFellBehindDuringTheReplay) {
    const auto warning = replay_lag_warning(status(1000, 900), status(11000, 3900, 12.5));
    ASSERT_TRUE(warning);
    EXPECT_THAT(*warning, HasSubstr("30 % of its 10000 periods"));
    EXPECT_THAT(*warning, HasSubstr("2.5 ms each, time scale 400"));
    EXPECT_THAT(*warning, HasSubstr("the worst by 12.5 periods"));
    EXPECT_THAT(*warning, HasSubstr("lower --time-scale"));
}

// This test verifies that nothing is said when the daemon kept up, when the replay was too short
// to tell, or when the daemon is too old to report its loop.
TEST(ReplayLagTest, SilentWhenItKeptUpOrCannotTell) {
    EXPECT_FALSE(replay_lag_warning(status(0, 0), status(10000, 999)));  // under a tenth
    EXPECT_FALSE(replay_lag_warning(status(0, 0), status(50, 50)));      // too few periods
    EXPECT_FALSE(replay_lag_warning(json{{"time_scale", 400}}, status(10000, 5000)));
    EXPECT_FALSE(replay_lag_warning(json(), json()));
    EXPECT_FALSE(replay_lag_warning(status(0, 0), json{{"loop", "odd"}}));
}

}  // namespace
}  // namespace carma::cli
