#include "device/dcgm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/fake_nvml_fixture.h"
#include "device/nvml.h"

// The build points this at the fake built from tests/fake_dcgm/fake_dcgm.c.
#ifndef CARMA_FAKE_DCGM_PATH
#error "CARMA_FAKE_DCGM_PATH must name the fake DCGM library (libfake-dcgm.so)"
#endif

namespace carma::device {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using fake_nvml::clear_knobs;
using fake_nvml::set_env;

// Every test starts from the fake DCGM and the fake NVML with their default GPUs, and leaves no
// knob behind.
class DcgmTest : public fake_nvml::FakeNvmlTest {
protected:
    void SetUp() override {
        FakeNvmlTest::SetUp();
        clear_knobs("FAKE_DCGM_");
        set_env(kDcgmLibraryEnv, CARMA_FAKE_DCGM_PATH);
        options_.on_note = [this](std::string_view note) { notes_.emplace_back(note); };
    }
    void TearDown() override {
        clear_knobs("FAKE_DCGM_");
        ::unsetenv(kDcgmLibraryEnv);
        if (!record_.empty()) {
            std::remove(record_.c_str());
        }
        FakeNvmlTest::TearDown();
    }

    std::unique_ptr<GpuBackend> open_fake() override {
        auto backend = open_dcgm(options_);
        if (!backend) {
            ADD_FAILURE() << backend.error().message;
            return nullptr;
        }
        return std::move(*backend);
    }

    // Makes the fake write down the calls it gets; returns what it wrote so far with recorded().
    void record_calls() {
        record_ = ::testing::TempDir() + "fake-dcgm-record-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::remove(record_.c_str());
        set_env("FAKE_DCGM_RECORD", record_);
    }
    std::string recorded() const {
        std::ifstream in(record_);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }

    DcgmOptions options_;
    std::vector<std::string> notes_;

private:
    std::string record_;
};

// This test verifies that the backend opens on DCGM, lists NVML's GPUs and labels every metric
// of every sample as coming from DCGM.
TEST_F(DcgmTest, OpensAndLabelsSourcesDcgm) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->name(), "dcgm");
    const auto& gpus = backend->gpus();
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[0].uuid, "GPU-fa4e0000-0000-4000-8000-000000000000");
    EXPECT_EQ(gpus[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
    EXPECT_EQ(gpus[1].total_mib, 80 * 1024);
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    for (const GpuSample& s : samples) {
        EXPECT_EQ(s.error, "") << "GPU " << s.index;
        EXPECT_EQ(s.sources, MetricSources::all(MetricSource::Dcgm)) << "GPU " << s.index;
    }
    EXPECT_TRUE(notes_.empty());
}

// This test verifies that the numbers are the fake DCGM's (not the fake NVML's), converted to
// CARMA's units, while the processes still come from NVML.
TEST_F(DcgmTest, ValuesMatchTheFake) {
    set_env("FAKE_DCGM_GPU0_SMACT", "0.75");
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);

    const GpuSample& busy = samples[0];
    EXPECT_EQ(busy.index, 0);
    EXPECT_EQ(busy.used_mib, 12288);
    EXPECT_EQ(busy.free_mib, 40960 - 12288);
    EXPECT_DOUBLE_EQ(busy.smact.value_or(-1), 0.75);
    EXPECT_DOUBLE_EQ(busy.smocc.value_or(-1), 0.30);
    EXPECT_DOUBLE_EQ(busy.drama.value_or(-1), 0.40);
    EXPECT_DOUBLE_EQ(busy.util.value_or(-1), 0.70);
    EXPECT_DOUBLE_EQ(busy.power_w.value_or(-1), 180.5);
    ASSERT_EQ(busy.processes.size(), 1U);
    EXPECT_EQ(busy.processes[0].pid, 4242);

    const GpuSample& idle = samples[1];
    EXPECT_EQ(idle.index, 1);
    EXPECT_EQ(idle.used_mib, 1024);
    EXPECT_EQ(idle.free_mib, 81920 - 1024);
    EXPECT_DOUBLE_EQ(idle.smact.value_or(-1), 0.05);
    EXPECT_DOUBLE_EQ(idle.smocc.value_or(-1), 0.02);
    EXPECT_DOUBLE_EQ(idle.drama.value_or(-1), 0.01);
    EXPECT_DOUBLE_EQ(idle.util.value_or(-1), 0.03);
    EXPECT_DOUBLE_EQ(idle.power_w.value_or(-1), 65.25);
    EXPECT_TRUE(idle.processes.empty());
}

