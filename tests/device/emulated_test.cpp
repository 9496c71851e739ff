// Emulated GPUs: the backend over the emulator file, the job-side API, and how they share it
// between processes (interference-model.md §10: slowdown, metrics, power, memory and OOM).

#include "device/emulated.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device/emulated_job.h"
#include "device/emulator_file.h"
#include "model/constants.h"

namespace carma::device {
namespace {

namespace fs = std::filesystem;

constexpr MiB kCapacity = model::kA100_40GB_UsableMiB;  // 40,441 MiB
const JobProfile kHeavy{0.90, 0.85, 0.30, 0.20};
const JobProfile kMedium{0.60, 0.50, 0.25, 0.40};

// Each test gets its own directory, so tests can run in parallel and leave nothing behind.
class EmulatedTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "carma-emu-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        file_ = (dir_ / "emulated-gpus").string();
    }
    void TearDown() override { fs::remove_all(dir_); }

    EmulatorOptions options(const std::string& gpus = "4xA100-40GB",
                            model::SharingMode sharing = model::SharingMode::Mps) const {
        auto set = model::parse_gpu_set(gpus);
        EXPECT_TRUE(set.has_value());
        return EmulatorOptions{*set, sharing, file_};
    }

    std::unique_ptr<GpuBackend> open(const std::string& gpus = "4xA100-40GB",
                                     model::SharingMode sharing = model::SharingMode::Mps) {
        auto backend = open_emulated(options(gpus, sharing));
        EXPECT_TRUE(backend.has_value()) << backend.error().message;
        return backend ? std::move(*backend) : nullptr;
    }

    JobHandle attach(std::string_view devices, const JobProfile& profile = kHeavy) {
        auto job = JobHandle::attach(file_, devices, profile);
        EXPECT_TRUE(job.has_value()) << job.error().message;
        return std::move(*job);
    }

    static std::vector<GpuSample> sample(GpuBackend& backend) {
        auto s = backend.sample();
        EXPECT_TRUE(s.has_value()) << s.error().message;
        return s ? *s : std::vector<GpuSample>();
    }

    fs::path dir_;
    std::string file_;
};

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// This test verifies that the backend lists the GPUs of its set with stable UUIDs, the type's
// usable capacity, and that an idle GPU samples as empty, idle-powered and without processes.
TEST_F(EmulatedTest, ListsGpusWithUuidsAndCapacity) {
    auto backend = open();
    ASSERT_TRUE(backend);
    EXPECT_EQ(backend->name(), "emulated:4xA100-40GB");
    ASSERT_EQ(backend->gpus().size(), 4u);
    for (int i = 0; i < 4; ++i) {
        const GpuInfo& gpu = backend->gpus()[static_cast<std::size_t>(i)];
        EXPECT_EQ(gpu.index, i);
        EXPECT_EQ(gpu.uuid, "GPU-emu00000-0000-4000-8000-00000000000" + std::to_string(i));
        EXPECT_EQ(gpu.name, "A100-40GB (emulated)");
        EXPECT_EQ(gpu.total_mib, kCapacity);
    }
    const auto samples = sample(*backend);
    ASSERT_EQ(samples.size(), 4u);
    for (const GpuSample& s : samples) {
        EXPECT_EQ(s.free_mib, kCapacity);
        EXPECT_EQ(s.used_mib, 0);
        EXPECT_EQ(s.smact, 0);
        EXPECT_EQ(s.power_w, model::kA100IdlePowerW);
        EXPECT_TRUE(s.processes.empty());
        EXPECT_TRUE(s.error.empty());
    }
    const auto env = backend->task_environment();
    ASSERT_EQ(env.size(), 1u);
    EXPECT_EQ(env[0].first, "CARMA_EMULATOR_FILE");
    EXPECT_EQ(env[0].second, fs::path(file_).lexically_normal().string());
}

