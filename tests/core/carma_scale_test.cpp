// `carma` with a long queue: a round predicts per kind of task, not per task, and its shortcuts
// give the answers the long way would.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "builders.h"
#include "core/carma.h"
#include "core/scheduler.h"
#include "core/speed_correction.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;

// Every task on a GPU runs at 1 / max(1, summed activity); `calls` counts the predictions.
SpeedPredictor counting_model(std::shared_ptr<int> calls) {
    return [calls](std::span<const double> activities, std::span<double> speeds) {
        ++*calls;
        double total = 0;
        for (double a : activities) {
            total += a;
        }
        for (std::size_t i = 0; i < activities.size(); ++i) {
            speeds[i] = 1.0 / std::max(1.0, total);
        }
    };
}

// This test verifies that a round with 200 waiting tasks of two kinds predicts per kind and GPU,
// not per task, and still turns every one of them down. The head (30,000 MiB) waits for GPU 0's
// resident to end at 100 s; each task behind it fits in memory on both GPUs, but on GPU 0 it
// would slow the resident past the head's start, and on GPU 1 sharing gains too little
// (min_gain 0.9), so each costs predictions on both GPUs. Before: about 3 per task (600).
TEST(CarmaScaleTest, PredictsPerKindOfTaskNotPerTask) {
    auto calls = std::make_shared<int>(0);
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma-longfirst");  // the head leads by being longest
    cfg.placement.predict_speeds = counting_model(calls);
    cfg.carma.min_gain = 0.9;
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("head").Knows(30000, 3600, 0.3), 0);
    for (TaskId id = 2; id < 202; ++id) {
        s.enqueue(id, MakeTask("small").Knows(5000, 500, id % 2 == 0 ? 0.9 : 0.8), 0);
    }
    const std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 20000, 100, 0.3),
                                       MakeGpu(1).Resident(11, 30000, 1000, 0.3)};
    const StepResult r = s.step(gpus, 0);
    EXPECT_TRUE(r.placed.empty());
    EXPECT_EQ(r.pending_task, 1);
    EXPECT_EQ(s.waiting_count(), 201u);
    // Per GPU: its residents alone, then with each of the two activities.
    EXPECT_LE(*calls, 6);
    // Explanations are per task, for the first few: every one of those is examined.
    ASSERT_GE(r.waiting.size(), 2u);
    EXPECT_NE(r.waiting[1].reason.find("would add"), std::string::npos) << r.waiting[1].reason;
}

// This test verifies that a GPU's cached predictions answer for the GPU as it is: after a task
// joins its residents, the same question gets the new answer even when nobody cleared the cache.
TEST(CarmaScaleTest, PredictionCacheFollowsTheGpu) {
    auto calls = std::make_shared<int>(0);
    const SpeedPredictor model = counting_model(calls);
    GpuPredictions cache;
    GpuView gpu = MakeGpu(0).Resident(10, 10000, 100, 0.5);
    const SharingPrediction first = predict_sharing(gpu, 0.6, model, &cache);
    EXPECT_DOUBLE_EQ(first.gain, 2 / 1.1 - 1);
    EXPECT_EQ(predict_sharing(gpu, 0.6, model, &cache).gain, first.gain);
    const int after_two = *calls;
    EXPECT_EQ(after_two, 2);  // the residents alone, then with 0.6; the repeat is a hit
    gpu.residents.push_back(ResidentView{11, 0.4, 5000, 200});
    const SharingPrediction second = predict_sharing(gpu, 0.6, model, &cache);
    // Residents 0.5 + 0.4 = 0.9 run at speed 1 (sum 2); with 0.6 all three run at 1/1.5.
    EXPECT_DOUBLE_EQ(second.gain, 3 / 1.5 - 2);
    EXPECT_GT(*calls, after_two);
}

