// core/carma_probe.h: whether `carma` would start one task on GPUs as given, as a round would.

#include "core/carma_probe.h"

#include <vector>

#include <gtest/gtest.h>

#include "builders.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;
using testing::simple_model;

// This test verifies the answers that decide a preemption: an idle GPU takes a task of known
// need, unless a warm-up lock holds it; a task of unknown need wants an idle GPU; and a GPU with
// two heavy residents turns a heavy task down on its predicted gain (every task runs at
// 1 / max(1, summed activity): 2 / 1.8 before, 3 / 2.7 after, no gain) although its memory
// would fit, while with one of them gone it takes it.
TEST(CarmaProbeTest, WouldStartAsARoundWould) {
    const PolicySpec policy = *find_policy("carma");
    PlacementConfig pc;
    pc.predict_speeds = simple_model;
    const CarmaConfig cc;
    const TaskSpec heavy = MakeTask().Knows(4000, 3600, 0.9);
    const TaskSpec unknown = MakeTask();

    std::vector<GpuView> idle{MakeGpu(0)};
    EXPECT_TRUE(carma_would_start(policy, heavy, idle, pc, cc));
    EXPECT_TRUE(carma_would_start(policy, unknown, idle, pc, cc));
    idle[0].locked = true;
    EXPECT_FALSE(carma_would_start(policy, heavy, idle, pc, cc));

    const std::vector<GpuView> two{
        MakeGpu(0).Resident(1, 4000, 3600, 0.9).Resident(2, 4000, 3600, 0.9)};
    EXPECT_FALSE(carma_would_start(policy, heavy, two, pc, cc));
    EXPECT_FALSE(carma_would_start(policy, unknown, two, pc, cc));
    const std::vector<GpuView> one{MakeGpu(0).Resident(1, 4000, 3600, 0.9)};
    EXPECT_TRUE(carma_would_start(policy, heavy, one, pc, cc));
    EXPECT_FALSE(carma_would_start(policy, unknown, one, pc, cc));
}

}  // namespace
}  // namespace carma
