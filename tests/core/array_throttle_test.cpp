// sbatch's --array=...%N (issue 45): the spelling, and which held members are let in.

#include "core/array_throttle.h"

#include <gtest/gtest.h>

#include "core/controls.h"

namespace carma {
namespace {

// This test verifies that "0-5%2" reads as six indices run at most two at once (before, the
// whole "0-5%2" was taken for an index and refused with a garbled message), and that a bad
// throttle is named as one.
TEST(ArrayThrottleTest, PercentIsTheThrottle) {
    auto spec = parse_array_spec("0-5%2");
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->indices, (std::vector<int>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(spec->max_running, 2);
    EXPECT_EQ(parse_array_spec("1,3,8-9")->max_running, 0);
    EXPECT_EQ(*parse_array_indices("0-3%1"), (std::vector<int>{0, 1, 2, 3}));
    for (const char* bad : {"0-5%", "0-5%0", "0-5%x", "0-5%-1"}) {
        auto r = parse_array_spec(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("throttle"), std::string::npos) << r.error().message;
    }
}

// This test verifies that members are let in lowest index first up to the throttle, counting
// those already let in, and that without a throttle all are.
TEST(ArrayThrottleTest, AdmitsUpToTheThrottleInIndexOrder) {
    const std::vector<HeldMember> held = {{14, 4}, {12, 2}, {13, 3}, {15, 5}};
    EXPECT_EQ(members_to_admit(2, 0, held), (std::vector<TaskId>{12, 13}));
    EXPECT_EQ(members_to_admit(2, 1, held), (std::vector<TaskId>{12}));
    EXPECT_TRUE(members_to_admit(2, 2, held).empty());
    EXPECT_TRUE(members_to_admit(2, 3, held).empty());  // over after a requeue: nothing more
    EXPECT_EQ(members_to_admit(0, 9, held).size(), 4u);
    EXPECT_EQ(members_to_admit(10, 1, held).size(), 4u);
    EXPECT_NE(throttle_reason(2).find("at most 2 members"), std::string::npos);
}

}  // namespace
}  // namespace carma
