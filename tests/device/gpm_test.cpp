// The NVML backend on GPUs with GPM (Hopper and later), against the fake NVML.

#include <dlfcn.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/fake_nvml_fixture.h"
#include "device/nvml.h"
#include "device/nvml_api.h"
#include "device/nvml_gpm.h"

namespace carma::device {
namespace {

using ::testing::DoubleEq;
using ::testing::Optional;
using fake_nvml::set_env;

// GPM measures over the period between two samples, which must be at least kMinPeriod long;
// sleeping past it makes the next sample measure.
void wait_for_a_period() {
    std::this_thread::sleep_for(GpmReader::kMinPeriod + std::chrono::milliseconds(20));
}

class GpmTest : public fake_nvml::FakeNvmlTest {
protected:
    void SetUp() override {
        FakeNvmlTest::SetUp();
        set_env("FAKE_NVML_GPM", "1");
    }

    // A backend and its first sample, a period after opening.
    std::vector<GpuSample> open_and_sample() {
        backend_ = open_fake();
        if (backend_ == nullptr) {
            return {};
        }
        wait_for_a_period();
        return sample(*backend_);
    }

    std::vector<GpuSample> sample_again() {
        wait_for_a_period();
        return sample(*backend_);
    }

    std::unique_ptr<GpuBackend> backend_;
};

// This test verifies that the first sample after opening already measures (a GPM sample is taken
// at open), that SMACT, SMOCC and DRAMA are GPM's percentages as fractions, labelled nvml-gpm and
// real activity, while utilisation stays NVML's utilisation rate.
TEST_F(GpmTest, FirstSampleReadsGpmMetrics) {
    const auto samples = open_and_sample();
    ASSERT_EQ(samples.size(), 2U);

    const GpuSample& busy = samples[0];  // the fake's GPU 0: SM 40 %, occupancy 20 %, DRAM 30 %
    EXPECT_EQ(busy.error, "");
    EXPECT_THAT(busy.smact, Optional(DoubleEq(0.40)));
    EXPECT_THAT(busy.smocc, Optional(DoubleEq(0.20)));
    EXPECT_THAT(busy.drama, Optional(DoubleEq(0.30)));
    EXPECT_EQ(to_string(busy.sources.smact), "nvml-gpm");
    EXPECT_EQ(to_string(busy.sources.smocc), "nvml-gpm");
    EXPECT_EQ(to_string(busy.sources.drama), "nvml-gpm");
    EXPECT_TRUE(is_real_activity(busy.sources.smact));
    EXPECT_TRUE(is_real_activity(busy.sources.smocc));
    EXPECT_TRUE(is_real_activity(busy.sources.drama));
    EXPECT_THAT(busy.util, Optional(DoubleEq(0.5)));
    EXPECT_EQ(to_string(busy.sources.util), "nvml");

    const GpuSample& idle = samples[1];  // measured idle: 0, not unknown
    EXPECT_THAT(idle.smact, Optional(DoubleEq(0.0)));
    EXPECT_THAT(idle.smocc, Optional(DoubleEq(0.0)));
    EXPECT_THAT(idle.drama, Optional(DoubleEq(0.0)));
    EXPECT_EQ(to_string(idle.sources.smocc), "nvml-gpm");
}

// This test verifies that every sample measures the period since the one before.
TEST_F(GpmTest, FollowsTheGpu) {
    ASSERT_EQ(open_and_sample().size(), 2U);
    set_env("FAKE_NVML_GPU0_SM_UTIL", "75.5");
    set_env("FAKE_NVML_GPU0_SM_OCCUPANCY", "12.5");
    const auto samples = sample_again();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_THAT(samples[0].smact, Optional(DoubleEq(0.755)));
    EXPECT_THAT(samples[0].smocc, Optional(DoubleEq(0.125)));
    EXPECT_THAT(samples[0].drama, Optional(DoubleEq(0.30)));
}

// This test verifies that a metric GPM cannot give is unknown, labelled unavailable, while the
// other metrics of the same sample are still GPM's.
TEST_F(GpmTest, FailedMetricIsUnavailable) {
    set_env("FAKE_NVML_GPU0_SM_OCCUPANCY", "fail");
    const auto samples = open_and_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].error, "");
    EXPECT_EQ(samples[0].smocc, std::nullopt);
    EXPECT_EQ(to_string(samples[0].sources.smocc), "unavailable");
    EXPECT_THAT(samples[0].smact, Optional(DoubleEq(0.40)));
    EXPECT_EQ(to_string(samples[0].sources.smact), "nvml-gpm");
    EXPECT_THAT(samples[0].drama, Optional(DoubleEq(0.30)));
    EXPECT_THAT(samples[1].smocc, Optional(DoubleEq(0.0)));  // the other GPU is unaffected
}

// This test verifies that a GPM sample that cannot be taken leaves SMACT, SMOCC and DRAMA
// unknown for that sample (not the proxies, not 0, not an error) and that GPM measures again
// once it can.
TEST_F(GpmTest, FailedGpmSampleIsUnavailableThenRecovers) {
    ASSERT_EQ(open_and_sample().size(), 2U);
    set_env("FAKE_NVML_GPU0_GPM_FAIL", "1");
    const auto failing = sample_again();
    ASSERT_EQ(failing.size(), 2U);
    EXPECT_EQ(failing[0].error, "");
    EXPECT_EQ(failing[0].smact, std::nullopt);
    EXPECT_EQ(failing[0].smocc, std::nullopt);
    EXPECT_EQ(failing[0].drama, std::nullopt);
    EXPECT_EQ(to_string(failing[0].sources.smact), "unavailable");
    EXPECT_THAT(failing[0].util, Optional(DoubleEq(0.5)));
    EXPECT_EQ(failing[0].used_mib, 10 * 1024);

    ::unsetenv("FAKE_NVML_GPU0_GPM_FAIL");
    const auto after = sample_again();
    ASSERT_EQ(after.size(), 2U);
    EXPECT_THAT(after[0].smact, Optional(DoubleEq(0.40)));
    EXPECT_EQ(to_string(after[0].sources.smact), "nvml-gpm");
}

