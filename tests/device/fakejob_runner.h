#pragma once
// What the end-to-end tests of carma-fakejob share: the real binary as a child process with its
// stdout and stderr in files, polling with a generous deadline so that no test depends on
// timing, and a fixture of emulated GPUs for the jobs to run on.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support.h"
#include "device/emulated.h"
#include "model/gpu_type.h"

// The build points this at the carma-fakejob it built.
#ifndef CARMA_FAKEJOB_PATH
#error "CARMA_FAKEJOB_PATH must name the carma-fakejob binary"
#endif

extern char** environ;  // POSIX: declared by no standard header

namespace carma::device::fakejob_runner {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

inline constexpr auto kDeadline = std::chrono::seconds(60);

inline std::string read_file(const fs::path& path) { return test_support::read_text(path); }

using test_support::eventually;

// One carma-fakejob process, `dir`/`name`.out and .err holding its stdout and stderr. Killed
// when destroyed if it still runs.
class FakeJob {
  public:
    FakeJob(const fs::path& dir, const std::string& name, const std::vector<std::string>& args,
            const Env& env)
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
    FakeJob(const FakeJob&) = delete;
    FakeJob& operator=(const FakeJob&) = delete;
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

    // The exit code (128+signal if killed by one), or nothing if still running at the deadline.
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
    // The test's environment plus `env`, minus anything that could steer the job (its devices,
    // CARMA's settings, the fake libraries' knobs): a test says all that the job sees.
    static std::vector<std::string> environment(const Env& env) {
        std::vector<std::string> out;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string entry = *e;
            if (!entry.starts_with("CUDA_") && !entry.starts_with("CARMA_") &&
                !entry.starts_with("FAKE_")) {
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

// Jobs on two emulated A100-40GB GPUs shared under MPS, watched through the backend as the
// daemon would; every test in a directory of its own.
class EmulatedFakeJobTest : public ::testing::Test {
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

    // A job on `devices`, the emulator file named by the environment as the daemon does it;
    // `env` comes after those two.
    std::unique_ptr<FakeJob> start(const std::string& name, const std::string& devices,
                                   const std::vector<std::string>& args, const Env& env = {}) {
        Env all = {{"CUDA_VISIBLE_DEVICES", devices}, {"CARMA_EMULATOR_FILE", file_}};
        all.insert(all.end(), env.begin(), env.end());
        auto job = std::make_unique<FakeJob>(dir_, name, args, all);
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

}  // namespace carma::device::fakejob_runner
