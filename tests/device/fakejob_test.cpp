// carma-fakejob end to end: the real binary as a process on emulated GPUs, watched through the
// backend as the daemon would. Assertions are on behaviour; waits poll with generous deadlines.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device/emulated.h"
#include "model/constants.h"

extern char** environ;

namespace carma::device {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(60);

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// Polls `done` every 10 ms until it holds or the deadline passes.
bool eventually(const std::function<bool()>& done, Clock::duration within = kDeadline) {
    const auto deadline = Clock::now() + within;
    while (Clock::now() < deadline) {
        if (done()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
}

// One carma-fakejob process with its stdout and stderr in files.
class FakeJob {
  public:
    FakeJob(const fs::path& dir, const std::string& name, const std::vector<std::string>& args,
            const std::vector<std::pair<std::string, std::string>>& env)
        : out_(dir / (name + ".out")), err_(dir / (name + ".err")) {
        std::vector<std::string> argv = {CARMA_FAKEJOB_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<std::string> envp = environment(env);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        std::vector<char*> cargv = pointers(argv);
        std::vector<char*> cenvp = pointers(envp);
        spawned_ =
            posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, cargv.data(), cenvp.data()) == 0;
        posix_spawn_file_actions_destroy(&actions);
    }

    ~FakeJob() {
        if (spawned_ && !status_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }

    bool spawned() const { return spawned_; }
    pid_t pid() const { return pid_; }
    std::string out() const { return read_file(out_); }
    std::string err() const { return read_file(err_); }

    // The exit code (128+signal if killed by one), or nothing if it is still running at the
    // deadline.
    std::optional<int> wait(Clock::duration within = kDeadline) {
        eventually(
            [&] {
                int status = 0;
                if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
                    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                }
                return status_.has_value();
            },
            within);
        return status_;
    }

  private:
    // The test's environment minus anything that would steer the job, plus `env`.
    static std::vector<std::string> environment(
        const std::vector<std::pair<std::string, std::string>>& env) {
        std::vector<std::string> out;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string entry = *e;
            if (entry.rfind("CUDA_VISIBLE_DEVICES=", 0) != 0 &&
                entry.rfind("CARMA_EMULATOR_FILE=", 0) != 0 &&
                entry.rfind("CARMA_TIME_SCALE=", 0) != 0) {
                out.push_back(entry);
            }
        }
        for (const auto& [key, value] : env) {
            out.push_back(key + "=" + value);
        }
        return out;
    }

    static std::vector<char*> pointers(std::vector<std::string>& strings) {
        std::vector<char*> out;
        for (std::string& s : strings) {
            out.push_back(s.data());
        }
        out.push_back(nullptr);
        return out;
    }

    fs::path out_;
    fs::path err_;
    pid_t pid_ = 0;
    bool spawned_ = false;
    std::optional<int> status_;
};

class FakeJobTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "carma-fakejob-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        file_ = (dir_ / "emulated-gpus").string();
        auto set = model::parse_gpu_set("2xA100-40GB");
        ASSERT_TRUE(set.has_value());
        auto backend = open_emulated(EmulatorOptions{*set, model::SharingMode::Mps, file_});
        ASSERT_TRUE(backend.has_value()) << backend.error().message;
        backend_ = std::move(*backend);
    }
    void TearDown() override { fs::remove_all(dir_); }

    // A job on `devices`, the emulator file named by the environment as the daemon does it.
    std::unique_ptr<FakeJob> start(const std::string& name, const std::string& devices,
                                   std::vector<std::string> args) {
        auto job = std::make_unique<FakeJob>(
            dir_, name, args,
            std::vector<std::pair<std::string, std::string>>{{"CUDA_VISIBLE_DEVICES", devices},
                                                             {"CARMA_EMULATOR_FILE", file_}});
        EXPECT_TRUE(job->spawned());
        return job;
    }

    // What the backend sees `pid` hold on GPU `gpu` (0 if absent).
    MiB memory_of(pid_t pid, int gpu) {
        auto samples = backend_->sample();
        EXPECT_TRUE(samples.has_value());
        if (!samples) {
            return 0;
        }
        for (const GpuProcess& p : (*samples)[static_cast<std::size_t>(gpu)].processes) {
            if (p.pid == pid) {
                return p.used_mib;
            }
        }
        return 0;
    }

    fs::path dir_;
    std::string file_;
    std::unique_ptr<GpuBackend> backend_;
};

// This test verifies a whole run at 100x: the job, named by UUID, shows its memory on that GPU
// (and only there) while it runs, reports progress, exits 0 and leaves the GPU empty.
TEST_F(FakeJobTest, ShortRunFinishesAndShowsItsMemoryWhileRunning) {
    // 400 model seconds (start-up ~15 s, then ~385 s of work) = ~4 wall seconds at 100x.
    auto job = start("short", emulated_gpu_uuid(1),
                     {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "400",
                      "--memory", "12000"});
    EXPECT_TRUE(eventually([&] { return memory_of(job->pid(), 1) == 12000; })) << job->err();
    EXPECT_EQ(memory_of(job->pid(), 0), 0);
    EXPECT_EQ(job->wait(), 0) << job->err();
    EXPECT_NE(job->out().find("progress 100%"), std::string::npos) << job->out();
    auto s = backend_->sample();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ((*s)[1].used_mib, 0);
}

