#include "device/nvml.h"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device/fake_nvml_fixture.h"
#include "device/proc_names.h"

namespace carma::device {
namespace {

using ::testing::DoubleEq;
using ::testing::HasSubstr;
using ::testing::Optional;
using fake_nvml::set_env;

class NvmlTest : public fake_nvml::FakeNvmlTest {};

// What the fake NVML's last nvmlDeviceGetProcessUtilization call about GPU 0 asked to be newer
// than (not NVML: tests/fake_nvml/fake_nvml.c).
unsigned long long fake_last_seen() {
    void* library = ::dlopen(CARMA_FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) {
        ADD_FAILURE() << "the fake NVML is not loaded";
        return 0;
    }
    using Fn = unsigned long long (*)(unsigned int);
    auto fn = reinterpret_cast<Fn>(::dlsym(library, "fakeNvmlLastSeenTimeStamp"));
    const unsigned long long seen = fn != nullptr ? fn(0) : 0;
    ::dlclose(library);
    if (fn == nullptr) {
        ADD_FAILURE() << "the fake NVML lacks fakeNvmlLastSeenTimeStamp";
    }
    return seen;
}
class GpuHealthNvmlTest : public fake_nvml::FakeNvmlTest {};

// The processes of one sample, by pid.
const GpuProcess* find_process(const GpuSample& sample, int pid) {
    for (const GpuProcess& p : sample.processes) {
        if (p.pid == pid) {
            return &p;
        }
    }
    return nullptr;
}

// A real process whose argv[0] is .../nvidia-cuda-mps-server: a copy of sleep under that name,
// in a directory of its own, killed when the test ends.
class FakeMpsServer {
public:
    FakeMpsServer() {
        namespace fs = std::filesystem;
        std::string dir_template = (fs::temp_directory_path() / "carma-mps-XXXXXX").string();
        if (::mkdtemp(dir_template.data()) == nullptr) {
            return;
        }
        dir_ = dir_template;
        const fs::path sleep = fs::exists("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep";
        const fs::path server = dir_ / "nvidia-cuda-mps-server";
        std::error_code ec;
        fs::copy_file(sleep, server, ec);
        if (ec) {
            return;
        }
        std::string path = server.string();
        std::string seconds = "300";
        char* argv[] = {path.data(), seconds.data(), nullptr};
        // posix_spawn returns once the program is executed, so /proc shows the new name.
        if (::posix_spawn(&pid_, path.c_str(), nullptr, nullptr, argv, environ) != 0) {
            pid_ = 0;
        }
    }
    ~FakeMpsServer() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
        }
    }
    FakeMpsServer(const FakeMpsServer&) = delete;
    FakeMpsServer& operator=(const FakeMpsServer&) = delete;

    pid_t pid() const { return pid_; }

private:
    std::filesystem::path dir_;
    pid_t pid_ = 0;
};

// --- listing and sampling --------------------------------------------------------------------

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
    EXPECT_FALSE(gpus[0].mig_enabled);
    EXPECT_EQ(gpus[1].index, 1);
    EXPECT_EQ(gpus[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
    EXPECT_EQ(gpus[1].name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(gpus[1].total_mib, 80 * 1024);
    EXPECT_FALSE(gpus[1].mig_enabled);
}

// This test verifies that bytes become MiB, percentages fractions, milliwatts watts, that SMACT
// and DRAMA are the utilisation rates and that SMOCC, which plain NVML cannot give, is unknown.
TEST_F(NvmlTest, SampleConvertsUnits) {
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);

    const GpuSample& busy = samples[0];
    EXPECT_EQ(busy.error, "");
    EXPECT_EQ(busy.index, 0);
    EXPECT_EQ(busy.used_mib, 10 * 1024);
    EXPECT_EQ(busy.free_mib, 30 * 1024);
    EXPECT_THAT(busy.util, Optional(DoubleEq(0.5)));
    EXPECT_THAT(busy.smact, Optional(DoubleEq(0.5)));   // 50 % busy
    EXPECT_THAT(busy.drama, Optional(DoubleEq(0.25)));  // 25 % memory busy
    EXPECT_EQ(busy.smocc, std::nullopt);
    EXPECT_THAT(busy.power_w, Optional(DoubleEq(150.0)));
    EXPECT_DOUBLE_EQ(busy.age_s, 0.0);

    const GpuSample& idle = samples[1];
    EXPECT_EQ(idle.error, "");
    EXPECT_EQ(idle.index, 1);
    EXPECT_EQ(idle.used_mib, 0);
    EXPECT_EQ(idle.free_mib, 80 * 1024);
    EXPECT_THAT(idle.util, Optional(DoubleEq(0.0)));  // a real idle reading, not an unknown
    EXPECT_THAT(idle.drama, Optional(DoubleEq(0.0)));
    EXPECT_THAT(idle.power_w, Optional(DoubleEq(60.0)));
    EXPECT_TRUE(idle.processes.empty());
}

// This test verifies that plain NVML labels its numbers honestly: SMACT and DRAMA are NVML's
// proxies, not real activity; SMOCC is unavailable; memory, utilisation, power and energy NVML's.
TEST_F(NvmlTest, PlainNvmlLabelsProxies) {
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    for (const GpuSample& s : samples) {
        EXPECT_EQ(to_string(s.sources.memory), "nvml") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.util), "nvml") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.smact), "nvml") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.drama), "nvml") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.smocc), "unavailable") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.power), "nvml") << "GPU " << s.index;
        EXPECT_EQ(to_string(s.sources.energy), "nvml") << "GPU " << s.index;
        EXPECT_FALSE(is_real_activity(s.sources.smact));
        EXPECT_FALSE(is_real_activity(s.sources.drama));
    }
}