// This test verifies that a relative emulator path is handed to tasks as an absolute one: tasks
// start in their own working directories.
TEST_F(EmulatedTest, TaskEnvironmentNamesTheFileAbsolutely) {
    const fs::path old_cwd = fs::current_path();
    fs::current_path(dir_);
    auto set = model::parse_gpu_set("1xA100-40GB");
    auto backend = open_emulated(EmulatorOptions{*set, model::SharingMode::Mps, "relative-gpus"});
    fs::current_path(old_cwd);
    ASSERT_TRUE(backend.has_value()) << backend.error().message;
    EXPECT_EQ((*backend)->task_environment()[0].second, (dir_ / "relative-gpus").string());
}

struct VisibleCase {
    const char* text;
    std::vector<int> expected;  // empty: an error
};

// This test verifies how CUDA_VISIBLE_DEVICES names emulated GPUs: indices or UUIDs, in CUDA
// ordinal order; anything else (out of range, unknown, repeated, empty) is an error.
TEST(VisibleDevicesTest, IndicesAndUuidsInOrdinalOrder) {
    const std::vector<VisibleCase> table = {
        {"0", {0}},
        {"2,0", {2, 0}},
        {" 1 , 3 ", {1, 3}},
        {"GPU-emu00000-0000-4000-8000-000000000002", {2}},
        {"3,GPU-emu00000-0000-4000-8000-000000000000", {3, 0}},
        {"", {}},
        {"4", {}},  // only 0..3 exist
        {"-1", {}},
        {"GPU-7d9f2a10-0000-4000-8000-000000000000", {}},  // a real GPU's UUID
        {"1,1", {}},
        {"0,,1", {}},  // an empty entry is a typo, not a GPU
    };
    for (const VisibleCase& c : table) {
        auto parsed = parse_visible_devices(c.text, 4);
        if (c.expected.empty()) {
            EXPECT_FALSE(parsed.has_value()) << "'" << c.text << "'";
        } else {
            ASSERT_TRUE(parsed.has_value()) << "'" << c.text << "': " << parsed.error().message;
            EXPECT_EQ(*parsed, c.expected) << "'" << c.text << "'";
        }
    }
}

// This test verifies the OOM rule with the research note's pair (§10(f) 4): 25,000 + 20,000 MiB
// on a 40,441 MiB GPU. The second job's allocation that crosses capacity fails, with PyTorch's
// numbers; the first keeps its memory; a smaller request that fits still succeeds.
TEST_F(EmulatedTest, AllocationThatCrossesCapacityFailsAndOthersKeepTheirs) {
    auto backend = open();
    JobHandle first = attach("0");
    JobHandle second = attach("0");
    auto a = first.set_memory(25000);
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->ok);

    auto b = second.set_memory(20000);
    ASSERT_TRUE(b.has_value()) << b.error().message;
    EXPECT_FALSE(b->ok);
    EXPECT_EQ(b->device, 0);
    EXPECT_EQ(b->requested_mib, 20000);
    EXPECT_EQ(b->total_mib, kCapacity);
    EXPECT_EQ(b->free_mib, kCapacity - 25000);  // 15,441 MiB
    EXPECT_EQ(b->held_mib, 0);
    EXPECT_EQ(second.memory_mib(), 0);

    auto s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 25000);
    EXPECT_EQ(s[0].free_mib, kCapacity - 25000);

    auto fits = second.set_memory(15000);
    ASSERT_TRUE(fits.has_value());
    EXPECT_TRUE(fits->ok);
    EXPECT_EQ(sample(*backend)[0].used_mib, 40000);
    // Giving memory back always works.
    EXPECT_TRUE(first.set_memory(1000)->ok);
    EXPECT_EQ(sample(*backend)[0].used_mib, 16000);
}

