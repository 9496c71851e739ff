// carma-fakejob --cuda end to end: the real binary on a fake CUDA driver (tests/fake_cuda) that
// records the calls it gets, so the tests see what the job would do on a GPU. Waits poll with
// generous deadlines; nothing depends on timing.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device/fakejob_runner.h"

namespace carma::device {
namespace {

namespace fs = std::filesystem;
using fakejob_runner::Env;
using fakejob_runner::eventually;
using fakejob_runner::FakeJob;
using fakejob_runner::read_file;

constexpr long long kMiB = 1024 * 1024;
constexpr long long kContextMiB = 600;  // model::kContextMiB: the ramp starts there

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// What the fake driver's log says happened.
struct DriverLog {
    std::vector<std::string> lines;
    std::map<int, long long> allocated;  // bytes allocated per device (successful calls)
    std::map<int, long long> freed;
    std::map<int, int> launches;
    std::vector<std::string> launch_shapes;  // "GRID BLOCK"
    int refused = 0;

    bool has(const std::string& line) const {
        return std::find(lines.begin(), lines.end(), line) != lines.end();
    }
};

DriverLog read_log(const fs::path& path) {
    DriverLog log;
    log.lines = lines_of(read_file(path));
    for (const std::string& line : log.lines) {
        std::istringstream in(line);
        std::string what;
        int device = -1;
        in >> what >> device;
        if (what == "alloc") {
            long long bytes = 0;
            std::string result;
            in >> bytes >> result;
            if (result == "ok") {
                log.allocated[device] += bytes;
            } else {
                ++log.refused;
            }
        } else if (what == "free") {
            long long bytes = 0;
            in >> bytes;
            log.freed[device] += bytes;
        } else if (what == "launch") {
            std::string grid, block;
            in >> grid >> block;
            ++log.launches[device];
            log.launch_shapes.push_back(grid + " " + block);
        }
    }
    return log;
}

class FakejobCudaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "carma-fakejob-cuda-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        log_ = dir_ / "driver.log";
    }
    void TearDown() override { fs::remove_all(dir_); }

    // A --cuda job on the fake driver, with `env` added to its environment.
    std::unique_ptr<FakeJob> start(const std::string& name, std::vector<std::string> args,
                               Env env = {}) {
        args.insert(args.begin(), "--cuda");
        env.emplace_back("CARMA_CUDA_LIBRARY", CARMA_FAKE_CUDA_PATH);
        env.emplace_back("FAKE_CUDA_LOG", log_.string());
        auto job = std::make_unique<FakeJob>(dir_, name, args, env);
        EXPECT_TRUE(job->spawned());
        return job;
    }

    // A short run: 20 model seconds at 20x (start-up 10 s, ramp 5 s, work 10 s): ~1 s of wall.
    static std::vector<std::string> short_run(const std::string& memory) {
        return {"--profile", "BERT_base", "--duration-s", "20", "--time-scale", "20", "--memory",
                memory};
    }

    fs::path dir_;
    fs::path log_;
};

// This test verifies the whole life on one GPU: a context, the JIT-compiled busy kernel launched
// over every SM, device memory allocated along the ramp up to the target less the context, and
// everything freed and released at the end.
TEST_F(FakejobCudaTest, RampAllocatesUpToTheTargetAndKeepsTheGpuBusy) {
    auto job = start("ramp", short_run("8000"));
    ASSERT_EQ(job->wait(), 0) << job->err();
    EXPECT_TRUE(contains(job->out(), "on CUDA GPU(s) all (Fake GPU 0)")) << job->out();
    EXPECT_TRUE(contains(job->out(), "progress 100%")) << job->out();

    const DriverLog log = read_log(log_);
    EXPECT_TRUE(log.has("init"));
    EXPECT_TRUE(log.has("ctx 0"));
    EXPECT_TRUE(log.has("module ok sm_50"));
    EXPECT_TRUE(log.has("release 0"));
    EXPECT_GT(log.launches.at(0), 1);
    for (const std::string& shape : log.launch_shapes) {
        EXPECT_EQ(shape, "16 256");  // 4 blocks on each of the fake's 4 SMs
    }
    const long long scratch = 16 * 256 * 4;
    EXPECT_EQ(log.allocated.at(0), (8000 - kContextMiB) * kMiB + scratch);
    EXPECT_EQ(log.freed.at(0), log.allocated.at(0));
    EXPECT_EQ(log.refused, 0);
}