// This test verifies that a GPU reporting no utilisation has utilisation, SMACT and DRAMA unknown
// (not 0, and not an error), while its other numbers and the other GPU are as usual.
TEST_F(NvmlTest, UtilisationNotSupportedIsUnknown) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU0_NO_UTIL", "1");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);

    const GpuSample& gpu0 = samples[0];
    EXPECT_EQ(gpu0.error, "");
    EXPECT_EQ(gpu0.util, std::nullopt);
    EXPECT_EQ(gpu0.smact, std::nullopt);
    EXPECT_EQ(gpu0.drama, std::nullopt);
    EXPECT_EQ(gpu0.smocc, std::nullopt);
    EXPECT_EQ(to_string(gpu0.sources.util), "unavailable");
    EXPECT_EQ(to_string(gpu0.sources.smact), "unavailable");
    EXPECT_EQ(to_string(gpu0.sources.drama), "unavailable");
    EXPECT_EQ(gpu0.used_mib, 10 * 1024);
    EXPECT_THAT(gpu0.power_w, Optional(DoubleEq(150.0)));
    EXPECT_EQ(gpu0.processes.size(), 1U);

    EXPECT_THAT(samples[1].util, Optional(DoubleEq(0.0)));
    EXPECT_EQ(to_string(samples[1].sources.smact), "nvml");
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

// --- processes, MPS ---------------------------------------------------------------------------

// This test verifies that the processes on a GPU are listed with their memory in MiB.
TEST_F(NvmlTest, ListsProcesses) {
    const auto samples = first_sample();
    ASSERT_EQ(samples.size(), 2U);
    ASSERT_EQ(samples[0].processes.size(), 1U);
    EXPECT_EQ(samples[0].processes[0].pid, 4242);
    EXPECT_EQ(samples[0].processes[0].used_mib, 10 * 1024);
    EXPECT_FALSE(samples[0].processes[0].mps_server);
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

// This test verifies that MPS clients, which NVML lists apart from the compute processes, are
// listed with the compute processes, in pid order, none of them flagged as a server.
TEST_F(NvmlTest, ListsMpsClients) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU0_MPS_PROCS", "5002:2048,5001:1024");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    const auto& processes = samples[0].processes;
    ASSERT_EQ(processes.size(), 3U);
    EXPECT_EQ(processes[0].pid, 4242);
    EXPECT_EQ(processes[1].pid, 5001);
    EXPECT_EQ(processes[1].used_mib, 1024);
    EXPECT_EQ(processes[2].pid, 5002);
    EXPECT_EQ(processes[2].used_mib, 2048);
    for (const GpuProcess& p : processes) {
        EXPECT_FALSE(p.mps_server) << "pid " << p.pid;
    }
    EXPECT_TRUE(samples[1].processes.empty());
}