// This test verifies that percentages outside 0..100 become fractions within 0..1.
TEST_F(GpmTest, ClampsToFractions) {
    set_env("FAKE_NVML_GPU0_SM_UTIL", "100.5");
    set_env("FAKE_NVML_GPU0_DRAM_BW_UTIL", "-1");
    const auto samples = open_and_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_THAT(samples[0].smact, Optional(DoubleEq(1.0)));
    EXPECT_THAT(samples[0].drama, Optional(DoubleEq(0.0)));
}

// This test verifies that GPM is used per GPU: a GPU without it keeps the NVML proxies.
TEST_F(GpmTest, OnlyGpusWithGpmUseIt) {
    set_env("FAKE_NVML_GPU0_GPM", "0");
    const auto samples = open_and_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_THAT(samples[0].smact, Optional(DoubleEq(0.5)));  // the utilisation rate
    EXPECT_EQ(to_string(samples[0].sources.smact), "nvml");
    EXPECT_EQ(samples[0].smocc, std::nullopt);
    EXPECT_EQ(to_string(samples[0].sources.smocc), "unavailable");
    EXPECT_EQ(to_string(samples[1].sources.smact), "nvml-gpm");
    EXPECT_EQ(to_string(samples[1].sources.smocc), "nvml-gpm");
}

// This test verifies that a driver without the GPM entry points still opens and samples, with
// the NVML proxies, even where the GPUs would have GPM.
TEST_F(GpmTest, OldDriverWithoutGpmUsesProxies) {
#ifndef CARMA_FAKE_NVML_OLD_PATH
    FAIL() << "CARMA_FAKE_NVML_OLD_PATH is not defined by the build";
#else
    set_env(kNvmlLibraryEnv, CARMA_FAKE_NVML_OLD_PATH);
    const auto samples = open_and_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].error, "");
    EXPECT_THAT(samples[0].smact, Optional(DoubleEq(0.5)));
    EXPECT_EQ(to_string(samples[0].sources.smact), "nvml");
    EXPECT_THAT(samples[0].drama, Optional(DoubleEq(0.25)));
    EXPECT_EQ(to_string(samples[0].sources.drama), "nvml");
    EXPECT_EQ(samples[0].smocc, std::nullopt);
    EXPECT_EQ(to_string(samples[0].sources.smocc), "unavailable");
#endif
}

// This test verifies that the GPM sample buffers are given back to NVML when the backend closes.
TEST_F(GpmTest, FreesItsGpmSamples) {
    // The fake's own count of live samples (not NVML API), from the copy the backend loads.
    void* fake = ::dlopen(CARMA_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake, nullptr) << ::dlerror();
    using LiveFn = int (*)();
    auto live = reinterpret_cast<LiveFn>(::dlsym(fake, "fakeNvmlLiveGpmSamples"));
    ASSERT_NE(live, nullptr);
    const int before = live();
    {
        const auto samples = open_and_sample();
        ASSERT_EQ(samples.size(), 2U);
        EXPECT_EQ(live() - before, 4);  // two per GPU: the previous sample and the current one
        backend_.reset();
    }
    EXPECT_EQ(live(), before);
    ::dlclose(fake);
}

// This test verifies that an error storm on a GPM GPU stays with that GPU, and that once it
// answers again GPM measures it again.
TEST_F(GpmTest, GpuHealthStormOnAGpmGpuRecovers) {
    ASSERT_EQ(open_and_sample().size(), 2U);
    set_env("FAKE_NVML_GPU1_FAIL", "1");
    const auto storm = sample_again();
    ASSERT_EQ(storm.size(), 2U);
    EXPECT_EQ(storm[0].error, "");
    EXPECT_THAT(storm[0].smact, Optional(DoubleEq(0.40)));
    EXPECT_NE(storm[1].error, "");

    ::unsetenv("FAKE_NVML_GPU1_FAIL");
    set_env("FAKE_NVML_GPU1_SM_UTIL", "55");
    const auto after = sample_again();
    ASSERT_EQ(after.size(), 2U);
    EXPECT_EQ(after[1].error, "");
    EXPECT_THAT(after[1].smact, Optional(DoubleEq(0.55)));
    EXPECT_EQ(to_string(after[1].sources.smact), "nvml-gpm");
}

// This test verifies the declared NVML structures against the layouts NVML documents (the
// header checks them at compile time too; this says it where tests are read).
TEST(GpmAbiTest, LayoutsMatchNvml) {
    using namespace nvml_abi;
    EXPECT_EQ(sizeof(NvmlGpmSupport), 8U);
    EXPECT_EQ(sizeof(NvmlGpmMetric), 40U);
    EXPECT_EQ(offsetof(NvmlGpmMetric, value), 8U);
    EXPECT_EQ(offsetof(NvmlGpmMetricsGet, sample1), 8U);
    EXPECT_EQ(offsetof(NvmlGpmMetricsGet, metrics), 24U);
    EXPECT_EQ(kNvmlGpmMetricSmUtil, 2U);
    EXPECT_EQ(kNvmlGpmMetricSmOccupancy, 3U);
    EXPECT_EQ(kNvmlGpmMetricDramBwUtil, 10U);
    EXPECT_EQ(sizeof(NvmlProcessInfo), 24U);
}

}  // namespace
}  // namespace carma::device
