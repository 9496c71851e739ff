#include "device/nvml.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

// The build points these at the fake NVML libraries built from tests/fake_nvml/fake_nvml.c.
#ifndef CARMA_FAKE_NVML_PATH
#error "CARMA_FAKE_NVML_PATH must name the fake NVML library (libfake-nvml.so)"
#endif

namespace carma::device {
namespace {

using ::testing::HasSubstr;

constexpr const char* kKnobs[] = {"FAKE_NVML_FAIL_INIT", "FAKE_NVML_GPU0_USED_MIB",
                                  "FAKE_NVML_GPU0_PROCS", "FAKE_NVML_NO_ENERGY",
                                  "FAKE_NVML_LOST_GPU"};

void set_env(const char* name, const std::string& value) {
    ::setenv(name, value.c_str(), 1);
}

// Every test starts from the fake NVML with its default GPUs, and leaves no knob behind.
class NvmlTest : public ::testing::Test {
protected:
    void SetUp() override {
        clear_knobs();
        set_env(kNvmlLibraryEnv, CARMA_FAKE_NVML_PATH);
    }
    void TearDown() override {
        clear_knobs();
        ::unsetenv(kNvmlLibraryEnv);
    }

    static std::unique_ptr<GpuBackend> open_fake() {
        auto backend = open_nvml();
        if (!backend) {
            ADD_FAILURE() << backend.error().message;
            return nullptr;
        }
        return std::move(*backend);
    }

    static std::vector<GpuSample> sample(GpuBackend& backend) {
        auto samples = backend.sample();
        if (!samples) {
            ADD_FAILURE() << samples.error().message;
            return {};
        }
        return std::move(*samples);
    }

private:
    static void clear_knobs() {
        for (const char* knob : kKnobs) {
            ::unsetenv(knob);
        }
    }
};

// This test verifies that the GPUs NVML reports are listed with their UUIDs, names and totals.
TEST_F(NvmlTest, ListsTheGpus) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->name(), "nvml");
    const auto& gpus = backend->gpus();
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[0].index, 0);
    EXPECT_EQ(gpus[0].uuid, "GPU-fa4e0000-0000-4000-8000-000000000000");
    EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(gpus[0].total_mib, 40 * 1024);
    EXPECT_EQ(gpus[1].index, 1);
    EXPECT_EQ(gpus[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
    EXPECT_EQ(gpus[1].name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(gpus[1].total_mib, 80 * 1024);
}

// This test verifies that bytes become MiB, percentages fractions, milliwatts watts, and that
// SMACT and DRAMA are the utilisation proxies while SMOCC stays 0.
TEST_F(NvmlTest, SampleConvertsUnits) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);

    const GpuSample& busy = samples[0];
    EXPECT_EQ(busy.error, "");
    EXPECT_EQ(busy.index, 0);
    EXPECT_EQ(busy.used_mib, 10 * 1024);
    EXPECT_EQ(busy.free_mib, 30 * 1024);
    EXPECT_DOUBLE_EQ(busy.util, 0.5);
    EXPECT_DOUBLE_EQ(busy.smact, 0.5);
    EXPECT_DOUBLE_EQ(busy.drama, 0.25);
    EXPECT_DOUBLE_EQ(busy.smocc, 0.0);
    EXPECT_DOUBLE_EQ(busy.power_w, 150.0);

    const GpuSample& idle = samples[1];
    EXPECT_EQ(idle.error, "");
    EXPECT_EQ(idle.index, 1);
    EXPECT_EQ(idle.used_mib, 0);
    EXPECT_EQ(idle.free_mib, 80 * 1024);
    EXPECT_DOUBLE_EQ(idle.util, 0.0);
    EXPECT_DOUBLE_EQ(idle.drama, 0.0);
    EXPECT_DOUBLE_EQ(idle.power_w, 60.0);
    EXPECT_TRUE(idle.processes.empty());
}