// This test verifies that a pid on both lists is one process, with the larger of its two
// memory figures (the lists describe the same allocations).
TEST_F(NvmlTest, MergesAProcessOnBothListsByPid) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU1_COMPUTE_PROCS", "5001:512,5003:64");
    set_env("FAKE_NVML_GPU1_MPS_PROCS", "5001:1024");
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    const auto& processes = samples[1].processes;
    ASSERT_EQ(processes.size(), 2U);
    EXPECT_EQ(processes[0].pid, 5001);
    EXPECT_EQ(processes[0].used_mib, 1024);
    EXPECT_EQ(processes[1].pid, 5003);
    EXPECT_EQ(processes[1].used_mib, 64);
}

// This test verifies each process's SM activity from nvmlDeviceGetProcessUtilization: the mean
// smUtil of its samples since the last read, 0 for a listed process without a sample (it was
// not busy), and the next read asks only for newer samples.
TEST_F(NvmlTest, ReadsEachProcessActivity) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    set_env("FAKE_NVML_GPU0_COMPUTE_PROCS", "5001:512,5002:512,5003:64");
    set_env("FAKE_NVML_GPU0_PROC_UTIL", "5001:60,5002:20,5001:40,9999:90");
    const auto first = sample(*backend);
    ASSERT_EQ(first.size(), 2U);
    EXPECT_THAT(find_process(first[0], 5001)->activity, Optional(DoubleEq(0.5)));
    EXPECT_THAT(find_process(first[0], 5002)->activity, Optional(DoubleEq(0.2)));
    EXPECT_THAT(find_process(first[0], 5003)->activity, Optional(DoubleEq(0.0)));
    const unsigned long long seen_first = fake_last_seen();
    set_env("FAKE_NVML_GPU0_PROC_UTIL", "5003:100");
    const auto second = sample(*backend);
    EXPECT_GT(fake_last_seen(), seen_first);  // the newest stamp of the first read
    EXPECT_THAT(find_process(second[0], 5001)->activity, Optional(DoubleEq(0.0)));
    EXPECT_THAT(find_process(second[0], 5003)->activity, Optional(DoubleEq(1.0)));
}

// This test verifies that no busy process (NOT_FOUND) reads as activity 0 for every process,
// and that a refusal (NOT_SUPPORTED) leaves activity unknown without failing the sample.
TEST_F(NvmlTest, ProcessActivityWhenNoneIsBusyOrTheDriverRefuses) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    auto samples = sample(*backend);
    ASSERT_EQ(samples[0].processes.size(), 1U);
    EXPECT_THAT(samples[0].processes[0].activity, Optional(DoubleEq(0.0)));
    set_env("FAKE_NVML_GPU0_PROC_UTIL", "unsupported");
    samples = sample(*backend);
    EXPECT_EQ(samples[0].error, "");
    ASSERT_EQ(samples[0].processes.size(), 1U);
    EXPECT_FALSE(samples[0].processes[0].activity.has_value());
}

// This test verifies that the utilisation buffer grows through INSUFFICIENT_SIZE when more
// samples come back than it first holds.
TEST_F(NvmlTest, GrowsTheUtilisationBuffer) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    std::string procs;
    std::string util;
    for (int i = 0; i < 100; ++i) {
        procs += fmt::format("{}{}:16", i == 0 ? "" : ",", 6000 + i);
        util += fmt::format("{}{}:{}", i == 0 ? "" : ",", 6000 + i, i % 2 == 0 ? 10 : 30);
    }
    set_env("FAKE_NVML_GPU0_COMPUTE_PROCS", procs);
    set_env("FAKE_NVML_GPU0_PROC_UTIL", util);
    const auto samples = sample(*backend);
    ASSERT_EQ(samples[0].processes.size(), 100U);
    for (const GpuProcess& p : samples[0].processes) {
        EXPECT_THAT(p.activity, Optional(DoubleEq((p.pid - 6000) % 2 == 0 ? 0.1 : 0.3)));
    }
}