// This test verifies that a multi-GPU job's allocation fails when any of its GPUs would pass its
// capacity, and that the error names the CUDA ordinal (position in CUDA_VISIBLE_DEVICES), not
// the emulator's index.
TEST_F(EmulatedTest, MultiGpuAllocationFailsOnItsFullestGpuByOrdinal) {
    auto backend = open();
    JobHandle resident = attach("1");
    ASSERT_TRUE(resident.set_memory(30000)->ok);
    JobHandle pair = attach("2,1");  // ordinal 0 = GPU 2, ordinal 1 = GPU 1
    auto a = pair.set_memory(20000);
    ASSERT_TRUE(a.has_value());
    EXPECT_FALSE(a->ok);
    EXPECT_EQ(a->device, 1);
    EXPECT_EQ(a->free_mib, kCapacity - 30000);
    ASSERT_TRUE(pair.set_memory(10000)->ok);
    const auto s = sample(*backend);
    EXPECT_EQ(s[1].used_mib, 40000);  // 30,000 + 10,000
    EXPECT_EQ(s[2].used_mib, 10000);  // the pair's memory is per GPU
    EXPECT_EQ(s[0].used_mib, 0);
}

// This test verifies that jobs' speeds are the model's: f(u_i)/f(U) over the GPU-active jobs of
// the GPU, in both sharing modes; 1 alone; 0 while starting; the slowest GPU for a multi-GPU job.
TEST_F(EmulatedTest, SpeedsUnderSharingAreTheModels) {
    for (model::SharingMode mode : {model::SharingMode::Mps, model::SharingMode::Timeslice}) {
        SCOPED_TRACE(std::string(model::to_string(mode)));
        fs::remove(file_);
        auto backend = open("4xA100-40GB", mode);
        const model::SlowdownParams p = model::slowdown_params(mode);
        JobHandle heavy = attach("0", kHeavy);
        JobHandle medium = attach("0", kMedium);
        JobHandle starting = attach("0", kHeavy);
        JobHandle pair = attach("0,1", kMedium);
        JobHandle alone = attach("2", kHeavy);
        for (JobHandle* job : {&heavy, &medium, &pair, &alone}) {
            ASSERT_TRUE(job->set_active(true));
        }
        // GPU 0: U = 0.9 + 0.6 + 0.6 (the pair) = 2.1; the starting job adds nothing. GPU 1: 0.6.
        EXPECT_DOUBLE_EQ(*heavy.current_speed(), model::task_speed(0.9, 2.1, p));
        EXPECT_DOUBLE_EQ(*medium.current_speed(), model::task_speed(0.6, 2.1, p));
        EXPECT_DOUBLE_EQ(*pair.current_speed(),
                         std::min(model::task_speed(0.6, 2.1, p), model::task_speed(0.6, 0.6, p)));
        EXPECT_LT(*heavy.current_speed(), 1.0);
        EXPECT_EQ(*starting.current_speed(), 0.0);
        EXPECT_EQ(*alone.current_speed(), 1.0);
        // One leaving speeds the others up.
        medium.detach();
        EXPECT_DOUBLE_EQ(*heavy.current_speed(), model::task_speed(0.9, 1.5, p));
    }
}