// This test verifies the OOM rule end to end (§10(f) 4): with 25,000 MiB resident, a second job
// ramping to 20,000 MiB on the same GPU prints PyTorch's error and exits 1; the first goes on.
TEST_F(FakeJobTest, SecondBigJobOnOneGpuRunsOutOfMemory) {
    auto first = start("first", "0",
                       {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "1000000",
                        "--memory", "25000"});
    ASSERT_TRUE(eventually([&] { return memory_of(first->pid(), 0) == 25000; })) << first->err();

    auto second = start("second", "0",
                        {"--profile", "BERT_base", "--time-scale", "100", "--memory", "20000"});
    EXPECT_EQ(second->wait(), 1) << second->err();
    const std::string err = second->err();
    EXPECT_NE(err.find("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("GPU 0 has a total capacity of 39.49 GiB of which "), std::string::npos)
        << err;

    EXPECT_EQ(memory_of(first->pid(), 0), 25000);
    EXPECT_FALSE(first->wait(std::chrono::milliseconds(0)).has_value());  // still running
    ::kill(first->pid(), SIGTERM);
    EXPECT_EQ(first->wait(), 143);
}

// This test verifies that SIGTERM stops a job at once with 143, in start-up and while active,
// and that it gives its memory back.
TEST_F(FakeJobTest, SigtermExits143AndFreesItsMemory) {
    auto active = start("active", "1",
                        {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "1000000",
                         "--memory", "9000"});
    ASSERT_TRUE(eventually([&] { return memory_of(active->pid(), 1) == 9000; })) << active->err();
    ::kill(active->pid(), SIGTERM);
    EXPECT_EQ(active->wait(), 143);
    auto s = backend_->sample();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ((*s)[1].used_mib, 0);

    // Real time: BERT_base's 15 s start-up has barely begun when the signal comes.
    auto starting = start("starting", "0", {"--profile", "BERT_base"});
    ASSERT_TRUE(eventually([&] { return starting->out().find("carma-fakejob:") == 0; }))
        << starting->err();
    ::kill(starting->pid(), SIGTERM);
    EXPECT_EQ(starting->wait(), 143);
}

// This test verifies that a task the catalog does not know (a trace replay) runs with the
// class defaults when its run time and memory are given.
TEST_F(FakeJobTest, UnknownTaskRunsWithRunTimeAndMemoryGiven) {
    auto job = start("unknown-task", "0",
                     {"--profile", "philly_job_17", "--time-scale", "100", "--duration-s", "200",
                      "--memory", "3GiB", "--class", "heavy"});
    EXPECT_TRUE(eventually([&] { return memory_of(job->pid(), 0) == 3072; })) << job->err();
    EXPECT_EQ(job->wait(), 0) << job->err();
}

// This test verifies the usage errors: exit 2 with a message that says what to fix.
TEST_F(FakeJobTest, UsageErrorsExit2WithAHint) {
    auto unknown = start("unknown", "0", {"--profile", "NoSuchModel"});
    EXPECT_EQ(unknown->wait(), 2);
    EXPECT_NE(unknown->err().find("unknown profile 'NoSuchModel'"), std::string::npos)
        << unknown->err();
    EXPECT_NE(unknown->err().find("BERT_base"), std::string::npos) << unknown->err();

    FakeJob no_devices(dir_, "no-devices", {"--profile", "BERT_base", "--emulator", file_}, {});
    EXPECT_EQ(no_devices.wait(), 2);
    EXPECT_NE(no_devices.err().find("CUDA_VISIBLE_DEVICES"), std::string::npos) << no_devices.err();

    FakeJob no_file(dir_, "no-file", {"--profile", "BERT_base"}, {{"CUDA_VISIBLE_DEVICES", "0"}});
    EXPECT_EQ(no_file.wait(), 2);
    EXPECT_NE(no_file.err().find("CARMA_EMULATOR_FILE"), std::string::npos) << no_file.err();

    auto bad_gpu = start("bad-gpu", "7", {"--profile", "BERT_base"});
    EXPECT_EQ(bad_gpu->wait(), 2);
    EXPECT_NE(bad_gpu->err().find("CUDA_VISIBLE_DEVICES '7'"), std::string::npos) << bad_gpu->err();

    auto bad_scale = start("bad-scale", "0", {"--profile", "BERT_base", "--time-scale", "0"});
    EXPECT_EQ(bad_scale->wait(), 2);
}

}  // namespace
}  // namespace carma::device