// This test verifies that an MPS server process (a real process whose argv[0] is
// nvidia-cuda-mps-server) is flagged, and its clients are not.
TEST_F(NvmlTest, FlagsTheMpsServer) {
    FakeMpsServer server;
    if (server.pid() <= 0) {
        FAIL() << "cannot start a process named nvidia-cuda-mps-server here";
    }
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    // Under MPS the compute list holds the server, the MPS list its clients.
    set_env("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:300", server.pid()));
    set_env("FAKE_NVML_GPU0_MPS_PROCS", fmt::format("{}:1024", ::getpid()));
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    ASSERT_EQ(samples[0].processes.size(), 2U);
    const GpuProcess* mps_server = find_process(samples[0], server.pid());
    ASSERT_NE(mps_server, nullptr);
    EXPECT_TRUE(mps_server->mps_server);
    EXPECT_EQ(mps_server->used_mib, 300);
    const GpuProcess* client = find_process(samples[0], ::getpid());
    ASSERT_NE(client, nullptr);
    EXPECT_FALSE(client->mps_server);
    EXPECT_EQ(client->used_mib, 1024);
}

// This test verifies the names that make an MPS server: argv[0]'s last component, or the comm
// the kernel cuts to 15 characters.
TEST(MpsServerNameTest, RecognisesTheServer) {
    EXPECT_TRUE(is_mps_server_name("nvidia-cuda-mps-server", ""));
    EXPECT_TRUE(is_mps_server_name("/usr/bin/nvidia-cuda-mps-server", "whatever"));
    EXPECT_TRUE(is_mps_server_name("", "nvidia-cuda-mps"));  // argv gone (a zombie)
    EXPECT_FALSE(is_mps_server_name("/opt/nvidia-cuda-mps-server/python", "python"));
    EXPECT_FALSE(is_mps_server_name("nvidia-cuda-mps-server-wrapper", "nvidia-cuda-mp"));
    EXPECT_FALSE(is_mps_server_name("python", "python"));
    EXPECT_FALSE(is_mps_server_name("", ""));
}

// This test verifies that an ordinary process, a gone one and a nonsense pid are not servers.
TEST(MpsServerNameTest, OrdinaryAndMissingProcessesAreNotServers) {
    EXPECT_FALSE(is_mps_server_process(::getpid()));
    EXPECT_FALSE(is_mps_server_process(0));
    EXPECT_FALSE(is_mps_server_process(-1));
    EXPECT_FALSE(is_mps_server_process(1 << 30));  // above any pid_max
}

// --- MIG ------------------------------------------------------------------------------------

// This test verifies that a GPU in MIG mode is flagged, and that its utilisation, which NVML
// does not report in MIG mode, is unknown rather than 0.
TEST_F(NvmlTest, FlagsMigGpus) {
    set_env("FAKE_NVML_GPU1_MIG", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(backend->gpus().size(), 2U);
    EXPECT_FALSE(backend->gpus()[0].mig_enabled);
    EXPECT_TRUE(backend->gpus()[1].mig_enabled);
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[1].error, "");
    EXPECT_EQ(samples[1].util, std::nullopt);
    EXPECT_EQ(samples[1].smact, std::nullopt);
    EXPECT_EQ(samples[1].free_mib, 80 * 1024);
}

// This test verifies that a GPU without MIG (the query answers NOT_SUPPORTED) reads as MIG off.
TEST_F(NvmlTest, MigNotSupportedIsOff) {
    set_env("FAKE_NVML_GPU0_MIG", "unsupported");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_FALSE(backend->gpus()[0].mig_enabled);
    EXPECT_FALSE(backend->gpus()[1].mig_enabled);
}

// --- energy ---------------------------------------------------------------------------------