// This test verifies the sampled metrics against the model's formulas (§10(c)): memory, free,
// util = 1 - prod(1 - u), SMACT = min(1, sum smact*speed), DRAMA = 1 - prod(1 - drama*speed),
// power = max(50, 31.8 + 230.8 SMACT + 91.8 DRAMA); one process entry per pid.
TEST_F(EmulatedTest, SampleComputesMetricsAndPowerFromTheModel) {
    auto backend = open();
    JobHandle heavy = attach("0", kHeavy);
    JobHandle medium = attach("0", kMedium);
    JobHandle starting = attach("1", kHeavy);
    ASSERT_TRUE(heavy.set_active(true));
    ASSERT_TRUE(medium.set_active(true));
    ASSERT_TRUE(heavy.set_memory(12000)->ok);
    ASSERT_TRUE(medium.set_memory(8000)->ok);
    ASSERT_TRUE(starting.set_memory(600)->ok);
    const double v1 = *heavy.current_speed();
    const double v2 = *medium.current_speed();

    const auto s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 20000);
    EXPECT_EQ(s[0].free_mib, kCapacity - 20000);
    EXPECT_NEAR(s[0].util.value(), 1 - (1 - 0.9) * (1 - 0.6), 1e-12);
    const double smact = std::min(1.0, 0.85 * v1 + 0.50 * v2);
    const double drama = 1 - (1 - 0.20 * v1) * (1 - 0.40 * v2);
    EXPECT_NEAR(s[0].smact.value(), smact, 1e-12);
    EXPECT_NEAR(s[0].smocc.value(), std::min(1.0, 0.30 * v1 + 0.25 * v2), 1e-12);
    EXPECT_NEAR(s[0].drama.value(), drama, 1e-12);
    EXPECT_NEAR(s[0].power_w.value(), std::max(50.0, 31.8 + 230.8 * smact + 91.8 * drama), 1e-9);
    ASSERT_EQ(s[0].processes.size(), 1u);  // both handles belong to this test process
    EXPECT_EQ(s[0].processes[0].pid, ::getpid());
    EXPECT_EQ(s[0].processes[0].used_mib, 20000);
    // A process's activity is what its jobs add to the GPU's SMACT: smact x speed each.
    EXPECT_NEAR(s[0].processes[0].activity.value(), smact, 1e-12);

    // GPU 1 holds a starting job's context: memory counts, activity and power do not.
    EXPECT_EQ(s[1].used_mib, 600);
    EXPECT_EQ(s[1].smact, 0.0);
    ASSERT_EQ(s[1].processes.size(), 1u);
    EXPECT_EQ(s[1].processes[0].activity, 0.0);
    EXPECT_EQ(s[1].sources, MetricSources::all(MetricSource::Emulated));
    EXPECT_EQ(s[1].power_w, model::kA100IdlePowerW);
}

// This test verifies a hidden job (carma-fakejob --invisible): its memory and activity count on
// its GPU, which lists no process for it CARMA can match (as for a daemon in a container without
// the host's PID namespace); a visible job beside it is listed with its own memory only.
TEST_F(EmulatedTest, HiddenJobCountsButIsNotListed) {
    auto backend = open();
    JobHandle hidden = attach("0", kHeavy);
    ASSERT_TRUE(hidden.set_hidden(true));
    ASSERT_TRUE(hidden.set_active(true));
    ASSERT_TRUE(hidden.set_memory(12000)->ok);
    auto s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 12000);
    EXPECT_GT(s[0].smact.value(), 0.0);
    EXPECT_TRUE(s[0].processes.empty());
    // Only what the caller hides is hidden: a second job of this process is listed alone.
    JobHandle visible = attach("0", kMedium);
    ASSERT_TRUE(visible.set_memory(3000)->ok);
    s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 15000);
    ASSERT_EQ(s[0].processes.size(), 1u);
    EXPECT_EQ(s[0].processes[0].used_mib, 3000);
    ASSERT_TRUE(hidden.set_hidden(false));
    s = sample(*backend);
    ASSERT_EQ(s[0].processes.size(), 1u);
    EXPECT_EQ(s[0].processes[0].used_mib, 15000);
}

// This test verifies that energy is power integrated over time: between two samples with no
// change in between it grows by P * dt, dt lying between the gaps measured inside and outside
// the two sample() calls (so the test needs no particular timing).
TEST_F(EmulatedTest, EnergyGrowsAsPowerTimesTime) {
    auto backend = open("1xA100-40GB");
    JobHandle job = attach("0", kHeavy);
    ASSERT_TRUE(job.set_active(true));
    const double t0 = seconds_now();
    const auto s1 = sample(*backend);
    const double t1 = seconds_now();
    while (seconds_now() - t1 < 0.05) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double t2 = seconds_now();
    const auto s2 = sample(*backend);
    const double t3 = seconds_now();
    const double power = s1[0].power_w.value();
    EXPECT_GT(power, model::kA100IdlePowerW);
    EXPECT_EQ(s2[0].power_w, power);
    const double gained = s2[0].energy_j.value() - s1[0].energy_j.value();
    EXPECT_GT(gained, 0);
    EXPECT_GE(gained, power * (t2 - t1) * (1 - 1e-9));
    EXPECT_LE(gained, power * (t3 - t0) * (1 + 1e-9));
}