// This test verifies that a sample reads DCGM now, not what was seen when opening.
TEST_F(DcgmTest, SampleFollowsTheGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_DCGM_GPU0_DRAMA", "0.125");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_DOUBLE_EQ(samples[0].drama.value_or(-1), 0.125);
}

// This test verifies that DCGM's GPU ids are matched to NVML's GPUs by UUID, not by number.
TEST_F(DcgmTest, MatchesGpusByUuid) {
    set_env("FAKE_DCGM_SWAP_IDS", "1");
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_DOUBLE_EQ(samples[0].power_w.value_or(-1), 180.5);
    EXPECT_DOUBLE_EQ(samples[1].power_w.value_or(-1), 65.25);
}

// This test verifies that where DCGM cannot say a GPU's UUID, its NVML index matches it.
TEST_F(DcgmTest, MatchesByNvmlIndexWithoutUuid) {
    set_env("FAKE_DCGM_SWAP_IDS", "1");
    set_env("FAKE_DCGM_BLANK", "54");
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_DOUBLE_EQ(samples[0].power_w.value_or(-1), 180.5);
    EXPECT_DOUBLE_EQ(samples[1].power_w.value_or(-1), 65.25);
}

// This test verifies that blank and not-supported values are unknown, labelled unavailable, and
// that the other metrics are unaffected.
TEST_F(DcgmTest, BlankValuesAreUnknown) {
    set_env("FAKE_DCGM_BLANK", "1003,155");
    set_env("FAKE_DCGM_UNSUPPORTED", "203");
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    for (const GpuSample& s : samples) {
        EXPECT_FALSE(s.smocc.has_value());
        EXPECT_EQ(s.sources.smocc, MetricSource::Unavailable);
        EXPECT_FALSE(s.power_w.has_value());
        EXPECT_EQ(s.sources.power, MetricSource::Unavailable);
        EXPECT_FALSE(s.util.has_value());
        EXPECT_EQ(s.sources.util, MetricSource::Unavailable);
        EXPECT_TRUE(s.smact.has_value());
        EXPECT_EQ(s.sources.smact, MetricSource::Dcgm);
        EXPECT_EQ(s.sources.memory, MetricSource::Dcgm);
        EXPECT_EQ(s.error, "");
    }
}

// This test verifies that without DCGM's framebuffer fields memory still comes from NVML,
// labelled so (memory is never unknown).
TEST_F(DcgmTest, MemoryFallsBackToNvml) {
    set_env("FAKE_DCGM_BLANK", "251,252");
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].used_mib, 10 * 1024);  // the fake NVML's
    EXPECT_EQ(samples[0].sources.memory, MetricSource::Nvml);
    EXPECT_EQ(samples[0].sources.power, MetricSource::Dcgm);
}

