#include "core/energy_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace carma {
namespace {

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// This test verifies that a GPU's energy goes to its attempts by their share of its activity:
// 0.6 and 0.2 of 800 J are 600 J and 200 J.
TEST(EnergySplitTest, SharesByActivity) {
    const std::vector<std::optional<double>> activity = {0.6, 0.2};
    const std::vector<double> shares = split_gpu_energy(800, activity);
    ASSERT_EQ(shares.size(), 2u);
    EXPECT_DOUBLE_EQ(shares[0], 600);
    EXPECT_DOUBLE_EQ(shares[1], 200);
}

// This test verifies that processes outside any attempt keep their share: with 0.5 of activity
// foreign, an attempt at 0.5 gets half the energy and the rest is not attributed.
TEST(EnergySplitTest, ForeignActivityKeepsItsShare) {
    const std::vector<std::optional<double>> activity = {0.5};
    const std::vector<double> shares = split_gpu_energy(1000, activity, 0.5);
    ASSERT_EQ(shares.size(), 1u);
    EXPECT_DOUBLE_EQ(shares[0], 500);
}

// This test verifies the equal fallback: when any attempt's activity is unknown (a backend that
// cannot tell processes apart), every attempt on the GPU gets the same share, and foreign
// activity, which cannot be weighed against unknowns, takes nothing.
TEST(EnergySplitTest, UnknownActivitySplitsEqually) {
    const std::vector<std::optional<double>> activity = {0.9, std::nullopt, 0.1};
    const std::vector<double> shares = split_gpu_energy(300, activity, 0.4);
    ASSERT_EQ(shares.size(), 3u);
    for (double s : shares) {
        EXPECT_DOUBLE_EQ(s, 100);
    }
    const std::vector<std::optional<double>> nan = {std::numeric_limits<double>::quiet_NaN(),
                                                    0.5};
    const std::vector<double> halves = split_gpu_energy(300, nan);
    EXPECT_DOUBLE_EQ(halves[0], 150);
    EXPECT_DOUBLE_EQ(halves[1], 150);
}

// This test verifies zero activity: attempts that hold a GPU with nothing active (all starting
// up) share its (idle) energy equally; one idle beside a busy one gets nothing; and idle
// attempts beside a busy foreign process get nothing either.
TEST(EnergySplitTest, ZeroActivity) {
    const std::vector<std::optional<double>> idle = {0.0, 0.0};
    const std::vector<double> equal = split_gpu_energy(100, idle);
    EXPECT_DOUBLE_EQ(equal[0], 50);
    EXPECT_DOUBLE_EQ(equal[1], 50);

    const std::vector<std::optional<double>> one_busy = {0.0, 0.7};
    const std::vector<double> shares = split_gpu_energy(100, one_busy);
    EXPECT_DOUBLE_EQ(shares[0], 0);
    EXPECT_DOUBLE_EQ(shares[1], 100);

    const std::vector<double> beside_foreign = split_gpu_energy(100, idle, 0.3);
    EXPECT_DOUBLE_EQ(sum(beside_foreign), 0);
}

// This test verifies that a GPU with no attempt attributes nothing, and that no energy, energy
// that went back (a counter that restarted) or garbage gives zero shares.
TEST(EnergySplitTest, NothingToShare) {
    EXPECT_TRUE(split_gpu_energy(500, {}).empty());
    EXPECT_TRUE(split_gpu_energy(500, {}, 0.8).empty());
    const std::vector<std::optional<double>> activity = {0.5, 0.5};
    for (double bad : {0.0, -20.0, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()}) {
        const std::vector<double> shares = split_gpu_energy(bad, activity);
        ASSERT_EQ(shares.size(), 2u);
        EXPECT_EQ(sum(shares), 0) << bad;
    }
}

// This test verifies that activities outside 0..1 are clamped (a driver's percentage over 100),
// and that without foreign activity the shares add up to the whole energy.
TEST(EnergySplitTest, ClampsAndConserves) {
    const std::vector<std::optional<double>> activity = {1.7, 0.25, -0.3, 0.5};
    const std::vector<double> shares = split_gpu_energy(1750, activity);
    ASSERT_EQ(shares.size(), 4u);
    EXPECT_DOUBLE_EQ(shares[0], 1000);  // 1.0 of 1.75
    EXPECT_DOUBLE_EQ(shares[1], 250);
    EXPECT_DOUBLE_EQ(shares[2], 0);
    EXPECT_DOUBLE_EQ(shares[3], 500);
    EXPECT_DOUBLE_EQ(sum(shares), 1750);
}

}  // namespace
}  // namespace carma