// This test verifies that the memory of a process that died without detaching is freed, as the
// driver frees a dead process's memory: once reaped, and also while it is still a zombie.
TEST_F(EmulatedTest, DeadProcessesMemoryIsFreed) {
    auto backend = open();
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        auto job = JobHandle::attach(file_, "0", kHeavy);
        auto allocation = job ? job->set_memory(5000) : tl::unexpected(job.error());
        const char byte = allocation && allocation->ok ? 'y' : 'n';
        [[maybe_unused]] auto n = ::write(ready[1], &byte, 1);
        ::_exit(0);  // no detach, no destructors: like a crash
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(byte, 'y');
    // Not yet waited for: a zombie. Its memory goes as soon as it has exited.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    MiB used = -1;
    while (used != 0 && std::chrono::steady_clock::now() < deadline) {
        used = sample(*backend)[0].used_mib;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(used, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    const auto s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 0);
    EXPECT_TRUE(s[0].processes.empty());
}

// This test verifies the robust mutex: a process that dies holding the lock does not wedge the
// others; the next locker is told the state was recovered and sampling goes on.
TEST_F(EmulatedTest, ProcessDyingWithTheLockDoesNotWedgeOthers) {
    auto backend = open();
    JobHandle job = attach("0");
    ASSERT_TRUE(job.set_memory(3000)->ok);
    // Opened before the death, so that its first lock afterwards is the one that recovers.
    auto file = emu::EmulatorFile::open_for_job(file_);
    ASSERT_TRUE(file.has_value()) << file.error().message;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        auto own = emu::EmulatorFile::open_for_job(file_);
        if (!own) {
            ::_exit(3);
        }
        auto locked = (*own)->lock();
        ::_exit(locked ? 0 : 4);  // dies holding it
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);

    {
        auto locked = (*file)->lock();
        ASSERT_TRUE(locked.has_value()) << locked.error().message;
        EXPECT_TRUE(locked->recovered());
    }
    const auto s = sample(*backend);
    EXPECT_EQ(s[0].used_mib, 3000);
    ASSERT_TRUE(job.set_memory(4000)->ok);
    EXPECT_EQ(sample(*backend)[0].used_mib, 4000);
}

// This test verifies that a job's handle copied into a forked child stays the parent's: the
// child letting go of it does not free the parent's memory.
TEST_F(EmulatedTest, ForkedChildDoesNotDetachItsParentsJob) {
    auto backend = open();
    JobHandle job = attach("0");
    ASSERT_TRUE(job.set_memory(2500)->ok);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        job.detach();
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_EQ(sample(*backend)[0].used_mib, 2500);
    job.detach();
    EXPECT_EQ(sample(*backend)[0].used_mib, 0);
    EXPECT_FALSE(job.set_memory(100).has_value());  // detached: an error, not a crash
}

// This test verifies that re-opening a compatible file (a daemon restart) keeps the live jobs,
// their memory and the energy counters, and takes over a new sharing mode.
TEST_F(EmulatedTest, ReopenKeepsLiveJobs) {
    auto first = open("4xA100-40GB", model::SharingMode::Mps);
    JobHandle a = attach("0", kHeavy);
    JobHandle b = attach("0", kMedium);
    ASSERT_TRUE(a.set_active(true));
    ASSERT_TRUE(b.set_active(true));
    ASSERT_TRUE(a.set_memory(7000)->ok);
    const double energy = sample(*first)[0].energy_j.value();
    first.reset();

    auto second = open("4xA100-40GB", model::SharingMode::Timeslice);
    ASSERT_TRUE(second);
    const auto s = sample(*second);
    EXPECT_EQ(s[0].used_mib, 7000);
    ASSERT_EQ(s[0].processes.size(), 1u);
    EXPECT_EQ(s[0].processes[0].pid, ::getpid());
    EXPECT_GE(s[0].energy_j, energy);
    const auto p = model::slowdown_params(model::SharingMode::Timeslice);
    EXPECT_DOUBLE_EQ(*a.current_speed(), model::task_speed(0.9, 1.5, p));
}

