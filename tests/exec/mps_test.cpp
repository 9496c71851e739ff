// The MPS pieces: starting and stopping the control daemon (against tests/fake_mps, which
// records how it was run), and the task environment's memory-limit variable.

#include "exec/mps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::exec {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Sets (or unsets) an environment variable for the scope of a test.
class ScopedEnv {
  public:
    ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
        if (const char* old = std::getenv(name_.c_str())) {
            old_ = old;
        }
        if (value) {
            ::setenv(name_.c_str(), value->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    ~ScopedEnv() {
        if (old_) {
            ::setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }

  private:
    std::string name_;
    std::optional<std::string> old_;
};

std::vector<std::string> lines_of(const fs::path& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

mode_t mode_of(const fs::path& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
}

class MpsControlTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "carma-mps-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        record_ = dir_ / "record";
        options_.control = CARMA_FAKE_MPS_CONTROL;
        options_.pipe_dir = (dir_ / "mps" / "pipe").string();
        options_.log_dir = (dir_ / "mps" / "log").string();
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string expected_line(const std::string& args) const {
        return "args=" + args + " pipe=" + options_.pipe_dir + " log=" + options_.log_dir +
               " cvd=- limit=-";
    }

    fs::path dir_;
    fs::path record_;
    MpsOptions options_;
    // No knob of the fake may leak in from the environment the tests run in.
    ScopedEnv override_{std::string(kMpsControlOverrideEnv), std::nullopt};
    ScopedEnv fail_{"FAKE_MPS_FAIL", std::nullopt};
    ScopedEnv hang_{"FAKE_MPS_HANG", std::nullopt};
    ScopedEnv record_env_{"FAKE_MPS_RECORD", std::nullopt};
};

// This test verifies that start first asks whether a control daemon already serves the pipe
// directory, then runs `control -d` with the pipe and log directories in its environment (and
// neither CUDA_VISIBLE_DEVICES nor a memory limit of the daemon's), creates both directories
// 0755, and that stop feeds it `quit`.
TEST_F(MpsControlTest, StartAndStopRunTheControlProgramWithTheDirectories) {
    ScopedEnv record("FAKE_MPS_RECORD", record_.string());
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "1");
    ScopedEnv limit(std::string(kMpsMemLimitEnv), "0=1G");

    auto daemon = MpsDaemon::start(options_);
    ASSERT_TRUE(daemon.has_value()) << daemon.error().message;
    EXPECT_EQ(daemon->control_path(), CARMA_FAKE_MPS_CONTROL);
    EXPECT_EQ(daemon->pipe_dir(), options_.pipe_dir);
    EXPECT_EQ(daemon->log_dir(), options_.log_dir);
    EXPECT_EQ(mode_of(options_.pipe_dir), 0755u);
    EXPECT_EQ(mode_of(options_.log_dir), 0755u);
    EXPECT_TRUE(fs::exists(fs::path(options_.pipe_dir) / "control"));
    EXPECT_FALSE(daemon->adopted());
    const std::vector<std::string> started = {expected_line(""), "stdin=get_server_list",
                                              expected_line("-d")};
    EXPECT_EQ(lines_of(record_), started);

    auto stopped = daemon->stop();
    ASSERT_TRUE(stopped.has_value()) << stopped.error().message;
    EXPECT_FALSE(fs::exists(fs::path(options_.pipe_dir) / "control"));
    std::vector<std::string> all = started;
    all.insert(all.end(), {expected_line(""), "stdin=quit"});
    EXPECT_EQ(lines_of(record_), all);
}

// This test verifies that an existing pipe directory made with another mode is set to 0755, so
// other users' MPS servers can reach it.
TEST_F(MpsControlTest, ExistingDirectoryIsMadeReachable) {
    fs::create_directories(options_.pipe_dir);
    ASSERT_EQ(::chmod(options_.pipe_dir.c_str(), 0700), 0);
    auto daemon = MpsDaemon::start(options_);
    ASSERT_TRUE(daemon.has_value()) << daemon.error().message;
    EXPECT_EQ(mode_of(options_.pipe_dir), 0755u);
}

// This test verifies the warning for a pipe directory under a parent other users cannot search
// (mkdtemp makes the test directory 0700): MPS would then serve only the daemon's own user.
TEST_F(MpsControlTest, WarnsWhenOtherUsersCannotReachThePipeDirectory) {
    ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
    auto daemon = MpsDaemon::start(options_);
    ASSERT_TRUE(daemon.has_value()) << daemon.error().message;
    EXPECT_THAT(daemon->warning(), HasSubstr(dir_.string() + " is not searchable by other users"));
}

// This test verifies that a failing control program gives an error that names it, quotes what it
// said and its exit status, and hints at the driver and at another daemon on the directory.
TEST_F(MpsControlTest, FailureSaysWhatTheProgramSaidWithAHint) {
    ScopedEnv fail("FAKE_MPS_FAIL", "1");
    auto daemon = MpsDaemon::start(options_);
    ASSERT_FALSE(daemon.has_value());
    const std::string& m = daemon.error().message;
    EXPECT_THAT(m, HasSubstr(std::string(CARMA_FAKE_MPS_CONTROL) + " -d` exited with status 1"));
    EXPECT_THAT(m, HasSubstr("Driver/library version mismatch"));
    EXPECT_THAT(m, HasSubstr("is the NVIDIA driver installed?"));
    EXPECT_THAT(m, HasSubstr("is another MPS control daemon running with pipe directory " +
                             options_.pipe_dir));
}

// This test verifies that a control daemon already serving the pipe directory (CARMA restarted
// while its tasks were MPS clients) is adopted rather than started twice or quit.
TEST_F(MpsControlTest, RunningDaemonOnThePipeDirectoryIsAdopted) {
    auto first = MpsDaemon::start(options_);
    ASSERT_TRUE(first.has_value()) << first.error().message;
    EXPECT_FALSE(first->adopted());
    ScopedEnv record("FAKE_MPS_RECORD", record_.string());
    auto second = MpsDaemon::start(options_);
    ASSERT_TRUE(second.has_value()) << second.error().message;
    EXPECT_TRUE(second->adopted());
    EXPECT_EQ(lines_of(record_),
              (std::vector<std::string>{expected_line(""), "stdin=get_server_list"}));
}

// This test verifies that stop reports a control program that could not deliver `quit`.
TEST_F(MpsControlTest, StopWithoutARunningDaemonFails) {
    auto daemon = MpsDaemon::start(options_);
    ASSERT_TRUE(daemon.has_value()) << daemon.error().message;
    fs::remove(fs::path(options_.pipe_dir) / "control");  // the daemon went away by itself
    auto stopped = daemon->stop();
    ASSERT_FALSE(stopped.has_value());
    EXPECT_THAT(stopped.error().message, HasSubstr("Cannot find MPS control daemon process"));
    EXPECT_THAT(stopped.error().message, HasSubstr("echo quit | " CARMA_FAKE_MPS_CONTROL));
}

// This test verifies that a missing program is named, with PATH and the override in the hint,
// whether given by name or by path.
TEST_F(MpsControlTest, MissingProgramIsNamed) {
    ScopedEnv path("PATH", dir_.string());
    options_.control = "nvidia-cuda-mps-control";
    auto by_name = MpsDaemon::start(options_);
    ASSERT_FALSE(by_name.has_value());
    EXPECT_EQ(by_name.error().code, ErrorCode::NotFound);
    EXPECT_THAT(by_name.error().message,
                HasSubstr("nvidia-cuda-mps-control not found on PATH (" + dir_.string() + ")"));
    EXPECT_THAT(by_name.error().message, HasSubstr("CARMA_MPS_CONTROL"));

    options_.control = (dir_ / "no-such-control").string();
    auto by_path = MpsDaemon::start(options_);
    ASSERT_FALSE(by_path.has_value());
    EXPECT_EQ(by_path.error().code, ErrorCode::NotFound);
    EXPECT_THAT(by_path.error().message, HasSubstr(options_.control + " does not exist"));
}

// This test verifies that the program is found on PATH by name, and that $CARMA_MPS_CONTROL
// overrides the configured program.
TEST_F(MpsControlTest, ProgramIsFoundOnPathOrTakenFromTheOverride) {
    // The fake's directory first; the rest of PATH for the commands the fake itself runs.
    const char* old_path = std::getenv("PATH");
    ScopedEnv path("PATH", dir_.string() + ":" +
                               fs::path(CARMA_FAKE_MPS_CONTROL).parent_path().string() + ":" +
                               (old_path != nullptr ? old_path : "/usr/bin:/bin"));
    options_.control = "nvidia-cuda-mps-control";
    auto found = MpsDaemon::start(options_);
    ASSERT_TRUE(found.has_value()) << found.error().message;
    EXPECT_EQ(found->control_path(), CARMA_FAKE_MPS_CONTROL);
    ASSERT_TRUE(found->stop().has_value());

    ScopedEnv override_env(std::string(kMpsControlOverrideEnv), CARMA_FAKE_MPS_CONTROL);
    options_.control = "not-installed-here";
    auto overridden = MpsDaemon::start(options_);
    ASSERT_TRUE(overridden.has_value()) << overridden.error().message;
    EXPECT_EQ(overridden->control_path(), CARMA_FAKE_MPS_CONTROL);
}

// This test verifies that a control program that hangs is killed after the timeout and the
// error says so with what it had printed.
TEST_F(MpsControlTest, HungProgramIsKilledAfterTheTimeout) {
    ScopedEnv hang("FAKE_MPS_HANG", "1");
    options_.timeout_s = 0.5;
    auto daemon = MpsDaemon::start(options_);
    ASSERT_FALSE(daemon.has_value());
    EXPECT_THAT(daemon.error().message, HasSubstr("did not finish within 0.5 s and was killed"));
    EXPECT_THAT(daemon.error().message, HasSubstr("waiting for the GPU"));
}

// --- the task's environment ------------------------------------------------------------------

// This test verifies that a task always gets the pipe directory and a memory limit only when
// one is known, in MiB with "M", keyed by the device names given.
TEST(MpsEnvironmentTest, PipeDirectoryAlwaysAndLimitsWhenKnown) {
    using Env = std::vector<std::pair<std::string, std::string>>;
    EXPECT_EQ(mps_task_environment("/run/carma/mps"),
              (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/run/carma/mps"}}));

    const std::array<MpsMemLimit, 3> limits = {MpsMemLimit{"GPU-aaaa", 12000},
                                               MpsMemLimit{"GPU-bbbb", 0},  // unknown
                                               MpsMemLimit{"GPU-cccc", 8192}};
    EXPECT_EQ(mps_task_environment("/run/carma/mps", limits),
              (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/run/carma/mps"},
                   {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "GPU-aaaa=12000M,GPU-cccc=8192M"}}));

    const std::array<MpsMemLimit, 1> unknown = {MpsMemLimit{"0", 0}};
    EXPECT_EQ(mps_task_environment("/p", unknown), (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/p"}}));

    const std::array<MpsMemLimit, 2> ordinals = {MpsMemLimit{"0", 1024}, MpsMemLimit{"1", 512}};
    EXPECT_EQ(format_pinned_mem_limit(ordinals), "0=1024M,1=512M");
}

// This test verifies that a control daemon given a GPU is started (and stopped) with that GPU
// alone in CUDA_VISIBLE_DEVICES, whatever the daemon's own environment says: one control daemon
// per GPU, so each serves its own GPU's clients.
TEST_F(MpsControlTest, ControlDaemonOfOneGpuSeesOnlyThatGpu) {
    ScopedEnv record("FAKE_MPS_RECORD", record_.string());
    ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "1");
    options_.visible_device = "GPU-fa4e0000-0000-4000-8000-000000000002";
    auto daemon = MpsDaemon::start(options_);
    ASSERT_TRUE(daemon.has_value()) << daemon.error().message;
    EXPECT_EQ(daemon->visible_device(), options_.visible_device);
    ASSERT_TRUE(daemon->stop().has_value());
    const std::string line = "args=-d pipe=" + options_.pipe_dir + " log=" + options_.log_dir +
                             " cvd=GPU-fa4e0000-0000-4000-8000-000000000002 limit=-";
    const std::vector<std::string> lines = lines_of(record_);
    ASSERT_EQ(lines.size(), 5u);
    EXPECT_EQ(lines[2], line);
    EXPECT_NE(lines[3].find(" cvd=GPU-fa4e0000-0000-4000-8000-000000000002 "), std::string::npos)
        << lines[3];
}

// This test verifies the directory for tasks outside MPS: created 0755, absolute, with no control
// daemon in it (the fake's "control" file is absent), so a CUDA program pointed there runs
// without MPS.
TEST_F(MpsControlTest, NoMpsDirectoryHasNoControlDaemon) {
    auto dir = prepare_no_mps_directory((dir_ / "mps" / "off").string());
    ASSERT_TRUE(dir.has_value()) << dir.error().message;
    EXPECT_EQ(*dir, (dir_ / "mps" / "off").string());
    EXPECT_EQ(mode_of(*dir), 0755u);
    EXPECT_FALSE(fs::exists(fs::path(*dir) / "control"));
    EXPECT_FALSE(prepare_no_mps_directory("").has_value());
}

// This test verifies limits by ordinal, as NVIDIA documents the variable: the i-th amount names
// ordinal i, unknown amounts are left out.
TEST(MpsEnvironmentTest, OrdinalLimitsFollowThePositions) {
    const std::array<MiB, 3> amounts = {12048, 0, 8000};
    const std::vector<MpsMemLimit> limits = ordinal_limits(amounts);
    EXPECT_EQ(limits, (std::vector<MpsMemLimit>{{"0", 12048}, {"2", 8000}}));
    EXPECT_EQ(format_pinned_mem_limit(limits), "0=12048M,2=8000M");
    EXPECT_TRUE(ordinal_limits({}).empty());
}

// This test verifies the documented forms ("0=1G,1=512MB"), UUIDs, spaces and any-case units,
// and that what format_pinned_mem_limit writes reads back the same.
TEST(MpsLimitParseTest, GoodValues) {
    auto doc = parse_pinned_mem_limit("0=1G,1=512MB");
    ASSERT_TRUE(doc.has_value()) << doc.error().message;
    EXPECT_EQ(*doc, (std::vector<MpsMemLimit>{{"0", 1024}, {"1", 512}}));

    auto mixed =
        parse_pinned_mem_limit(" GPU-emu00000-0000-4000-8000-000000000002 = 12000m , 3=2GiB ");
    ASSERT_TRUE(mixed.has_value()) << mixed.error().message;
    EXPECT_EQ(*mixed, (std::vector<MpsMemLimit>{{"GPU-emu00000-0000-4000-8000-000000000002", 12000},
                                                {"3", 2048}}));

    const std::vector<MpsMemLimit> limits = {{"GPU-a", 39000}, {"MIG-b", 1}, {"7", 123456}};
    auto round = parse_pinned_mem_limit(format_pinned_mem_limit(limits));
    ASSERT_TRUE(round.has_value()) << round.error().message;
    EXPECT_EQ(*round, limits);
}

// This test verifies that each malformed value is refused with the variable and the bad part
// named.
TEST(MpsLimitParseTest, BadValuesNameTheVariableAndTheBadPart) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", "names no device"},
        {"  ", "names no device"},
        {"0", "'0' has no '='"},
        {"0=1G,", "'' has no '='"},
        {"0=", "'' is not an amount"},
        {"0=12", "'12' is not an amount"},  // MPS wants a unit
        {"0=12T", "'12T' is not an amount"},
        {"0=-1G", "'-1G' is not an amount"},
        {"0=1.5G", "'1.5G' is not an amount"},
        {"0=99999999999999999999G", "'99999999999999999999G' is not an amount"},
        {"0=9223372036854775807G", "'9223372036854775807G' is not an amount"},  // overflows
        {"gpu0=1G", "'gpu0' is neither a CUDA ordinal nor a GPU UUID"},
        {"=1G", "'' is neither a CUDA ordinal nor a GPU UUID"},
        {"0=1G,0=2G", "device '0' is named twice"},
        // Found by the fuzz tests: limits beyond 16 TiB per GPU were accepted.
        {"0=16777217M", "'16777217M' is not an amount like 12000M or 12G of at most 16 TiB"},
        {"0=9007199254740991G", "'9007199254740991G' is not an amount"},
    };
    for (const auto& [text, why] : cases) {
        auto r = parse_pinned_mem_limit(text);
        ASSERT_FALSE(r.has_value()) << "'" << text << "' was accepted";
        EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
        EXPECT_THAT(r.error().message,
                    HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='" + text + "': " + why));
    }
}

}  // namespace
}  // namespace carma::exec
