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

WorldConfig composed(WorldKind kind, WorldCompose compose, std::uint64_t seed = 1) {
    return WorldConfig{kind, 0, 0, seed, compose};
}

// The device model's speed of task i among `tasks` under `mode`: what the composes must not be.
double model_speed(const std::vector<WorldTask>& tasks, std::size_t i, SharingMode mode) {
    double summed = 0;
    for (const WorldTask& t : tasks) {
        summed += t.util;
    }
    return task_speed(tasks[i].util, summed, slowdown_params(mode));
}

// Expects every task's speed to be off the device model's under both sharing modes.
void expect_not_the_model(const World& w, const std::vector<WorldTask>& tasks) {
    const auto s = speeds_of(w, tasks);
    for (SharingMode mode : {SharingMode::Mps, SharingMode::Timeslice}) {
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            EXPECT_GT(std::abs(s[i] - model_speed(tasks, i, mode)), 0.02)
                << "task " << i << " under " << to_string(mode) << ": " << s[i];
        }
    }
}

// Pairs for the pairwise tests: one measured pair, (0.3, 0.6) at 0.8 and 0.9, and one bin whose
// draws are all its mean, 0.7.
MeasuredPairs one_pair_fixed_bin() {
    MeasuredPairs m;
    m.points.push_back({0.3, 0.6, 0.8});
    m.points.push_back({0.6, 0.3, 0.9});
    m.bins.push_back({0.0, 2.0, 0.7, 0.0});
    return m;
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

// This test verifies an MPS share's SM cap (issue 43): a task capped at half the SMs that alone
// would use 0.8 of them runs at 0.5/0.8 of its pace, alone too; beside another, the other sees
// only its capped use (0.5), and the capped task runs at the model's speed for that use times
// its cap factor. A cap above the task's use changes nothing.
TEST(WorldTest, AnMpsShareRunsAtMostAtItsShareOfTheSms) {
    const World w(WorldConfig{}, SharingMode::Mps);
    const auto p = slowdown_params(SharingMode::Mps);
    EXPECT_DOUBLE_EQ(speeds_of(w, {{1, 0.8, 0, 0, 0, 0.5}})[0], 0.5 / 0.8);
    const auto s = speeds_of(w, {{1, 0.8, 0, 0, 0, 0.5}, {2, 0.7}});
    EXPECT_DOUBLE_EQ(s[0], task_speed(0.5, 1.2, p) * 0.5 / 0.8);
    EXPECT_DOUBLE_EQ(s[1], task_speed(0.7, 1.2, p));
    EXPECT_EQ(speeds_of(w, {{1, 0.3, 0, 0, 0, 0.5}, {2, 0.7}}), speeds_of(w, {{1, 0.3}, {2, 0.7}}));
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

// This test verifies the compose setting's names: each parses back from its name, a bad one names
// itself and the valid ones, and describe() names any compose but the default.
TEST(WorldTest, ComposeIsParsedAndNamed) {
    for (WorldCompose c :
         {WorldCompose::Model, WorldCompose::Pairwise, WorldCompose::Bottleneck}) {
        EXPECT_EQ(*parse_world_compose(to_string(c)), c);
    }
    auto bad = parse_world_compose("roofline");
    ASSERT_FALSE(bad);
    for (const char* word : {"roofline", "model", "pairwise", "bottleneck"}) {
        EXPECT_NE(bad.error().message.find(word), std::string::npos) << word;
    }
    EXPECT_EQ(WorldConfig{}.compose, WorldCompose::Model);
    EXPECT_EQ(describe(WorldConfig{WorldKind::Measured, 0.25, 0, 1, WorldCompose::Pairwise}),
              "measured+compose pairwise+bias 0.25");
    EXPECT_EQ(describe(composed(WorldKind::Model, WorldCompose::Bottleneck)),
              "model+compose bottleneck");
    EXPECT_EQ(describe(composed(WorldKind::Model, WorldCompose::Model)), "model");
}

// This test verifies that compose model is the world as it was: the device model for the kind
// model (the activity profile plays no part) and the model plus noise for unknown measured sets.
TEST(WorldTest, ComposeModelIsUnchanged) {
    const std::vector<WorldTask> gpu{{1, 0.9, 0.85, 0.3, 0.4}, {2, 0.7, 0.6, 0.2, 0.45},
                                     {3, 0.5, 0.4, 0.1, 0.3}};
    for (SharingMode mode : {SharingMode::Mps, SharingMode::Timeslice}) {
        const World w(composed(WorldKind::Model, WorldCompose::Model), mode);
        const auto s = speeds_of(w, gpu);
        for (std::size_t i = 0; i < gpu.size(); ++i) {
            EXPECT_DOUBLE_EQ(s[i], model_speed(gpu, i, mode));
        }
    }
    const World plain(WorldConfig{WorldKind::Measured, 0, 0, 5}, SharingMode::Mps);
    const World named(composed(WorldKind::Measured, WorldCompose::Model, 5), SharingMode::Mps);
    EXPECT_EQ(speeds_of(plain, gpu), speeds_of(named, gpu));
}

// This test verifies that compose pairwise runs a measured pair at its measured speed (the Lucid
// row of MeasuredPairRunsAtItsMeasuredSpeed), for either kind.
TEST(WorldTest, PairwiseMeasuredPairIsTheMeasuredSpeed) {
    for (WorldKind kind : {WorldKind::Model, WorldKind::Measured}) {
        const World w(composed(kind, WorldCompose::Pairwise), SharingMode::Mps);
        const auto s = speeds_of(w, {{11, 0.45409}, {12, 0.58667}});
        EXPECT_DOUBLE_EQ(s[0], 0.983) << to_string(kind);
        EXPECT_DOUBLE_EQ(s[1], 1.0) << to_string(kind);
    }
}

// This test verifies compose pairwise away from the measurements: an unmeasured pair runs at a
// draw from its summed-utilisation bin (here all draws are the mean, 0.7), three tasks at the
// product of their pair speeds (0.8 * 0.7 for the task of the measured pair's 0.8 side), and
// neither is the device model's speed.
TEST(WorldTest, PairwiseMultipliesPairSpeeds) {
    const MeasuredPairs m = one_pair_fixed_bin();
    for (WorldKind kind : {WorldKind::Model, WorldKind::Measured}) {
        const World w(composed(kind, WorldCompose::Pairwise), SharingMode::Mps, &m);
        const std::vector<WorldTask> unmeasured{{1, 0.3}, {3, 0.9}};
        EXPECT_EQ(speeds_of(w, unmeasured), (std::vector<double>{0.7, 0.7}));
        expect_not_the_model(w, unmeasured);
        const std::vector<WorldTask> three{{1, 0.3}, {2, 0.6}, {3, 0.9}};
        const auto s = speeds_of(w, three);
        EXPECT_DOUBLE_EQ(s[0], 0.8 * 0.7);
        EXPECT_DOUBLE_EQ(s[1], 0.9 * 0.7);
        EXPECT_DOUBLE_EQ(s[2], 0.7 * 0.7);
        expect_not_the_model(w, three);
    }
}

// This test verifies that pairwise draws are a function of the seed and the pair: the same
// whatever the order on the GPU and in another world of the same seed, other under another seed,
// and across many pairs scattered around the bin's mean at about its sd.
TEST(WorldTest, PairwiseIsDeterministicAndOrderFree) {
    MeasuredPairs m;  // one far-away pair: everything else is drawn
    m.points.push_back({0.01, 0.01, 0.5});
    m.bins.push_back({0.0, 2.0, 0.7, 0.1});
    const World a(composed(WorldKind::Measured, WorldCompose::Pairwise, 1), SharingMode::Mps, &m);
    const World again(composed(WorldKind::Measured, WorldCompose::Pairwise, 1),
                      SharingMode::Timeslice, &m);
    const World b(composed(WorldKind::Measured, WorldCompose::Pairwise, 2), SharingMode::Mps, &m);
    const auto s = speeds_of(a, {{1, 0.9}, {2, 0.8}, {3, 0.4}});
    const auto t = speeds_of(a, {{3, 0.4}, {1, 0.9}, {2, 0.8}});
    EXPECT_DOUBLE_EQ(s[0], t[1]);
    EXPECT_DOUBLE_EQ(s[1], t[2]);
    EXPECT_DOUBLE_EQ(s[2], t[0]);
    EXPECT_EQ(speeds_of(again, {{1, 0.9}, {2, 0.8}, {3, 0.4}}), s);
    EXPECT_NE(speeds_of(b, {{1, 0.9}, {2, 0.8}, {3, 0.4}})[0], s[0]);
    double sum = 0, sum2 = 0;
    const int n = 400;
    for (int k = 0; k < n; ++k) {
        const double d = speeds_of(a, {{100u + static_cast<unsigned>(k), 0.9}, {7, 0.9}})[0] - 0.7;
        sum += d;
        sum2 += d * d;
    }
    const double mean = sum / n;
    EXPECT_NEAR(mean, 0.0, 0.03);
    EXPECT_NEAR(std::sqrt(sum2 / n - mean * mean), 0.1, 0.02);
}

// This test verifies that under compose bottleneck tasks whose demands fit the GPU (every
// resource's load below 1) run at full speed, however busy each one is.
TEST(WorldTest, BottleneckLightTasksRunAtFullSpeed) {
    const World w(composed(WorldKind::Model, WorldCompose::Bottleneck), SharingMode::Timeslice);
    // SM activity 0.9, occupancy 0.5, DRAM 0.6: all below 1.
    const auto s = speeds_of(w, {{1, 0.6, 0.5, 0.3, 0.2}, {2, 0.5, 0.4, 0.2, 0.4}});
    EXPECT_EQ(s, (std::vector<double>{1.0, 1.0}));
}

// This test verifies that under compose bottleneck three DRAM-heavy tasks are paced by the DRAM
// load: 1 / 1.35 each for equal demands; with unequal ones the bandwidth is shared max-min fairly
// (level 0.4 for demands 0.5, 0.45 and 0.2: speeds 0.8, 0.4/0.45 and 1), and a task without an
// activity profile demands its utilisation of SM activity.
TEST(WorldTest, BottleneckIsPacedByTheMostContendedResource) {
    const World w(composed(WorldKind::Model, WorldCompose::Bottleneck), SharingMode::Mps);
    const std::vector<WorldTask> equal{
        {1, 0.4, 0.3, 0.1, 0.45}, {2, 0.4, 0.3, 0.1, 0.45}, {3, 0.4, 0.3, 0.1, 0.45}};
    for (double speed : speeds_of(w, equal)) {
        EXPECT_NEAR(speed, 1.0 / 1.35, 1e-12);
    }
    expect_not_the_model(w, equal);
    const auto s =
        speeds_of(w, {{1, 0.4, 0.3, 0.1, 0.5}, {2, 0.4, 0.3, 0.1, 0.45}, {3, 0.4, 0.3, 0.1, 0.2}});
    EXPECT_NEAR(s[0], 0.8, 1e-12);
    EXPECT_NEAR(s[1], 0.4 / 0.45, 1e-12);
    EXPECT_DOUBLE_EQ(s[2], 1.0);
    // Unprofiled: SM activity 0.8 + 0.6 = 1.4, level 0.5: speeds 0.5/0.8 and 0.5/0.6.
    const auto u = speeds_of(w, {{1, 0.8}, {2, 0.6}});
    EXPECT_NEAR(u[0], 0.625, 1e-12);
    EXPECT_NEAR(u[1], 0.5 / 0.6, 1e-12);
}

// This test verifies that compose bottleneck is not the device model: three compute-heavy tasks
// and, in the measured world, an unmeasured pair run at their contended share; a measured pair
// still runs at its measured speed.
TEST(WorldTest, BottleneckIsNotTheModel) {
    const World model(composed(WorldKind::Model, WorldCompose::Bottleneck), SharingMode::Mps);
    const std::vector<WorldTask> three{
        {1, 0.9, 0.85, 0.3, 0.2}, {2, 0.8, 0.75, 0.3, 0.3}, {3, 0.7, 0.6, 0.2, 0.1}};
    expect_not_the_model(model, three);
    EXPECT_NEAR(speeds_of(model, three)[0], (1.0 / 3) / 0.85, 1e-12);  // SM activity 2.2
    MeasuredPairs m;  // one far-away pair: everything else is unmeasured
    m.points.push_back({0.01, 0.01, 0.5});
    m.bins.push_back({0.0, 2.0, 0.9, 0.1});
    const World measured(composed(WorldKind::Measured, WorldCompose::Bottleneck),
                         SharingMode::Mps, &m);
    const std::vector<WorldTask> pair{{1, 0.9, 0.85, 0.3, 0.2}, {2, 0.8, 0.75, 0.3, 0.3}};
    const auto s = speeds_of(measured, pair);
    EXPECT_NEAR(s[0], 0.5 / 0.85, 1e-12);  // SM activity 1.6, level 0.5
    EXPECT_NEAR(s[1], 0.5 / 0.75, 1e-12);
    expect_not_the_model(measured, pair);
    expect_not_the_model(measured, three);
    const World lucid(composed(WorldKind::Measured, WorldCompose::Bottleneck), SharingMode::Mps);
    const auto known =
        speeds_of(lucid, {{11, 0.45409, 0.4, 0.2, 0.1}, {12, 0.58667, 0.5, 0.2, 0.1}});
    EXPECT_DOUBLE_EQ(known[0], 0.983);
    EXPECT_DOUBLE_EQ(known[1], 1.0);
}

// This test verifies that the bias divides every collocated speed under every compose, and that
// a task alone runs at full speed under every compose.
TEST(WorldTest, BiasAppliesOnTopOfEveryCompose) {
    const std::vector<WorldTask> gpu{
        {1, 0.9, 0.85, 0.3, 0.4}, {2, 0.8, 0.7, 0.2, 0.45}, {3, 0.5, 0.4, 0.1, 0.3}};
    for (WorldKind kind : {WorldKind::Model, WorldKind::Measured}) {
        for (WorldCompose c : {WorldCompose::Pairwise, WorldCompose::Bottleneck}) {
            const World plain(composed(kind, c, 3), SharingMode::Mps);
            const World biased(WorldConfig{kind, 0.25, 0, 3, c}, SharingMode::Mps);
            const auto a = speeds_of(plain, gpu);
            const auto b = speeds_of(biased, gpu);
            for (std::size_t i = 0; i < gpu.size(); ++i) {
                EXPECT_NEAR(b[i], a[i] / 1.25, 1e-12) << to_string(c) << " task " << i;
                EXPECT_GT(a[i], 0.0);
                EXPECT_LE(a[i], 1.0);
            }
            EXPECT_DOUBLE_EQ(speeds_of(biased, {gpu[0]})[0], 1.0);
        }
    }
}

}  // namespace
}  // namespace carma::model