// This test verifies that a file for another GPU set is refused while a job is alive in it (the
// error names the file, the pid and the sets) and re-initialised once none is; handles of the
// old set then get an error instead of wrong numbers.
TEST_F(EmulatedTest, IncompatibleReopenWithLiveJobFails) {
    auto old_backend = open("4xA100-40GB");
    JobHandle job = attach("3");
    auto refused = open_emulated(options("2xA100-40GB"));
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find(file_), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find(std::to_string(::getpid())), std::string::npos);
    EXPECT_NE(refused.error().message.find("4xA100-40GB"), std::string::npos);
    EXPECT_NE(refused.error().message.find("2xA100-40GB"), std::string::npos);
    EXPECT_EQ(sample(*old_backend).size(), 4u);  // untouched

    job.detach();
    auto reinitialised = open("2xA100-40GB");
    ASSERT_TRUE(reinitialised);
    EXPECT_EQ(reinitialised->gpus().size(), 2u);
    EXPECT_EQ(sample(*reinitialised).size(), 2u);
    auto stale = old_backend->sample();
    ASSERT_FALSE(stale.has_value());
    EXPECT_NE(stale.error().message.find("re-initialised"), std::string::npos);
}

// This test verifies that a file that is not an emulator file is never overwritten.
TEST_F(EmulatedTest, ForeignFileIsLeftAlone) {
    std::ofstream(file_) << "precious data\n";
    auto backend = open_emulated(options());
    ASSERT_FALSE(backend.has_value());
    EXPECT_NE(backend.error().message.find("not an emulator file"), std::string::npos);
    std::ifstream in(file_);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "precious data");
}

// This test verifies that a file left behind by an interrupted initialisation (our size, zeros,
// no magic yet) is initialised rather than refused as foreign.
TEST_F(EmulatedTest, InterruptedInitialisationIsRedone) {
    std::ofstream(file_).close();
    fs::resize_file(file_, sizeof(emu::State));
    auto backend = open("2xA100-40GB");
    ASSERT_TRUE(backend);
    EXPECT_EQ(sample(*backend).size(), 2u);
}

// This test verifies the errors a job gets for a missing file, bad devices or a bad profile.
TEST_F(EmulatedTest, AttachErrorsNameTheProblem) {
    auto missing = JobHandle::attach(file_, "0", kHeavy);
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
    EXPECT_NE(missing.error().message.find(file_), std::string::npos);
    EXPECT_NE(missing.error().message.find("CARMA_EMULATOR_FILE"), std::string::npos);

    auto backend = open("2xA100-40GB");
    auto bad_devices = JobHandle::attach(file_, "5", kHeavy);
    ASSERT_FALSE(bad_devices.has_value());
    EXPECT_NE(bad_devices.error().message.find("0..1"), std::string::npos);
    auto bad_profile = JobHandle::attach(file_, "0", JobProfile{1.5, 0, 0, 0});
    ASSERT_FALSE(bad_profile.has_value());
    EXPECT_EQ(bad_profile.error().code, ErrorCode::InvalidArgument);
}

// This test verifies that GPU sets beyond what a file can hold are refused up front.
TEST_F(EmulatedTest, TooManyGpusIsAnError) {
    auto backend = open_emulated(options("65xA100-40GB"));
    ASSERT_FALSE(backend.has_value());
    EXPECT_NE(backend.error().message.find("1..64"), std::string::npos);
    EXPECT_FALSE(fs::exists(file_) && fs::file_size(file_) > 0);
}

// This test verifies that the slot table is bounded and says so when full, and that slots come
// back when jobs leave.
TEST_F(EmulatedTest, SlotTableFullIsAClearError) {
    auto backend = open("1xA100-40GB");
    std::vector<JobHandle> jobs;
    for (int i = 0; i < emu::kMaxSlots; ++i) {
        jobs.push_back(attach("0", kMedium));
    }
    auto extra = JobHandle::attach(file_, "0", kMedium);
    ASSERT_FALSE(extra.has_value());
    EXPECT_NE(extra.error().message.find("slots"), std::string::npos);
    jobs.pop_back();
    EXPECT_TRUE(JobHandle::attach(file_, "0", kMedium).has_value());
}