// This test verifies the moment the order next changes by itself when the task that ages next
// leaves the queue, and when the clock is read earlier than before.
TEST(CarmaScaleTest, NextOrderChangeAfterRemovalAndEarlierClock) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma");
    cfg.carma.max_wait_s = 100;
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("a").Knows(1000, 60), 0);
    s.enqueue(2, MakeTask("b").Knows(1000, 60), 10);
    s.enqueue(3, MakeTask("c").Knows(1000, 60), 20);
    EXPECT_EQ(s.next_order_change(50), 100);
    EXPECT_EQ(s.next_order_change(105), 110);
    EXPECT_TRUE(s.cancel(2));
    EXPECT_EQ(s.next_order_change(105), 120);
    EXPECT_EQ(s.next_order_change(5), 100);
    EXPECT_TRUE(s.cancel(3));
    EXPECT_EQ(s.next_order_change(150), std::nullopt);
    s.enqueue(4, MakeTask("d").Knows(1000, 60), 200);
    EXPECT_EQ(s.next_order_change(150), 300);
}

// The head (activity 0.6) beside a resident of 0.6 on the only GPU: the counting model says each
// runs at 1 / 1.2, a gain of 2 / 1.2 - 1 = 0.67 in summed progress, under min_gain 0.8.
struct SharedGpuRound {
    std::shared_ptr<int> calls = std::make_shared<int>(0);
    std::shared_ptr<SpeedCorrection> correction = std::make_shared<SpeedCorrection>("mps");
    std::vector<GpuView> gpus = {MakeGpu(0).Resident(10, 10000, 1000, 0.6)};

    SchedulerConfig config() const {
        SchedulerConfig cfg;
        cfg.policy = *find_policy("carma");
        cfg.placement.predict_speeds = corrected_predictor(counting_model(calls), correction);
        cfg.carma.min_gain = 0.8;
        return cfg;
    }
};

// This test verifies that with a predictor version the predictions of one round serve the next
// while the version stays (no call to the predictor for the same GPUs), and that without one
// every round predicts afresh.
TEST(CarmaScaleTest, PredictionsKeptOverRoundsWhileTheVersionStays) {
    for (const bool versioned : {true, false}) {
        SharedGpuRound world;
        SchedulerConfig cfg = world.config();
        if (versioned) {
            cfg.placement.predictor_version = [] { return std::uint64_t{7}; };
        }
        Scheduler s(cfg);
        s.enqueue(1, MakeTask("head").Knows(5000, 600, 0.6), 0);
        EXPECT_TRUE(s.step(world.gpus, 0).placed.empty());
        const int first = *world.calls;
        EXPECT_GT(first, 0);
        EXPECT_TRUE(s.step(world.gpus, 1).placed.empty());
        if (versioned) {
            EXPECT_EQ(*world.calls, first);
        } else {
            EXPECT_EQ(*world.calls, 2 * first);
        }
    }
}

// This test verifies that a correction learned between rounds reaches the next round's decision
// through the correction's version: three observations that the GPU shares better than predicted
// (k = 0.5) lift both speeds to 1, a gain of 1, and the head that waited is placed. A version that
// does not move keeps the old answer (the kept predictions are really used).
TEST(CarmaScaleTest, CorrectionLearnedBetweenRoundsChangesTheKeptAnswer) {
    for (const bool follows : {true, false}) {
        SharedGpuRound world;
        SchedulerConfig cfg = world.config();
        cfg.placement.predictor_version =
            follows ? corrected_predictor_version(world.correction)
                    : PredictorVersion([] { return std::uint64_t{0}; });
        Scheduler s(cfg);
        s.enqueue(1, MakeTask("head").Knows(5000, 600, 0.6), 0);
        const StepResult before = s.step(world.gpus, 0);
        EXPECT_TRUE(before.placed.empty());
        EXPECT_EQ(before.pending_task, 1);
        for (int i = 0; i < 3; ++i) {
            world.correction->add("other|1", "mps/medium", 0.5);
        }
        const StepResult after = s.step(world.gpus, 1);
        if (follows) {
            ASSERT_EQ(after.placed.size(), 1u);
            EXPECT_EQ(after.placed[0].task, 1);
        } else {
            EXPECT_TRUE(after.placed.empty());
        }
    }
}

}  // namespace
}  // namespace carma