// This test verifies that when the profiling fields cannot be watched the other fields are
// still DCGM's, SMACT/SMOCC/DRAMA are unavailable, and exactly one note says why.
TEST_F(DcgmTest, WithoutProfilingTheOtherFieldsStay) {
    set_env("FAKE_DCGM_NO_PROFILING", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    for (int round = 0; round < 2; ++round) {
        const auto samples = sample(*backend);
        ASSERT_EQ(samples.size(), 2U);
        for (const GpuSample& s : samples) {
            EXPECT_EQ(s.error, "");
            EXPECT_FALSE(s.smact.has_value());
            EXPECT_FALSE(s.smocc.has_value());
            EXPECT_FALSE(s.drama.has_value());
            EXPECT_EQ(s.sources.smact, MetricSource::Unavailable);
            EXPECT_EQ(s.sources.smocc, MetricSource::Unavailable);
            EXPECT_EQ(s.sources.drama, MetricSource::Unavailable);
            EXPECT_EQ(s.sources.util, MetricSource::Dcgm);
            EXPECT_EQ(s.sources.power, MetricSource::Dcgm);
            EXPECT_EQ(s.sources.energy, MetricSource::Dcgm);
            EXPECT_EQ(s.sources.memory, MetricSource::Dcgm);
        }
        EXPECT_DOUBLE_EQ(samples[0].power_w.value_or(-1), 180.5);
    }
    ASSERT_EQ(notes_.size(), 1U);
    EXPECT_THAT(notes_[0], HasSubstr("profiling fields"));
    EXPECT_THAT(notes_[0], HasSubstr("dcgmWatchFields"));
    EXPECT_THAT(notes_[0], HasSubstr("Feature not supported"));
    EXPECT_THAT(notes_[0], HasSubstr("data-centre GPUs"));
    EXPECT_THAT(notes_[0], HasSubstr("SMACT, SMOCC and DRAMA are unavailable"));
}

// This test verifies that on a Hopper GPU whose DCGM profiling fields are unavailable, NVML's GPM
// still measures SMACT/SMOCC/DRAMA: those are kept (labelled nvml-gpm), not thrown away.
TEST_F(DcgmTest, WithoutProfilingGpmStillMeasures) {
    set_env("FAKE_DCGM_NO_PROFILING", "1");
    set_env("FAKE_NVML_GPM", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // one GPM period
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].sources.smact, MetricSource::NvmlGpm);
    EXPECT_EQ(samples[0].sources.smocc, MetricSource::NvmlGpm);
    EXPECT_EQ(samples[0].sources.drama, MetricSource::NvmlGpm);
    EXPECT_DOUBLE_EQ(samples[0].smocc.value_or(-1), 0.20);  // the fake NVML's 20 %
    EXPECT_EQ(samples[0].sources.power, MetricSource::Dcgm);
}

// This test verifies that counters held by another profiler are named as the reason.
TEST_F(DcgmTest, ProfilingInUseSaysSo) {
    set_env("FAKE_DCGM_NO_PROFILING", "busy");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(notes_.size(), 1U);
    EXPECT_THAT(notes_[0], HasSubstr("another profiler holds the counters"));
    EXPECT_THAT(notes_[0], HasSubstr("DCGM error -34"));
}

// This test verifies that profiling refused for want of privilege says what to change.
TEST_F(DcgmTest, ProfilingWithoutRootSaysSo) {
    set_env("FAKE_DCGM_NO_PROFILING", "root");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(notes_.size(), 1U);
    EXPECT_THAT(notes_[0], HasSubstr("NVreg_RestrictProfilingToAdminUsers=0"));
}

// This test verifies that the backend runs DCGM embedded in automatic mode, watches its fields
// once a second, and stops DCGM when closed.
TEST_F(DcgmTest, WatchesOnceASecondEmbedded) {
    record_calls();
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const std::string opened = recorded();
    EXPECT_THAT(opened, HasSubstr("embedded mode=1\n"));
    EXPECT_THAT(opened, HasSubstr("watch fields=54,52,155,156,203,250,251,252 period=1000000"));
    EXPECT_THAT(opened, HasSubstr("watch fields=1002,1003,1005 period=1000000"));
    EXPECT_THAT(opened, Not(HasSubstr("connect")));
    backend.reset();
    const std::string closed = recorded();
    EXPECT_THAT(closed, HasSubstr("stop-embedded\n"));
    EXPECT_THAT(closed, HasSubstr("shutdown\n"));
}

// This test verifies that with a host the backend connects to that nv-hostengine (asking it to
// drop our watches when we go), names itself after it, and disconnects when closed.
TEST_F(DcgmTest, HostModeConnects) {
    record_calls();
    options_.host = "10.1.2.3:5555";
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->name(), "dcgm@10.1.2.3:5555");
    EXPECT_THAT(recorded(), HasSubstr("connect host=10.1.2.3:5555 persist=0 timeout=5000 unix=0"));
    EXPECT_THAT(recorded(), Not(HasSubstr("embedded")));
    EXPECT_EQ(sample(*backend).size(), 2U);
    backend.reset();
    EXPECT_THAT(recorded(), HasSubstr("disconnect\n"));
}

// This test verifies that a Unix socket path is passed as one.
TEST_F(DcgmTest, HostModeTakesAUnixSocket) {
    record_calls();
    options_.host = "unix:/run/nvidia-dcgm.sock";
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_THAT(recorded(), HasSubstr("connect host=/run/nvidia-dcgm.sock persist=0"));
    EXPECT_THAT(recorded(), HasSubstr("unix=1"));
}