int file_mode(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

// This test verifies that the emulator file is the daemon's alone: created 0600, and an existing
// one (left 0666 by an older version) is made 0600 when re-attached.
TEST_F(EmulatedTest, FileIsOwnerOnly) {
    auto backend = open();
    ASSERT_TRUE(backend);
    EXPECT_EQ(file_mode(file_), 0600);
    backend.reset();
    ASSERT_EQ(::chmod(file_.c_str(), 0666), 0);
    backend = open();
    ASSERT_TRUE(backend);
    EXPECT_EQ(file_mode(file_), 0600);
}

// This test verifies that a symlink at the emulator file's path is refused, not followed: the
// file it points at is neither written nor chmod-ed.
TEST_F(EmulatedTest, SymlinkIsNotFollowed) {
    const std::string target = (dir_ / "target").string();
    std::ofstream(target) << "precious data\n";
    ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
    fs::create_symlink(target, file_);
    auto backend = open_emulated(options());
    ASSERT_FALSE(backend.has_value());
    EXPECT_NE(backend.error().message.find(file_), std::string::npos) << backend.error().message;
    EXPECT_NE(backend.error().message.find("symbolic link"), std::string::npos)
        << backend.error().message;
    EXPECT_EQ(file_mode(target), 0644);
    std::ifstream in(target);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "precious data");
}

// This test verifies that a damaged file (truncated, or emptied) is refused while attempts are
// believed running, with a message naming the file, what is wrong, the attempts and what to do,
// and that it is left as it was; with none running it is re-initialised and the reason told.
TEST_F(EmulatedTest, DamagedFileIsKeptWhileAttemptsRun) {
    const std::uintmax_t sizes[] = {sizeof(emu::State) / 2, 5, 0};
    for (const std::uintmax_t size : sizes) {
        ASSERT_TRUE(open());  // a whole file (again), closed at once
        fs::resize_file(file_, size);
        EmulatorOptions o = options();
        o.attempts_running = 2;
        auto refused = open_emulated(o);
        ASSERT_FALSE(refused.has_value()) << "size " << size;
        const std::string& m = refused.error().message;
        EXPECT_NE(m.find(file_), std::string::npos) << m;
        EXPECT_NE(m.find(size == 0 ? "it is empty" : "truncated"), std::string::npos) << m;
        EXPECT_NE(m.find("2 attempt(s) recorded running"), std::string::npos) << m;
        EXPECT_NE(m.find("lose their GPU state"), std::string::npos) << m;
        EXPECT_NE(m.find("stop them"), std::string::npos) << m;
        EXPECT_NE(m.find("move the file away"), std::string::npos) << m;
        EXPECT_EQ(fs::file_size(file_), size);
    }

    ASSERT_TRUE(open());
    fs::resize_file(file_, 5);  // even cut inside its magic number it is still ours
    std::vector<std::string> notes;
    EmulatorOptions o = options("2xA100-40GB");
    o.on_note = [&](std::string_view note) { notes.emplace_back(note); };
    auto backend = open_emulated(o);
    ASSERT_TRUE(backend.has_value()) << backend.error().message;
    EXPECT_EQ(sample(**backend).size(), 2u);
    EXPECT_EQ(fs::file_size(file_), sizeof(emu::State));
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find(file_), std::string::npos) << notes[0];
    EXPECT_NE(notes[0].find("re-initialising"), std::string::npos) << notes[0];
}

// This test verifies that a healthy file is re-attached as usual while attempts run.
TEST_F(EmulatedTest, HealthyFileIsReattachedWhileAttemptsRun) {
    auto first = open();
    JobHandle job = attach("1");
    ASSERT_TRUE(job.set_memory(1500)->ok);
    first.reset();
    EmulatorOptions o = options();
    o.attempts_running = 1;
    auto second = open_emulated(o);
    ASSERT_TRUE(second.has_value()) << second.error().message;
    EXPECT_EQ(sample(**second)[1].used_mib, 1500);
}

// Sets an environment variable for the scope of one test.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() { ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
};