// This test verifies that a sample reads the GPU now, not what was seen when opening.
TEST_F(NvmlTest, SampleFollowsTheGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU0_USED_MIB", "20480");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].used_mib, 20480);
    EXPECT_EQ(samples[0].free_mib, 20480);
}

// This test verifies that the processes on a GPU are listed with their memory in MiB.
TEST_F(NvmlTest, ListsProcesses) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    ASSERT_EQ(samples[0].processes.size(), 1U);
    EXPECT_EQ(samples[0].processes[0].pid, 4242);
    EXPECT_EQ(samples[0].processes[0].used_mib, 10 * 1024);
}

// This test verifies that more processes than the first buffer holds are all listed, through
// NVML's INSUFFICIENT_SIZE protocol, and still after the buffer has grown.
TEST_F(NvmlTest, GrowsTheProcessBuffer) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU0_PROCS", "100");
    for (int round = 0; round < 2; ++round) {
        const auto samples = sample(*backend);
        ASSERT_EQ(samples.size(), 2U);
        EXPECT_EQ(samples[0].error, "");
        const auto& processes = samples[0].processes;
        ASSERT_EQ(processes.size(), 100U);
        MiB total = 0;
        for (std::size_t i = 0; i < processes.size(); ++i) {
            EXPECT_EQ(processes[i].pid, 4242 + static_cast<int>(i));
            total += processes[i].used_mib;
        }
        EXPECT_NEAR(static_cast<double>(total), 10 * 1024, 100);  // each one rounds down
    }
}

// This test verifies that energy counts from opening (not the driver's lifetime total, which is
// far larger in the fake) and never goes back.
TEST_F(NvmlTest, EnergyCountsFromOpen) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto first = sample(*backend);
    const auto second = sample(*backend);
    ASSERT_EQ(first.size(), 2U);
    ASSERT_EQ(second.size(), 2U);
    for (int g = 0; g < 2; ++g) {
        EXPECT_GT(first[g].energy_j, 0.0) << "GPU " << g;
        EXPECT_LT(first[g].energy_j, 1000.0) << "GPU " << g;
        EXPECT_GT(second[g].energy_j, first[g].energy_j) << "GPU " << g;
    }
}

