// Emulated GPUs under an MPS memory limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): a job is refused
// the allocation that would take it past its own limit on a GPU, however much the GPU has free;
// its co-runners are not limited. In process through JobHandle, and end to end with
// carma-fakejob. And under an SM cap (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), in process.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/emulated.h"
#include "device/emulated_job.h"
#include "device/fakejob_runner.h"
#include "model/constants.h"
#include "model/gpu_type.h"

namespace carma::device {
namespace {

using fakejob_runner::eventually;
using fakejob_runner::FakeJob;
using ::testing::HasSubstr;

constexpr MiB kCapacity = model::kA100_40GB_UsableMiB;  // 40,441 MiB
const JobProfile kProfile{0.60, 0.50, 0.25, 0.40};

class EmulatedMpsTest : public fakejob_runner::EmulatedFakeJobTest {
  protected:
    JobHandle attach(std::string_view devices, std::optional<std::string_view> limit) {
        auto job = JobHandle::attach(file_, devices, kProfile, limit);
        EXPECT_TRUE(job.has_value()) << job.error().message;
        return std::move(*job);
    }

    MiB used_on(int gpu) {
        auto s = backend_->sample();
        EXPECT_TRUE(s.has_value());
        return s ? (*s)[static_cast<std::size_t>(gpu)].used_mib : -1;
    }