// Exit codes of the child in the test below, so a failure says which step failed.
enum ChildStep {
    kOpenedByPath = 10,
    kAttachFailed,
    kAllocFailed,
    kGrandchildFailed,
    kAfterGrandchild
};

// This test verifies the per-task descriptor: a process of another user, which cannot open the
// 0600 file by name, uses the emulated GPU through the descriptor in CARMA_EMULATOR_FD; a second
// process sharing that descriptor (same open file description) attaches and leaves without
// disturbing the first, and the backend sees the memory held.
TEST_F(EmulatedTest, AnotherUserUsesTheGpuThroughTheInheritedDescriptor) {
    ASSERT_EQ(::geteuid(), 0u) << "this test needs root, to run a job as another uid";
    ASSERT_EQ(::chmod(dir_.c_str(), 0711), 0);  // like the state directory: reachable by name
    auto backend = open();
    ASSERT_TRUE(backend);
    const int fd = ::open(file_.c_str(), O_RDWR);  // what carma-shim hands the task
    ASSERT_GE(fd, 0);
    ScopedEnv env(kEmulatorFdEnv, std::to_string(fd));
    int ready[2];
    int release[2];
    ASSERT_EQ(::pipe(ready), 0);
    ASSERT_EQ(::pipe(release), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(ready[0]);
        ::close(release[1]);
        constexpr uid_t kNobody = 65534;
        if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
            ::_exit(9);
        }
        if (::open(file_.c_str(), O_RDWR) >= 0 || errno != EACCES) {
            ::_exit(kOpenedByPath);
        }
        auto job = JobHandle::attach(file_, "0", kHeavy);
        if (!job) {
            std::fprintf(stderr, "%s\n", job.error().message.c_str());
            ::_exit(kAttachFailed);
        }
        if (auto a = job->set_memory(1234); !a || !a->ok) {
            ::_exit(kAllocFailed);
        }
        const pid_t grandchild = ::fork();
        if (grandchild == 0) {
            auto other = JobHandle::attach(file_, "0", kMedium);
            ::_exit(other && other->set_memory(100) && other->set_active(true) ? 0 : 1);
        }
        int status = 0;
        if (::waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            ::_exit(kGrandchildFailed);
        }
        if (auto a = job->set_memory(1300); !a || !a->ok) {
            ::_exit(kAfterGrandchild);
        }
        char byte = 1;
        (void)!::write(ready[1], &byte, 1);
        (void)!::read(release[0], &byte, 1);  // returns once the parent closes its end
        ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    char byte = 0;
    const bool got_ready = ::read(ready[0], &byte, 1) == 1;
    if (got_ready) {
        const auto s = sample(*backend);
        EXPECT_EQ(s[0].used_mib, 1300);
        ASSERT_EQ(s[0].processes.size(), 1u);
        EXPECT_EQ(s[0].processes[0].pid, child);
    }
    ::close(release[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the child failed at step " << WEXITSTATUS(status);
    EXPECT_TRUE(got_ready);
    EXPECT_EQ(sample(*backend)[0].used_mib, 0);
    ::close(fd);
}

// This test verifies that a descriptor number that is not the emulator file (closed by a
// launcher, or reused for something else) is not used: the job opens the file by its path.
TEST_F(EmulatedTest, StaleDescriptorNumberFallsBackToThePath) {
    auto backend = open();
    const std::string other = (dir_ / "other").string();
    std::ofstream(other) << "not the emulator file\n";
    const int fd = ::open(other.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    for (const std::string& value : {std::to_string(fd), std::string("999"), std::string("x")}) {
        ScopedEnv env(kEmulatorFdEnv, value);
        auto job = JobHandle::attach(file_, "0", kHeavy);
        ASSERT_TRUE(job.has_value()) << value << ": " << job.error().message;
        ASSERT_TRUE(job->set_memory(700)->ok);
        EXPECT_EQ(sample(*backend)[0].used_mib, 700);
    }
    ::close(fd);
    std::ifstream in(other);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "not the emulator file");
}

}  // namespace
}  // namespace carma::device