// This test verifies that without an energy counter (pre-Volta GPUs) power is integrated.
TEST_F(NvmlTest, IntegratesPowerWithoutAnEnergyCounter) {
    set_env("FAKE_NVML_NO_ENERGY", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto first = sample(*backend);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto second = sample(*backend);
    ASSERT_EQ(first.size(), 2U);
    ASSERT_EQ(second.size(), 2U);
    EXPECT_GE(first[0].energy_j, 0.0);
    // At least 20 ms at a steady 150 W.
    EXPECT_GE(second[0].energy_j - first[0].energy_j, 150.0 * 0.020 - 1e-9);
}

// This test verifies that a driver without the _v3 process query or the energy counter is still
// usable: processes come from _v2 and energy from integrated power.
TEST_F(NvmlTest, WorksWithAnOldDriver) {
#ifndef CARMA_FAKE_NVML_OLD_PATH
    GTEST_SKIP() << "CARMA_FAKE_NVML_OLD_PATH is not defined by the build";
#else
    set_env(kNvmlLibraryEnv, CARMA_FAKE_NVML_OLD_PATH);
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto first = sample(*backend);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto second = sample(*backend);
    ASSERT_EQ(second.size(), 2U);
    EXPECT_EQ(second[0].error, "");
    ASSERT_EQ(second[0].processes.size(), 1U);
    EXPECT_EQ(second[0].processes[0].pid, 4242);
    EXPECT_GE(second[0].energy_j - first[0].energy_j, 150.0 * 0.020 - 1e-9);
#endif
}

// This test verifies that a GPU that cannot be read reports it in its own sample, keeping its
// last values, while the other GPUs are sampled as usual; and that it recovers.
TEST_F(NvmlTest, ReadErrorsStayWithTheirGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto before = sample(*backend);
    ASSERT_EQ(before.size(), 2U);

    set_env("FAKE_NVML_LOST_GPU", "1");
    const auto lost = sample(*backend);
    ASSERT_EQ(lost.size(), 2U);
    EXPECT_EQ(lost[0].error, "");
    EXPECT_EQ(lost[0].used_mib, 10 * 1024);
    EXPECT_EQ(lost[1].index, 1);
    EXPECT_THAT(lost[1].error, HasSubstr("GPU 1"));
    EXPECT_THAT(lost[1].error, HasSubstr("GPU is lost"));
    EXPECT_EQ(lost[1].free_mib, before[1].free_mib);
    EXPECT_DOUBLE_EQ(lost[1].power_w, before[1].power_w);

    ::unsetenv("FAKE_NVML_LOST_GPU");
    const auto after = sample(*backend);
    ASSERT_EQ(after.size(), 2U);
    EXPECT_EQ(after[1].error, "");
    EXPECT_GE(after[1].energy_j, before[1].energy_j);
}

// This test verifies that a library that is not there is an error naming it, not a crash.
TEST_F(NvmlTest, MissingLibraryIsAnError) {
    set_env(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1");
    auto backend = open_nvml();
    ASSERT_FALSE(backend);
    EXPECT_EQ(backend.error().code, ErrorCode::Io);
    EXPECT_THAT(backend.error().message, HasSubstr("NVML not available"));
    EXPECT_THAT(backend.error().message, HasSubstr("/nonexistent/libnvidia-ml.so.1"));
    EXPECT_THAT(backend.error().message, HasSubstr("cannot open shared object file"));
}

// This test verifies that without CARMA_NVML_LIBRARY the driver's library is the one tried.
TEST_F(NvmlTest, DefaultsToTheDriversLibrary) {
    ::unsetenv(kNvmlLibraryEnv);
    auto backend = open_nvml();
    if (backend) {
        GTEST_SKIP() << "this machine has NVML with " << (*backend)->gpus().size() << " GPU(s)";
    }
    EXPECT_THAT(backend.error().message, HasSubstr("libnvidia-ml.so.1"));
}

// This test verifies that a library lacking NVML entry points is an error naming them.
TEST_F(NvmlTest, MissingEntryPointsAreNamed) {
    set_env(kNvmlLibraryEnv, "libc.so.6");  // loads anywhere, exports no NVML
    auto backend = open_nvml();
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message, HasSubstr("NVML not available"));
    EXPECT_THAT(backend.error().message, HasSubstr("libc.so.6"));
    EXPECT_THAT(backend.error().message, HasSubstr("nvmlInit_v2"));
    EXPECT_THAT(backend.error().message, HasSubstr("nvmlDeviceGetMemoryInfo"));
}

// This test verifies that a failing nvmlInit is an error carrying NVML's reason.
TEST_F(NvmlTest, InitFailureIsAnError) {
    set_env("FAKE_NVML_FAIL_INIT", "1");
    auto backend = open_nvml();
    ASSERT_FALSE(backend);
    EXPECT_EQ(backend.error().code, ErrorCode::Io);
    EXPECT_THAT(backend.error().message, HasSubstr("NVML not available"));
    EXPECT_THAT(backend.error().message, HasSubstr("nvmlInit_v2"));
    EXPECT_THAT(backend.error().message, HasSubstr("Driver Not Loaded"));
}

// This test verifies that backends can be opened and closed again (NVML is reference counted,
// the library reloaded) and that two can be open at once.
TEST_F(NvmlTest, OpensAndClosesRepeatedly) {
    for (int i = 0; i < 3; ++i) {
        auto a = open_fake();
        auto b = open_fake();
        ASSERT_NE(a, nullptr);
        ASSERT_NE(b, nullptr);
        a.reset();
        const auto samples = sample(*b);
        ASSERT_EQ(samples.size(), 2U);
        EXPECT_EQ(samples[0].error, "");
    }
}

}  // namespace
}  // namespace carma::device
