// The cumulative histogram behind /metrics' wait and run times.

#include "core/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies Prometheus' semantics: a value counts in every bucket whose bound is at or
// above it (a value equal to a bound is in that bucket), count and sum take every value, and a
// value above every bound counts only in +Inf (count).
TEST(HistogramTest, BucketsAreCumulativeAndBoundsInclusive) {
    Histogram h({1, 10, 60});
    for (double v : {0.5, 1.0, 1.5, 10.0, 59.0, 61.0, 1000.0}) {
        h.observe(v);
    }
    EXPECT_EQ(h.cumulative(), (std::vector<std::uint64_t>{2, 4, 5}));
    EXPECT_EQ(h.count(), 7U);
    EXPECT_DOUBLE_EQ(h.sum(), 0.5 + 1 + 1.5 + 10 + 59 + 61 + 1000);
}

// This test verifies that NaN is not counted and a negative duration counts as 0.
TEST(HistogramTest, NanIsIgnoredAndNegativesCountAsZero) {
    Histogram h({1});
    h.observe(std::numeric_limits<double>::quiet_NaN());
    h.observe(-5);
    EXPECT_EQ(h.count(), 1U);
    EXPECT_EQ(h.cumulative(), (std::vector<std::uint64_t>{1}));
    EXPECT_DOUBLE_EQ(h.sum(), 0);
}

// This test verifies that the duration buckets ascend from a second to days.
TEST(HistogramTest, DurationBucketsAscend) {
    const std::vector<double> b = duration_buckets_s();
    ASSERT_FALSE(b.empty());
    EXPECT_EQ(b.front(), 1);
    EXPECT_GE(b.back(), 86400);
    EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

}  // namespace
}  // namespace carma