// This test verifies that energy counts from opening (not the driver's lifetime total, which is
// far larger in the fake) and never goes back.
TEST_F(NvmlTest, EnergyCountsFromOpen) {
    std::vector<GpuSample> first, second;
    ASSERT_NO_FATAL_FAILURE(two_samples(first, second));
    for (int g = 0; g < 2; ++g) {
        ASSERT_TRUE(first[g].energy_j.has_value()) << "GPU " << g;
        ASSERT_TRUE(second[g].energy_j.has_value()) << "GPU " << g;
        EXPECT_GT(*first[g].energy_j, 0.0) << "GPU " << g;
        EXPECT_LT(*first[g].energy_j, 1000.0) << "GPU " << g;
        EXPECT_GT(*second[g].energy_j, *first[g].energy_j) << "GPU " << g;
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
    ASSERT_TRUE(first[0].energy_j.has_value());
    ASSERT_TRUE(second[0].energy_j.has_value());
    EXPECT_GE(*first[0].energy_j, 0.0);
    // At least 20 ms at a steady 150 W.
    EXPECT_GE(*second[0].energy_j - *first[0].energy_j, 150.0 * 0.020 - 1e-9);
    EXPECT_EQ(to_string(second[0].sources.energy), "nvml");
}

// --- old drivers ----------------------------------------------------------------------------

// This test verifies that a driver without the _v3 process queries, the energy counter, MIG or
// GPM is still usable: processes (MPS clients too) come from _v2, energy from integrated power,
// activity from the utilisation proxies, and no GPU reads as MIG.
TEST_F(NvmlTest, WorksWithAnOldDriver) {
#ifndef CARMA_FAKE_NVML_OLD_PATH
    FAIL() << "CARMA_FAKE_NVML_OLD_PATH is not defined by the build";
#else
    set_env(kNvmlLibraryEnv, CARMA_FAKE_NVML_OLD_PATH);
    set_env("FAKE_NVML_GPM", "1");         // the old driver has no GPM to honour it
    set_env("FAKE_NVML_GPU1_MIG", "1");    // nor a MIG query
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    EXPECT_FALSE(backend->gpus()[1].mig_enabled);
    set_env("FAKE_NVML_GPU1_MIG", "0");
    set_env("FAKE_NVML_GPU0_MPS_PROCS", "5001:1024");
    const auto first = sample(*backend);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto second = sample(*backend);
    ASSERT_EQ(second.size(), 2U);
    EXPECT_EQ(second[0].error, "");
    ASSERT_EQ(second[0].processes.size(), 2U);
    EXPECT_EQ(second[0].processes[0].pid, 4242);
    EXPECT_EQ(second[0].processes[1].pid, 5001);
    // No per-process utilisation: activity unknown (energy is then shared equally).
    EXPECT_FALSE(second[0].processes[0].activity.has_value());
    ASSERT_TRUE(first[0].energy_j.has_value());
    ASSERT_TRUE(second[0].energy_j.has_value());
    EXPECT_GE(*second[0].energy_j - *first[0].energy_j, 150.0 * 0.020 - 1e-9);
    EXPECT_THAT(second[0].smact, Optional(DoubleEq(0.5)));
    EXPECT_EQ(to_string(second[0].sources.smact), "nvml");
    EXPECT_EQ(to_string(second[0].sources.smocc), "unavailable");
#endif
}

// --- opening --------------------------------------------------------------------------------

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
        // A machine with a driver: the default found it.
        EXPECT_FALSE((*backend)->gpus().empty());
        return;
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
    ASSERT_NO_FATAL_FAILURE(open_two_close_one());
}

// --- health: failing GPUs ---------------------------------------------------------------------

// This test verifies that a lost GPU reports it in its own sample, keeping its last values,
// while the other GPU is sampled as usual; and that it recovers.
TEST_F(GpuHealthNvmlTest, LostGpuStaysWithItsSample) {
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
    EXPECT_EQ(lost[1].power_w, before[1].power_w);

    ::unsetenv("FAKE_NVML_LOST_GPU");
    const auto after = sample(*backend);
    ASSERT_EQ(after.size(), 2U);
    EXPECT_EQ(after[1].error, "");
    ASSERT_TRUE(after[1].energy_j.has_value());
    EXPECT_GE(*after[1].energy_j, before[1].energy_j.value_or(0));
}

// This test verifies that an error storm on one GPU (every read of it failing, sample after
// sample) never fails sampling as a whole, stays with that GPU while the other is read afresh,
// and ends with a fresh, error-free sample once the GPU answers again.
TEST_F(GpuHealthNvmlTest, ErrorStormStaysWithItsGpu) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    const auto before = sample(*backend);
    ASSERT_EQ(before.size(), 2U);

    set_env("FAKE_NVML_GPU1_FAIL", "1");
    for (int round = 0; round < 5; ++round) {
        set_env("FAKE_NVML_GPU0_USED_MIB", std::to_string(1000 * (round + 1)));
        auto samples = backend->sample();
        ASSERT_TRUE(samples) << samples.error().message;
        ASSERT_EQ(samples->size(), 2U);
        const GpuSample& healthy = (*samples)[0];
        EXPECT_EQ(healthy.error, "") << "round " << round;
        EXPECT_EQ(healthy.used_mib, 1000 * (round + 1)) << "round " << round;  // read afresh
        EXPECT_DOUBLE_EQ(healthy.age_s, 0.0);
        const GpuSample& failing = (*samples)[1];
        EXPECT_EQ(failing.index, 1);
        EXPECT_THAT(failing.error, HasSubstr("GPU 1"));
        EXPECT_THAT(failing.error, HasSubstr("Unknown Error"));
        EXPECT_EQ(failing.free_mib, before[1].free_mib);  // the last values, stale
    }

    ::unsetenv("FAKE_NVML_GPU1_FAIL");
    const auto after = sample(*backend);
    ASSERT_EQ(after.size(), 2U);
    EXPECT_EQ(after[1].error, "");
    EXPECT_DOUBLE_EQ(after[1].age_s, 0.0);
    EXPECT_EQ(after[1].free_mib, 80 * 1024);
    EXPECT_THAT(after[1].power_w, Optional(DoubleEq(60.0)));
    EXPECT_EQ(to_string(after[1].sources.smact), "nvml");
}