// This test verifies that every visible GPU gets the context, the kernel and the ramp.
TEST_F(FakejobCudaTest, EveryVisibleGpuGetsTheRamp) {
    auto job = start("two", short_run("3000"), {{"FAKE_CUDA_DEVICES", "2"}});
    ASSERT_EQ(job->wait(), 0) << job->err();
    EXPECT_TRUE(contains(job->out(), "(Fake GPU 0, Fake GPU 1)")) << job->out();
    DriverLog log = read_log(log_);
    for (int device : {0, 1}) {
        EXPECT_TRUE(log.has("ctx " + std::to_string(device)));
        EXPECT_GT(log.launches[device], 0);
        EXPECT_EQ(log.allocated[device], (3000 - kContextMiB) * kMiB + 16 * 256 * 4);
    }
}

// This test verifies that the job runs on the GPUs CUDA_VISIBLE_DEVICES names, as the driver
// numbers them: ordinal 0 is the first one listed.
TEST_F(FakejobCudaTest, RunsOnTheGpuCudaVisibleDevicesNames) {
    auto job = start("visible", short_run("3000"),
                     {{"FAKE_CUDA_DEVICES", "2"}, {"CUDA_VISIBLE_DEVICES", "1"}});
    ASSERT_EQ(job->wait(), 0) << job->err();
    EXPECT_TRUE(contains(job->out(), "on CUDA GPU(s) 1 (Fake GPU 1)")) << job->out();
    DriverLog log = read_log(log_);
    EXPECT_TRUE(log.has("ctx 1"));
    EXPECT_FALSE(log.has("ctx 0"));
    EXPECT_EQ(log.launches[0], 0);
    EXPECT_GT(log.launches[1], 0);
    EXPECT_EQ(log.allocated[1], (3000 - kContextMiB) * kMiB + 16 * 256 * 4);
}

