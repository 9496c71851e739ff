// When a GPU is unhealthy (daemon/gpu_health.h), without a daemon.

#include <gtest/gtest.h>

#include "daemon/gpu_health.h"

namespace carma::daemon {
namespace {

TEST(GpuHealth, AFewMissingReadsInARowMakeItUnhealthyOnce) {
    GpuHealth h;
    for (int i = 1; i < kUnhealthyAfterMissing; ++i) {
        EXPECT_FALSE(h.note_missing("timeout", false));
        EXPECT_FALSE(h.unhealthy);
    }
    EXPECT_TRUE(h.note_missing("timeout", false));
    EXPECT_TRUE(h.unhealthy);
    EXPECT_FALSE(h.note_missing("still out", false)) << "said once, not on every read";
    EXPECT_EQ(h.missing, kUnhealthyAfterMissing + 1);
    EXPECT_EQ(h.last_error, "still out");
}

TEST(GpuHealth, AGoodReadBetweenMissingOnesStartsTheCountAgain) {
    GpuHealth h;
    for (int i = 1; i < kUnhealthyAfterMissing; ++i) {
        h.note_missing("timeout", false);
    }
    EXPECT_FALSE(h.note_answered()) << "it was not unhealthy";
    EXPECT_EQ(h.missing, 0);
    EXPECT_TRUE(h.last_error.empty());
    EXPECT_FALSE(h.note_missing("timeout", false));
}

TEST(GpuHealth, AnUnhealthyGpuThatAnswersIsHealthyAgain) {
    GpuHealth h;
    for (int i = 0; i < kUnhealthyAfterMissing; ++i) {
        h.note_missing("timeout", false);
    }
    EXPECT_TRUE(h.note_answered());
    EXPECT_FALSE(h.unhealthy);
    EXPECT_EQ(h.missing, 0);
}

TEST(GpuHealth, AGpuLeftAloneIsCountedButNeverUnhealthy) {
    GpuHealth h;
    for (int i = 0; i < 2 * kUnhealthyAfterMissing; ++i) {
        EXPECT_FALSE(h.note_missing("MIG", true));
    }
    EXPECT_FALSE(h.unhealthy);
}

TEST(SampleProblem, AnErrorOrAnOldReadingIsMissingScaledByTheTimeScale) {
    device::GpuSample s;
    EXPECT_FALSE(sample_problem(s, 1));
    s.age_s = 2;
    EXPECT_FALSE(sample_problem(s, 1)) << "2 periods old";
    EXPECT_EQ(sample_problem(s, 60).value_or(""), "its newest reading is 2.0 s old");
    s.error = "NVML: GPU is lost";
    EXPECT_EQ(sample_problem(s, 1).value_or(""), "NVML: GPU is lost");
}

}  // namespace
}  // namespace carma::daemon