// This test verifies that the stale sample of a failing GPU says how old its values are.
TEST_F(GpuHealthNvmlTest, FailingGpuSampleCarriesItsAge) {
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(sample(*backend).size(), 2U);
    set_env("FAKE_NVML_GPU0_FAIL", "1");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto failing = sample(*backend);
    ASSERT_EQ(failing.size(), 2U);
    EXPECT_NE(failing[0].error, "");
    EXPECT_GE(failing[0].age_s, 0.030);
    EXPECT_EQ(failing[1].error, "");
    EXPECT_DOUBLE_EQ(failing[1].age_s, 0.0);
}

// This test verifies that a GPU failing while the backend opens (its identity cannot be read)
// keeps its index with the fault named, never renumbering the GPUs after it, and is never read;
// the other GPU opens and samples as usual.
TEST_F(GpuHealthNvmlTest, GpuFailingAtOpenKeepsItsIndexWithItsFault) {
    set_env("FAKE_NVML_GPU1_FAIL", "1");
    auto backend = open_fake();
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(backend->gpus().size(), 2U);
    EXPECT_EQ(backend->gpus()[0].fault, "");
    EXPECT_EQ(backend->gpus()[1].index, 1);
    EXPECT_THAT(backend->gpus()[1].fault, HasSubstr("GPU 1"));
    EXPECT_THAT(backend->gpus()[1].fault, HasSubstr("Unknown Error"));
    const std::vector<GpuSample> samples = sample(*backend);
    ASSERT_EQ(samples.size(), 2U);
    EXPECT_EQ(samples[0].error, "");
    EXPECT_EQ(samples[0].used_mib, 10 * 1024);
    EXPECT_THAT(samples[1].error, HasSubstr("GPU 1"));
}

// This test verifies a GPU that fell off the bus before the daemon started, as NVML reports it
// (nvmlDeviceGetHandleByIndex_v2, or nvmlDeviceGetUUID, answers NVML_ERROR_GPU_IS_LOST): it is
// listed with its fault, and says what to check; the other GPU is usable.
TEST_F(GpuHealthNvmlTest, LostGpuAtOpenIsListedWithItsFault) {
    for (const char* knob : {"FAKE_NVML_GPU0_HANDLE", "FAKE_NVML_GPU0_UUID"}) {
        SCOPED_TRACE(knob);
        set_env(knob, "lost");
        auto backend = open_fake();
        ASSERT_NE(backend, nullptr);
        ASSERT_EQ(backend->gpus().size(), 2U);
        EXPECT_THAT(backend->gpus()[0].fault, HasSubstr("GPU is lost (NVML error 15)"));
        EXPECT_THAT(backend->gpus()[0].fault, HasSubstr("Xid"));
        EXPECT_EQ(backend->gpus()[1].fault, "");
        EXPECT_EQ(backend->gpus()[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
        ::unsetenv(knob);
    }
}

// This test verifies the driver/library version mismatch left by a driver update until the
// reboot: nvmlInit_v2 answers NVML_ERROR_LIB_RM_VERSION_MISMATCH, and the error says to reboot.
TEST_F(NvmlTest, VersionMismatchSaysToReboot) {
    set_env("FAKE_NVML_FAIL_INIT", "rm-mismatch");
    auto backend = open_nvml();
    ASSERT_FALSE(backend);
    EXPECT_THAT(backend.error().message,
                HasSubstr("nvmlInit_v2: Driver/library version mismatch (NVML error 18)"));
    EXPECT_THAT(backend.error().message, HasSubstr("reboot"));
}

}  // namespace
}  // namespace carma::device