// This test verifies that an unreachable host engine is an error naming it, with a hint.
TEST_F(DcgmTest, ConnectFailureNamesTheHost) {
    set_env("FAKE_DCGM_FAIL_CONNECT", "1");
    options_.host = "gpu-node-7:5555";
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_EQ(backend.error().code, ErrorCode::Io);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM not available"), HasSubstr("gpu-node-7:5555"),
                      HasSubstr("dcgmConnect_v2"), HasSubstr("nv-hostengine"),
                      HasSubstr("--gpus nvml")));
}

// This test verifies that a failing embedded start is an error carrying DCGM's reason.
TEST_F(DcgmTest, StartFailureIsAnError) {
    set_env("FAKE_DCGM_FAIL_START", "1");
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM not available"), HasSubstr("dcgmStartEmbedded"),
                      HasSubstr("DCGM initialization error"), HasSubstr("--gpus nvml")));
}

// This test verifies that a failing dcgmInit is an error naming the library.
TEST_F(DcgmTest, InitFailureIsAnError) {
    set_env("FAKE_DCGM_FAIL_INIT", "1");
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM not available"), HasSubstr(CARMA_FAKE_DCGM_PATH),
                      HasSubstr("dcgmInit")));
}

// This test verifies that a library that is not there is an error naming it, with a hint.
TEST_F(DcgmTest, MissingLibraryIsAnError) {
    options_.library = "/nonexistent/libdcgm.so.4";
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_EQ(backend.error().code, ErrorCode::Io);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM not available"), HasSubstr("/nonexistent/libdcgm.so.4"),
                      HasSubstr("cannot open shared object file"),
                      HasSubstr("install datacenter-gpu-manager or use --gpus nvml")));
}

// This test verifies that CARMA_DCGM_LIBRARY names the library when the options do not, and
// that the options win over it.
TEST_F(DcgmTest, LibraryChoiceOrder) {
    set_env(kDcgmLibraryEnv, "/nonexistent/from-env.so");
    auto from_env = open_dcgm(options_);
    ASSERT_FALSE(from_env);
    EXPECT_THAT(from_env.error().message, HasSubstr("/nonexistent/from-env.so"));

    options_.library = CARMA_FAKE_DCGM_PATH;
    auto from_options = open_dcgm(options_);
    EXPECT_TRUE(from_options) << from_options.error().message;
}

// This test verifies that without any choice DCGM 4's library is tried, then DCGM 3's.
TEST_F(DcgmTest, DefaultsToDcgm4Then3) {
    ::unsetenv(kDcgmLibraryEnv);
    auto backend = open_dcgm(options_);
    if (backend) {
        // A machine with DCGM and a driver: the default found them.
        EXPECT_FALSE((*backend)->gpus().empty());
        return;
    }
    if (backend.error().message.find("needs NVML") != std::string::npos) {
        return;  // a machine with DCGM but no driver: DCGM's library was found by default
    }
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("libdcgm.so.4"), HasSubstr("also tried libdcgm.so.3")));
}

// This test verifies that a library lacking DCGM's entry points (here NVML posing as DCGM) is
// an error naming them.
TEST_F(DcgmTest, MissingEntryPointsAreNamed) {
    options_.library = CARMA_FAKE_NVML_PATH;
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM not available"), HasSubstr(CARMA_FAKE_NVML_PATH),
                      HasSubstr("lacks dcgmInit"), HasSubstr("dcgmGetLatestValuesForFields")));
}

// This test verifies that without NVML the backend does not open, and says why.
TEST_F(DcgmTest, NeedsNvml) {
    set_env(kNvmlLibraryEnv, "/nonexistent/libnvidia-ml.so.1");
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("needs NVML"), HasSubstr("/nonexistent/libnvidia-ml.so.1")));
}

