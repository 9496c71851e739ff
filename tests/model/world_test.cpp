#include "model/world.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "model/constants.h"

namespace carma::model {
namespace {

std::vector<double> speeds_of(const World& w, const std::vector<WorldTask>& tasks) {
    std::vector<double> out(tasks.size(), 0.0);
    w.speeds(tasks, out);
    return out;
}

// This test verifies that the model world is the device model and that a task alone always runs
// at full speed, whatever the world.
TEST(WorldTest, ModelWorldIsTheDeviceModel) {
    const World w(WorldConfig{}, SharingMode::Timeslice);
    const auto p = slowdown_params(SharingMode::Timeslice);
    const auto s = speeds_of(w, {{1, 0.9}, {2, 0.7}});
    EXPECT_DOUBLE_EQ(s[0], task_speed(0.9, 1.6, p));
    EXPECT_DOUBLE_EQ(s[1], task_speed(0.7, 1.6, p));
    for (WorldKind kind : {WorldKind::Model, WorldKind::Measured}) {
        const World biased(WorldConfig{kind, 0.5, 0.1, 7}, SharingMode::Mps);
        EXPECT_DOUBLE_EQ(speeds_of(biased, {{1, 0.95}})[0], 1.0);
    }
}

// This test verifies the bias: every collocated task runs at the unbiased speed / (1 + F), also
// where the unbiased world predicts no slowdown at all.
TEST(WorldTest, BiasDividesEveryCollocatedSpeed) {
    for (WorldKind kind : {WorldKind::Model, WorldKind::Measured}) {
        const World plain(WorldConfig{kind, 0, 0, 3}, SharingMode::Mps);
        const World biased(WorldConfig{kind, 0.25, 0, 3}, SharingMode::Mps);
        for (const std::vector<WorldTask>& gpu :
             {std::vector<WorldTask>{{1, 0.1}, {2, 0.1}},
              std::vector<WorldTask>{{1, 0.9}, {2, 0.8}, {3, 0.5}}}) {
            const auto a = speeds_of(plain, gpu);
            const auto b = speeds_of(biased, gpu);
            for (std::size_t i = 0; i < gpu.size(); ++i) {
                EXPECT_NEAR(b[i], a[i] / 1.25, 1e-12) << to_string(kind) << " task " << i;
            }
        }
    }
}

// This test verifies that a measured pair runs at its measured speed (a row of the Lucid file:
// MobileNetV3 at 45.409 % beside ResNet18 at 58.667 %, 0.983 and 1.034 -> clipped to 1), and that
// the embedded data are the whole file.
TEST(WorldTest, MeasuredPairRunsAtItsMeasuredSpeed) {
    const MeasuredPairs& m = MeasuredPairs::embedded();
    EXPECT_EQ(m.points.size(), 2u * 1388u);
    EXPECT_EQ(m.bins.size(), 9u);
    const World w(WorldConfig{WorldKind::Measured, 0, 0, 1}, SharingMode::Mps);
    const auto s = speeds_of(w, {{11, 0.45409}, {12, 0.58667}});
    EXPECT_DOUBLE_EQ(s[0], 0.983);
    EXPECT_DOUBLE_EQ(s[1], 1.0);
    // Not the device model: under MPS it predicts no slowdown for this light pair.
    EXPECT_NE(s[0], task_speed(0.45409, 0.45409 + 0.58667, slowdown_params(SharingMode::Mps)));
}

// This test verifies the fallback for unknown pairs: the device model plus noise at the bin's
// spread, the same for the same pair and seed whatever the order on the GPU, other for another
// seed.
TEST(WorldTest, UnknownPairIsTheModelWithDeterministicNoise) {
    MeasuredPairs m;  // one far-away pair: everything else is unknown
    m.points.push_back({0.01, 0.01, 0.5});
    m.bins.push_back({0.0, 2.0, 0.9, 0.1});
    const World a(WorldConfig{WorldKind::Measured, 0, 0, 1}, SharingMode::Mps, &m);
    const World b(WorldConfig{WorldKind::Measured, 0, 0, 2}, SharingMode::Mps, &m);
    const auto p = slowdown_params(SharingMode::Mps);
    const auto s1 = speeds_of(a, {{1, 0.9}, {2, 0.8}});
    const auto s2 = speeds_of(a, {{2, 0.8}, {1, 0.9}});
    EXPECT_DOUBLE_EQ(s1[0], s2[1]);
    EXPECT_DOUBLE_EQ(s1[1], s2[0]);
    const double model = task_speed(0.9, 1.7, p);
    EXPECT_NE(s1[0], model);
    EXPECT_LE(std::abs(s1[0] - model), 0.25 + 1e-12);  // within 2.5 sd
    EXPECT_NE(speeds_of(b, {{1, 0.9}, {2, 0.8}})[0], s1[0]);
    // Across many pairs the draws scatter around the model at about the bin's sd.
    double sum = 0, sum2 = 0;
    const int n = 400;
    for (int k = 0; k < n; ++k) {
        const auto s = speeds_of(a, {{100u + static_cast<unsigned>(k), 0.9}, {7, 0.9}});
        const double d = s[0] - task_speed(0.9, 1.8, p);
        sum += d;
        sum2 += d * d;
    }
    const double mean = sum / n;
    const double sd = std::sqrt(sum2 / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.03);
    EXPECT_NEAR(sd, 0.1, 0.02);
}

// This test verifies memory peaks: the profile without noise; with noise, per attempt, within
// +-2.5 sd, the same for the same seed, task and attempt, and never beyond the GPU.
TEST(WorldTest, MemoryPeaksVaryAroundTheProfile) {
    const World exact(WorldConfig{WorldKind::Model, 0, 0, 1}, SharingMode::Mps);
    EXPECT_EQ(exact.peak_mib(10000, 3, 1, 40000), 10000);
    const World w(WorldConfig{WorldKind::Model, 0, 0.1, 1}, SharingMode::Mps);
    int differ = 0;
    for (int attempt = 1; attempt <= 50; ++attempt) {
        const MiB p = w.peak_mib(10000, 3, attempt, 40000);
        EXPECT_EQ(p, w.peak_mib(10000, 3, attempt, 40000));
        EXPECT_GE(p, 7500);
        EXPECT_LE(p, 12500);
        differ += p != 10000 ? 1 : 0;
    }
    EXPECT_GT(differ, 40);
    for (int attempt = 1; attempt <= 50; ++attempt) {
        EXPECT_LE(w.peak_mib(39000, 5, attempt, 40000), 40000);
    }
}

// This test verifies the settings' checks and names.
TEST(WorldTest, SettingsAreCheckedAndNamed) {
    EXPECT_EQ(*parse_world_kind("measured"), WorldKind::Measured);
    auto bad = parse_world_kind("real");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("model"), std::string::npos);
    EXPECT_FALSE(checked(WorldConfig{WorldKind::Model, -1, 0, 1}));
    EXPECT_FALSE(checked(WorldConfig{WorldKind::Model, 0, 0.9, 1}));
    EXPECT_EQ(describe(WorldConfig{WorldKind::Measured, 0.25, 0.1, 1}),
              "measured+bias 0.25+noise 0.1");
}

}  // namespace
}  // namespace carma::model