    // A long-running job that ramps to `memory` MiB, under `limit` when there is one.
    std::unique_ptr<FakeJob> start(const std::string& name, const std::string& devices,
                                   const std::optional<std::string>& limit, MiB memory) {
        fakejob_runner::Env env;
        if (limit) {
            env.emplace_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", *limit);
        }
        return EmulatedFakeJobTest::start(
            name, devices,
            {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "1000000", "--memory",
             std::to_string(memory)},
            env);
    }
};

// This test verifies the limit rule in process: with 10,000 MiB allowed on GPU 0, the job gets
// 8,000 but not 12,000 (PyTorch's numbers: the GPU's total, what the limit leaves free), though
// the GPU has 30,000 MiB free; a co-runner without a limit then takes 20,000 on the same GPU.
TEST_F(EmulatedMpsTest, LimitRefusesOnlyTheLimitedJobsAllocation) {
    JobHandle limited = attach("0", "0=10000M");
    EXPECT_EQ(limited.memory_limits(), (std::vector<std::optional<MiB>>{10000}));
    ASSERT_TRUE(limited.set_memory(8000)->ok);

    auto a = limited.set_memory(12000);
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_FALSE(a->ok);
    EXPECT_EQ(a->device, 0);
    EXPECT_EQ(a->requested_mib, 4000);
    EXPECT_EQ(a->total_mib, kCapacity);
    EXPECT_EQ(a->free_mib, 2000);  // 10,000 allowed - 8,000 held
    EXPECT_EQ(a->held_mib, 8000);
    EXPECT_EQ(a->limit_mib, 10000);
    EXPECT_EQ(limited.memory_mib(), 8000);
    EXPECT_TRUE(limited.set_memory(10000)->ok);  // exactly the limit fits

    JobHandle free_runner = attach("0", std::nullopt);
    EXPECT_EQ(free_runner.memory_limits(), (std::vector<std::optional<MiB>>{std::nullopt}));
    auto b = free_runner.set_memory(20000);
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(b->ok);
    EXPECT_EQ(used_on(0), 30000);
    // The capacity rule still applies, and says no limit refused it.
    JobHandle big = attach("0", std::nullopt);
    auto c = big.set_memory(15000);
    ASSERT_TRUE(c.has_value());
    EXPECT_FALSE(c->ok);
    EXPECT_EQ(c->limit_mib, 0);
}

// This test verifies that ordinals are positions in CUDA_VISIBLE_DEVICES and that a UUID names
// the GPU it is the UUID of: on "1,0", "GPU-...0=5G" limits ordinal 1 and "0=3000M" ordinal 0.
TEST_F(EmulatedMpsTest, LimitsFollowTheJobsOwnDeviceOrder) {
    const std::string text = emulated_gpu_uuid(0) + "=5G,0=3000M";
    JobHandle job = attach("1,0", text);
    EXPECT_EQ(job.memory_limits(), (std::vector<std::optional<MiB>>{3000, 5120}));
    auto a = job.set_memory(4000);
    ASSERT_TRUE(a.has_value());
    EXPECT_FALSE(a->ok);
    EXPECT_EQ(a->device, 0);
    EXPECT_EQ(a->limit_mib, 3000);

    JobHandle other = attach("1,0", "1=2000M");
    auto b = other.set_memory(2500);
    ASSERT_TRUE(b.has_value());
    EXPECT_FALSE(b->ok);
    EXPECT_EQ(b->device, 1);
}

// This test verifies that attach refuses a malformed limit, or one naming a GPU the job cannot
// see, with the variable named; and that the three-argument attach reads the environment.
TEST_F(EmulatedMpsTest, BadLimitsAreRefusedAndTheEnvironmentIsRead) {
    auto malformed = JobHandle::attach(file_, "0", kProfile, "0=lots");
    ASSERT_FALSE(malformed.has_value());
    EXPECT_THAT(malformed.error().message,
                HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='0=lots': 'lots' is not an amount"));

    auto unseen = JobHandle::attach(file_, "0", kProfile, "1=1G");
    ASSERT_FALSE(unseen.has_value());
    EXPECT_THAT(unseen.error().message,
                HasSubstr("device '1' is not one of the job's 1 GPU(s) in CUDA_VISIBLE_DEVICES"));

    auto other_uuid = JobHandle::attach(file_, "0", kProfile, emulated_gpu_uuid(1) + "=1G");
    ASSERT_FALSE(other_uuid.has_value());

    ASSERT_EQ(::setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1000M", 1), 0);
    auto from_env = JobHandle::attach(file_, "1", kProfile);
    ::unsetenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    ASSERT_TRUE(from_env.has_value()) << from_env.error().message;
    EXPECT_EQ(from_env->memory_limits(), (std::vector<std::optional<MiB>>{1000}));
    EXPECT_FALSE(from_env->set_memory(1001)->ok);
}

// This test verifies it end to end: a carma-fakejob limited to 4,000 MiB on GPU 0 that ramps to
// 12,000 prints PyTorch's out-of-memory error and exits 1, while a co-runner without a limit on
// the same GPU holds its 12,000 MiB and keeps running.
TEST_F(EmulatedMpsTest, LimitedFakeJobRunsOutOfMemoryAndCoRunnerContinues) {
    auto free_runner = start("free", "0", std::nullopt, 12000);
    ASSERT_TRUE(eventually([&] { return memory_of(free_runner->pid(), 0) == 12000; }))
        << free_runner->err();

    auto limited = start("limited", emulated_gpu_uuid(0), "0=4000M", 12000);
    EXPECT_EQ(limited->wait(), 1) << limited->err();
    const std::string err = limited->err();
    EXPECT_THAT(err, HasSubstr("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "));
    EXPECT_THAT(err, HasSubstr("GPU 0 has a total capacity of 39.49 GiB of which "));

    EXPECT_EQ(memory_of(free_runner->pid(), 0), 12000);
    EXPECT_FALSE(free_runner->wait(std::chrono::milliseconds(0)).has_value());  // still running
    ::kill(free_runner->pid(), SIGTERM);
    EXPECT_EQ(free_runner->wait(), 143);
}

// This test verifies that a fake job with a malformed limit says so in one line and exits 2.
TEST_F(EmulatedMpsTest, MalformedLimitExits2WithOneLine) {
    auto job = start("malformed", "0", "0=12", 12000);
    EXPECT_EQ(job->wait(), 2);
    const std::string err = job->err();
    EXPECT_THAT(err, HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='0=12': '12' is not an amount"));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// This test verifies CUDA_MPS_ACTIVE_THREAD_PERCENTAGE as NVIDIA documents it for an MPS client:
// a job capped at 25 % of the SMs, below its solo utilisation of 60 %, runs at 25/60 of its pace
// alone, and weighs less on a co-runner than the same job uncapped; under time-slicing, where
// no MPS server reads the variable, it runs at its full pace.
TEST_F(EmulatedMpsTest, AThreadPercentageCapsTheJobsSmsUnderMps) {
    auto capped = JobHandle::attach(file_, "0", kProfile, std::nullopt, "25");
    ASSERT_TRUE(capped.has_value()) << capped.error().message;
    auto uncapped = JobHandle::attach(file_, "1", kProfile, std::nullopt, std::nullopt);
    ASSERT_TRUE(uncapped.has_value()) << uncapped.error().message;
    ASSERT_TRUE(capped->set_active(true));
    ASSERT_TRUE(uncapped->set_active(true));
    EXPECT_NEAR(*capped->current_speed(), 0.25 / 0.60, 1e-9);
    EXPECT_EQ(*uncapped->current_speed(), 1.0);

    auto beside_capped = JobHandle::attach(file_, "0", kProfile, std::nullopt, std::nullopt);
    auto beside_uncapped = JobHandle::attach(file_, "1", kProfile, std::nullopt, std::nullopt);
    ASSERT_TRUE(beside_capped && beside_uncapped);
    ASSERT_TRUE(beside_capped->set_active(true));
    ASSERT_TRUE(beside_uncapped->set_active(true));
    EXPECT_GT(*beside_capped->current_speed(), *beside_uncapped->current_speed());
    beside_capped->detach();
    beside_uncapped->detach();

    auto set = model::parse_gpu_set("2xA100-40GB");
    ASSERT_TRUE(set.has_value());
    auto timeslice = open_emulated(EmulatorOptions{*set, model::SharingMode::Timeslice, file_});
    ASSERT_TRUE(timeslice.has_value()) << timeslice.error().message;
    EXPECT_EQ(*capped->current_speed(), 1.0);
}

// This test verifies that attach refuses a percentage that is not one above 0 and at most 100,
// naming the variable, and that the three-argument attach reads it from the environment.
TEST_F(EmulatedMpsTest, BadThreadPercentagesAreRefusedAndTheEnvironmentIsRead) {
    for (const char* bad : {"0", "150", "half", "50%", ""}) {
        auto job = JobHandle::attach(file_, "0", kProfile, std::nullopt, bad);
        ASSERT_FALSE(job.has_value()) << bad;
        EXPECT_THAT(job.error().message,
                    HasSubstr(std::string("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='") + bad +
                              "' is not a percentage above 0 and at most 100"));
    }
    ASSERT_EQ(::setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30", 1), 0);
    auto from_env = JobHandle::attach(file_, "0", kProfile);
    ::unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    ASSERT_TRUE(from_env.has_value()) << from_env.error().message;
    ASSERT_TRUE(from_env->set_active(true));
    EXPECT_NEAR(*from_env->current_speed(), 0.30 / 0.60, 1e-9);
}

}  // namespace
}  // namespace carma::device
