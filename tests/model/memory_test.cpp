// Memory over a task's life and the out-of-memory rule (interference-model.md §8, §10(d,e,f)).

#include "model/memory.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/constants.h"

namespace carma::model {
namespace {

constexpr MiB kCapacity = kA100_40GB_UsableMiB;  // 40,441 MiB

ResidentMemory resident(TaskId task, double active_at, MiB peak, long order,
                        MiB context = kContextMiB, double ramp = kRampSeconds) {
    return ResidentMemory{task, active_at, context, peak, ramp, order};
}

// This test verifies the constants the memory model is built on: 40,441 MiB usable, a 600 MiB
// context, a 5 s linear ramp.
TEST(MemoryTest, ModelConstantsAreTheResearchValues) {
    EXPECT_EQ(kCapacity, 40441);
    EXPECT_EQ(kContextMiB, 600);
    EXPECT_DOUBLE_EQ(kRampSeconds, 5.0);
}

struct MemoryAtCase {
    double t;
    double mib;
};

// This test verifies the memory curve of one task: 0 before its first GPU activity, the context
// at activation, a linear ramp to the peak, flat at the peak afterwards.
TEST(MemoryTest, MemoryFollowsContextThenLinearRampThenPeak) {
    // Active at 10 s, context 600 MiB, peak 20,000 MiB over 5 s: slope (20,000 - 600) / 5 =
    // 3,880 MiB/s.
    const ResidentMemory r = resident(1, 10.0, 20000, 0);
    const std::vector<MemoryAtCase> table = {
        {0.0, 0.0},         // CPU-side start-up: nothing on the GPU
        {9.999, 0.0},       // just before activation
        {10.0, 600.0},      // the context jump
        {11.0, 4480.0},     // 600 + 3,880 * 1
        {12.5, 10300.0},    // 600 + 3,880 * 2.5 (half way: (600 + 20,000) / 2)
        {14.0, 16120.0},    // 600 + 3,880 * 4
        {15.0, 20000.0},    // ramp end: the peak
        {1000.0, 20000.0},  // the caching allocator keeps its peak
    };
    for (const MemoryAtCase& c : table) {
        EXPECT_NEAR(memory_at(r, c.t), c.mib, 1e-6) << "t=" << c.t;
    }
}

// This test verifies the degenerate curves: no ramp jumps straight to the peak, and a peak below
// the context never shows more than the peak.
TEST(MemoryTest, DegenerateRampsJumpToThePeak) {
    const ResidentMemory no_ramp = resident(1, 3.0, 8000, 0, 600, 0.0);
    EXPECT_EQ(memory_at(no_ramp, 2.9), 0.0);
    EXPECT_EQ(memory_at(no_ramp, 3.0), 8000.0);
    EXPECT_EQ(memory_at(no_ramp, 50.0), 8000.0);

    // mnist-like task: peak 400 MiB < 600 MiB context -> flat 400 from activation on.
    const ResidentMemory small = resident(2, 3.0, 400, 0);
    EXPECT_EQ(memory_at(small, 3.0), 400.0);
    EXPECT_EQ(memory_at(small, 5.5), 400.0);
    EXPECT_EQ(memory_at(small, 8.0), 400.0);
}

// This test verifies that the memory of a GPU is the sum of its residents' curves (memory is
// additive, §6.1).
TEST(MemoryTest, TotalMemoryIsTheSumOfResidents) {
    const std::vector<ResidentMemory> rs = {resident(1, 0.0, 10000, 0), resident(2, 20.0, 5000, 1)};
    EXPECT_EQ(total_memory_at(rs, 10.0), 10000.0);          // only the first, at its peak
    EXPECT_EQ(total_memory_at(rs, 20.0), 10000.0 + 600.0);  // second jumps to its context
    // Second at 22.5 s: 600 + (5,000 - 600) * 2.5 / 5 = 600 + 2,200 = 2,800.
    EXPECT_NEAR(total_memory_at(rs, 22.5), 12800.0, 1e-6);
    EXPECT_EQ(total_memory_at(rs, 100.0), 15000.0);
    EXPECT_EQ(total_memory_at(std::vector<ResidentMemory>{}, 5.0), 0.0);
}

// This test verifies the §10(f)4 scenario: 25,000 + 20,000 MiB on a 40,441 MiB GPU; the
// second-started task crashes during its ramp at the exact crossing time, the first never does.
TEST(MemoryTest, SecondStartedTaskCrashesAtTheExactCrossing) {
    // First: active at 8.2 s, peak 25,000 MiB reached at 13.2 s.
    // Second: active at 100 s, context 600, slope (20,000 - 600) / 5 = 3,880 MiB/s.
    // Sum during the second's ramp: 25,000 + 600 + 3,880 (t - 100) = 40,441
    //   -> 3,880 (t - 100) = 14,841 -> t - 100 = 3.825 -> t = 103.825 s (inside the ramp).
    const std::vector<ResidentMemory> rs = {resident(7, 8.2, 25000, 1),
                                            resident(9, 100.0, 20000, 2)};
    for (double from : {0.0, 50.0, 100.0, 103.0}) {
        auto crash = next_oom(rs, kCapacity, from);
        ASSERT_TRUE(crash) << "from " << from;
        EXPECT_NEAR(crash->at, 103.825, 1e-6) << "from " << from;
        EXPECT_EQ(crash->victim, 9) << "from " << from;
    }
    // Right at the crossing the GPU is exactly full.
    EXPECT_NEAR(total_memory_at(rs, 103.825), 40441.0, 1e-6);

    // Once the victim is gone, the first task runs on alone and never crashes.
    const std::vector<ResidentMemory> survivor = {rs[0]};
    EXPECT_FALSE(next_oom(survivor, kCapacity, 0.0));
    EXPECT_FALSE(next_oom(survivor, kCapacity, 103.825));
}

// This test verifies that the victim is the task started second even when it is the smaller one
// and its task id is lower: blame follows the ramp, not size or id.
TEST(MemoryTest, VictimIsTheRampingTaskNotTheLargerOne) {
    // First: 20,000 MiB at 0 s (peak at 5 s). Second (id 1): 25,000 MiB from 60 s, slope
    // (25,000 - 600) / 5 = 4,880 MiB/s. 20,000 + 600 + 4,880 (t - 60) = 40,441
    //   -> t - 60 = 19,841 / 4,880 = 4.065779... -> t = 64.065779 s.
    const std::vector<ResidentMemory> rs = {resident(5, 0.0, 20000, 1),
                                            resident(1, 60.0, 25000, 2)};
    auto crash = next_oom(rs, kCapacity, 0.0);
    ASSERT_TRUE(crash);
    EXPECT_NEAR(crash->at, 60.0 + 19841.0 / 4880.0, 1e-6);
    EXPECT_EQ(crash->victim, 1);
}

struct FitCase {
    MiB first;
    MiB second;
};

// This test verifies that no crash is predicted when the peaks fit, including a sum of exactly
// the capacity.
TEST(MemoryTest, NoCrashWhenTheSumFits) {
    const std::vector<FitCase> table = {
        {20000, 20000},  // 40,000 <= 40,441
        {25000, 15441},  // 40,441 == capacity: allowed (only exceeding crashes)
        {13238, 13238},  // two resnet50 bs128
        {40441, 0},      // one task filling the GPU, a second that allocates nothing (its
                         // context is capped at its peak, 0)
    };
    for (const FitCase& c : table) {
        const std::vector<ResidentMemory> rs = {resident(1, 0.0, c.first, 1),
                                                resident(2, 30.0, c.second, 2)};
        EXPECT_FALSE(next_oom(rs, kCapacity, 0.0)) << c.first << " + " << c.second;
    }
}

// This test verifies that a task whose context alone does not fit crashes at its activation
// instant, before any ramp.
TEST(MemoryTest, ContextJumpAloneOverCapacityCrashesAtActivation) {
    // Resident: 40,000 MiB from 5 s on. Newcomer active at 50 s: 40,000 + 600 = 40,600 > 40,441.
    const std::vector<ResidentMemory> rs = {resident(1, 0.0, 40000, 1), resident(2, 50.0, 1000, 2)};
    auto crash = next_oom(rs, kCapacity, 0.0);
    ASSERT_TRUE(crash);
    EXPECT_DOUBLE_EQ(crash->at, 50.0);
    EXPECT_EQ(crash->victim, 2);
}

// This test verifies that a GPU already over capacity at `from` reports a crash at `from`,
// blaming the newest task.
TEST(MemoryTest, AlreadyOverCapacityCrashesImmediately) {
    const std::vector<ResidentMemory> rs = {resident(1, 0.0, 30000, 1), resident(2, 0.0, 20000, 2)};
    auto crash = next_oom(rs, kCapacity, 100.0);  // 50,000 > 40,441 since t = 4.1 s
    ASSERT_TRUE(crash);
    EXPECT_DOUBLE_EQ(crash->at, 100.0);
    EXPECT_EQ(crash->victim, 2);
}

// This test verifies that two tasks ramping in lockstep crash the newest (larger launch order),
// whatever their task ids, at the crossing of their common ramp.
TEST(MemoryTest, TieGoesToTheNewestTask) {
    // Both active at 10 s, context 600, peak 25,000: sum 2 (600 + 4,880 (t - 10)) = 40,441
    //   -> 9,760 (t - 10) = 39,241 -> t = 10 + 4.020594... s.
    const double crossing = 10.0 + 39241.0 / 9760.0;
    for (bool newest_first_in_list : {false, true}) {
        std::vector<ResidentMemory> rs = {resident(42, 10.0, 25000, 3),
                                          resident(17, 10.0, 25000, 8)};
        if (newest_first_in_list) {
            std::swap(rs[0], rs[1]);
        }
        auto crash = next_oom(rs, kCapacity, 0.0);
        ASSERT_TRUE(crash);
        EXPECT_NEAR(crash->at, crossing, 1e-6);
        EXPECT_EQ(crash->victim, 17) << "order 8 is newer than order 3";
    }
}

// This test verifies that memory is released by leaving the resident list: after the crash
// victim leaves, a later newcomer that fits does not crash.
TEST(MemoryTest, FreedMemoryMakesRoomForALaterTask) {
    // 25,000 resident + 15,000 arriving at 200 s: 40,000 <= 40,441.
    const std::vector<ResidentMemory> rs = {resident(1, 0.0, 25000, 1),
                                            resident(3, 200.0, 15000, 3)};
    EXPECT_FALSE(next_oom(rs, kCapacity, 110.0));
}

}  // namespace
}  // namespace carma::model