// This test verifies that a GPU whose DCGM read fails reports it in its own sample, keeping its
// last values, while the other is sampled as usual; and that it recovers.
TEST_F(DcgmTest, ReadErrorsStayWithTheirGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto before = sample(*backend);
    ASSERT_EQ(before.size(), 2U);

    set_env("FAKE_DCGM_GPU1_ERRORS", "1");
    const auto lost = sample(*backend);
    ASSERT_EQ(lost.size(), 2U);
    EXPECT_EQ(lost[0].error, "");
    EXPECT_DOUBLE_EQ(lost[0].power_w.value_or(-1), 180.5);
    EXPECT_EQ(lost[1].index, 1);
    EXPECT_THAT(lost[1].error, AllOf(HasSubstr("GPU 1"), HasSubstr("GPU is lost"),
                                     HasSubstr("dcgmGetLatestValuesForFields")));
    EXPECT_EQ(lost[1].used_mib, before[1].used_mib);
    EXPECT_EQ(lost[1].power_w, before[1].power_w);

    ::unsetenv("FAKE_DCGM_GPU1_ERRORS");
    const auto after = sample(*backend);
    ASSERT_EQ(after.size(), 2U);
    EXPECT_EQ(after[1].error, "");
}

// This test verifies that an NVML read failure (processes unknown) is that GPU's error too.
TEST_F(DcgmTest, NvmlErrorsStayWithTheirGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_LOST_GPU", "1");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].error, "");
    EXPECT_THAT(samples[1].error, HasSubstr("GPU is lost"));
}

// This test verifies that energy counts from opening (not the driver's lifetime total, which is
// far larger in the fake) and never goes back.
TEST_F(DcgmTest, EnergyCountsFromOpen) {
    std::vector<GpuSample> first, second;
    ASSERT_NO_FATAL_FAILURE(two_samples(first, second));
    for (int g = 0; g < 2; ++g) {
        ASSERT_TRUE(first[g].energy_j.has_value()) << "GPU " << g;
        EXPECT_GT(*first[g].energy_j, 0.0) << "GPU " << g;
        EXPECT_LT(*first[g].energy_j, 1000.0) << "GPU " << g;
        EXPECT_GT(second[g].energy_j.value_or(0), *first[g].energy_j) << "GPU " << g;
    }
    // A tenth of a second at 180.5 W per read, in the fake.
    EXPECT_DOUBLE_EQ(*first[0].energy_j, 18.05);
}

// This test verifies that a sample's age comes from DCGM's timestamps.
TEST_F(DcgmTest, AgeComesFromTimestamps) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_DCGM_AGE_S", "30");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_GE(samples[0].age_s, 30.0);
    EXPECT_LT(samples[0].age_s, 3600.0);
}

// This test verifies that a GPU DCGM does not report keeps NVML's sample, and one note says so.
TEST_F(DcgmTest, GpuDcgmDoesNotReportKeepsNvml) {
    set_env("FAKE_DCGM_GPU_COUNT", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(notes_.size(), 1U);
    EXPECT_THAT(notes_[0], AllOf(HasSubstr("does not report GPU 1"),
                                 HasSubstr("GPU-fa4e0000-0000-4000-8000-000000000001")));
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].sources.power, MetricSource::Dcgm);
    EXPECT_EQ(samples[1].error, "");
    EXPECT_EQ(samples[1].sources.power, MetricSource::Nvml);
    EXPECT_DOUBLE_EQ(samples[1].power_w.value_or(-1), 60.0);  // the fake NVML's
}

// This test verifies that a host engine that reports none of this machine's GPUs (another
// machine's) is refused rather than read as them.
TEST_F(DcgmTest, ForeignGpusAreRefused) {
    set_env("FAKE_DCGM_FOREIGN", "1");
    options_.host = "other-node";
    auto backend = open_dcgm(options_);
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                AllOf(HasSubstr("DCGM at other-node reports none of the GPUs"),
                      HasSubstr("GPU-0f0f0000-0000-4000-8000-00000000aaaa"),
                      HasSubstr("GPU-fa4e0000-0000-4000-8000-000000000000")));
}

// This test verifies that backends can be opened and closed again, two at once (their DCGM
// groups need distinct names).
TEST_F(DcgmTest, OpensTwiceAndAgain) {
    ASSERT_NO_FATAL_FAILURE(open_two_close_one([](const std::vector<GpuSample>& samples) {
        EXPECT_EQ(samples[0].sources.smact, MetricSource::Dcgm);
    }));
}

}  // namespace
}  // namespace carma::device