// This test verifies the out-of-memory path: a target above the GPU's memory fails the
// allocation that crosses it, prints PyTorch's error and exits 1.
TEST_F(FakejobCudaTest, TargetAboveTheGpuMemoryPrintsTorchOomAndExits1) {
    auto job = start("oom", short_run("8000"), {{"FAKE_CUDA_MEMORY_MIB", "4096"}});
    EXPECT_EQ(job->wait(), 1) << job->err();
    const std::string err = job->err();
    EXPECT_TRUE(
        contains(err, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "))
        << err;
    EXPECT_TRUE(contains(err, "GPU 0 has a total capacity of 4.00 GiB of which ")) << err;
    const DriverLog log = read_log(log_);
    EXPECT_EQ(log.refused, 1);
    EXPECT_LE(log.allocated.at(0), 4096 * kMiB);
    EXPECT_FALSE(contains(job->out(), "progress 100%"));
}

// This test verifies that a GPU too full for even the CUDA context counts as out of memory.
TEST_F(FakejobCudaTest, NoRoomForTheContextIsAnOutOfMemoryExit) {
    auto job = start("no-room", short_run("8000"), {{"FAKE_CUDA_MEMORY_MIB", "100"}});
    EXPECT_EQ(job->wait(), 1) << job->err();
    EXPECT_TRUE(contains(job->err(), "CUDA error: out of memory")) << job->err();
}

// This test verifies the one-line reasons when there is no usable GPU: no driver library, a
// driver that fails cuInit, a driver that shows no device. Each exits 2.
TEST_F(FakejobCudaTest, NoGpuPrintsOneLineWithTheReasonAndExits2) {
    FakeJob missing(dir_, "missing", {"--cuda", "--profile", "BERT_base"},
                {{"CARMA_CUDA_LIBRARY", (dir_ / "libcuda.so.1").string()}});
    EXPECT_EQ(missing.wait(), 2);
    ASSERT_EQ(lines_of(missing.err()).size(), 1U) << missing.err();
    EXPECT_TRUE(contains(missing.err(), "carma-fakejob: --cuda needs an NVIDIA GPU: ")) << missing.err();
    EXPECT_TRUE(contains(missing.err(), "libcuda.so.1")) << missing.err();

    auto init = start("init", {"--profile", "BERT_base"}, {{"FAKE_CUDA_FAIL_INIT", "1"}});
    EXPECT_EQ(init->wait(), 2);
    ASSERT_EQ(lines_of(init->err()).size(), 1U) << init->err();
    EXPECT_TRUE(contains(init->err(),
                         "--cuda needs an NVIDIA GPU: cuInit: no CUDA-capable device is detected"))
        << init->err();

    auto none = start("none", {"--profile", "BERT_base"}, {{"FAKE_CUDA_DEVICES", "0"}});
    EXPECT_EQ(none->wait(), 2);
    ASSERT_EQ(lines_of(none->err()).size(), 1U) << none->err();
    EXPECT_TRUE(contains(none->err(), "shows no device")) << none->err();
}

// This test verifies that PTX the JIT refuses for every target stops the job with the JIT's log
// on one line.
TEST_F(FakejobCudaTest, RefusedPtxExits2WithTheJitLog) {
    auto job = start("ptx", short_run("1000"), {{"FAKE_CUDA_BAD_PTX", "1"}});
    EXPECT_EQ(job->wait(), 2);
    ASSERT_EQ(lines_of(job->err()).size(), 1U) << job->err();
    EXPECT_TRUE(contains(job->err(), "cuModuleLoadDataEx")) << job->err();
    EXPECT_TRUE(contains(job->err(), "fake JIT refused the PTX for sm_50")) << job->err();
    EXPECT_TRUE(contains(job->err(), "fake JIT refused the PTX for sm_75")) << job->err();
}

// This test verifies that a driver refusing PTX for old GPUs gets the sm_75 variant instead.
TEST_F(FakejobCudaTest, DriverWithoutOldTargetsGetsTheNewerPtx) {
    auto job = start("sm75", short_run("1000"), {{"FAKE_CUDA_MIN_TARGET", "75"}});
    EXPECT_EQ(job->wait(), 0) << job->err();
    DriverLog log = read_log(log_);
    EXPECT_TRUE(log.has("module bad sm_50"));
    EXPECT_TRUE(log.has("module ok sm_75"));
    EXPECT_GT(log.launches[0], 0);
}

// This test verifies that SIGTERM stops a busy job with 143 and that it frees its memory.
TEST_F(FakejobCudaTest, SigtermExits143AndFreesTheMemory) {
    auto job = start("term", {"--profile", "BERT_base", "--duration-s", "1000000", "--time-scale",
                              "100", "--memory", "2000"});
    eventually([&] { return read_log(log_).launches[0] >= 5; });
    ASSERT_GE(read_log(log_).launches[0], 5) << job->err();
    ::kill(job->pid(), SIGTERM);
    EXPECT_EQ(job->wait(), 143);
    const DriverLog log = read_log(log_);
    EXPECT_EQ(log.freed.at(0), log.allocated.at(0));
}

// This test verifies that --cuda and --emulator exclude each other.
TEST_F(FakejobCudaTest, CudaAndEmulatorExcludeEachOther) {
    auto job = start("both", {"--profile", "BERT_base", "--emulator", (dir_ / "x").string()});
    EXPECT_EQ(job->wait(), 2);
    EXPECT_TRUE(contains(job->err(), "excludes")) << job->err();
}

}  // namespace
}  // namespace carma::device
