#include "core/memory_need.h"

#include <gtest/gtest.h>

#include "builders.h"

namespace carma {
namespace {

using testing::MakeTask;

// This test verifies the Horus formula on ResNet-50 at batch 32, the paper's .rad value 7904 MiB:
// P = 25,559,040, A = 31,837,038: 4*(32*A + P + 32*P)/2^20 + 800 = 4*(1,018,785,216 +
// 843,448,320)/1,048,576 + 800 = 7,103.6 + 800 = 7,904 MiB.
TEST(MemoryNeedTest, HorusFormula) {
    EXPECT_EQ(horus_estimate_mib(ModelDescriptor{25559040, 31837038, 32}), 7904);
}

// This test verifies which memory figure each kind of knowledge uses (spec §2.2, §3.6).
TEST(MemoryNeedTest, KnownNeedPerKnowledge) {
    TaskSpec t = MakeTask().Profiled(13236).Declared(14000).Horus(28923).FakeTensor(10666)
                     .GpuMemNet(24000);
    EXPECT_EQ(known_need_mib(t, MemoryKnowledge::Oracle, Estimator::Horus), 13236);
    EXPECT_EQ(known_need_mib(t, MemoryKnowledge::None, Estimator::Horus), std::nullopt);
    EXPECT_EQ(known_need_mib(t, MemoryKnowledge::Estimate, Estimator::Horus), 28923);
    EXPECT_EQ(known_need_mib(t, MemoryKnowledge::Estimate, Estimator::FakeTensor), 10666);
    EXPECT_EQ(known_need_mib(t, MemoryKnowledge::Estimate, Estimator::GpuMemNet), 24000);
    // Without a profile the oracle falls back to what the submitter declared.
    EXPECT_EQ(known_need_mib(MakeTask().Declared(9000), MemoryKnowledge::Oracle, Estimator::Horus),
              9000);
    // A model descriptor beats the stored Horus number.
    TaskSpec d = MakeTask().Horus(1).Model(25559040, 31837038, 32);
    EXPECT_EQ(known_need_mib(d, MemoryKnowledge::Estimate, Estimator::Horus), 7904);
}

// This test verifies the thresholds on available memory (= last free - 512):
// known need + 2,048 MiB margin, or a fixed 5,120 MiB without information.
TEST(MemoryNeedTest, Requirement) {
    MemoryNeedConfig cfg;
    TaskSpec t = MakeTask().Profiled(13236);
    EXPECT_EQ(memory_requirement(t, MemoryKnowledge::Oracle, cfg).min_available_mib, 15284);
    EXPECT_EQ(memory_requirement(t, MemoryKnowledge::None, cfg).min_available_mib, 5120);
    // EST with no estimate and nothing declared behaves like OR.
    EXPECT_EQ(memory_requirement(t, MemoryKnowledge::Estimate, cfg).min_available_mib, 5120);
    cfg.margin_mib = 0;
    EXPECT_EQ(memory_requirement(t, MemoryKnowledge::Oracle, cfg).min_available_mib, 13236);
}

// This test verifies that estimator names parse and unknown ones are refused with the choices.
TEST(MemoryNeedTest, ParsesEstimator) {
    EXPECT_EQ(*parse_estimator("GPUMemNet"), Estimator::GpuMemNet);
    auto bad = parse_estimator("crystal-ball");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("horus, faketensor or gpumemnet"), std::string::npos);
}

}  // namespace
}  // namespace carma
