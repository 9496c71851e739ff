// Launching attempts under carma-shim, against real processes. Every wait polls with a generous
// deadline (CI machines are slow, sanitizer builds slower); nothing asserts how long things took.

#include "exec/launch.h"
#include "exec/launch_wait.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#ifndef CARMA_SHIM_PATH
#error "CARMA_SHIM_PATH must name the carma-shim executable"
#endif

namespace carma::exec {
namespace {

namespace fs = std::filesystem;

constexpr auto kDeadline = std::chrono::seconds(60);

bool wait_until(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

std::optional<ExitRecord> wait_for_exit(const std::string& attempt_dir) {
    std::optional<ExitRecord> record;
    wait_until([&] { return (record = read_exit(attempt_dir)).has_value(); });
    return record;
}

bool wait_for_output(const std::string& attempt_dir, const std::string& text) {
    return wait_until([&] {
        return read_file(fs::path(attempt_dir) / kStdoutFile).find(text) != std::string::npos;
    });
}

// Gone, or a zombie nobody has reaped yet (which no longer runs).
bool process_gone(pid_t pid) {
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    return stat.empty() ||
           (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

class LaunchTest : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/carma-launch-test-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr) << "mkdtemp: " << std::strerror(errno);
        root_ = pattern;
    }
    void TearDown() override {
        if (HasFailure()) {  // the shim's own log says what it saw
            std::cerr << "shim.log:\n" << read_file(root_ / "attempt" / kShimLogFile);
        }
        std::error_code ec;
        fs::remove_all(root_, ec);
    }

    LaunchRequest request(std::vector<std::string> argv) const {
        LaunchRequest r;
        r.argv = std::move(argv);
        r.workdir = root_.string();
        r.env = {{"PATH", "/usr/bin:/bin"}};
        r.attempt_dir = (root_ / "attempt").string();
        r.kill_grace_s = 10;
        return r;
    }

    // Launches and waits for the end; fails the test if either does not happen.
    std::optional<ExitRecord> run(const LaunchRequest& r) { return launch_and_wait(r); }

    std::string attempt_file(std::string_view name) const {
        return (root_ / "attempt" / name).string();
    }

    fs::path root_;
};

// --- exit status ------------------------------------------------------------------------------

// This test verifies that a task exiting 0 is recorded as started with exit code 0, and that
// launch() returns only after shim.pid and task.pid exist.
TEST_F(LaunchTest, RecordsExitZero) {
    auto handle = launch(request({"true"}), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    EXPECT_GT(handle->shim_pid, 1);
    EXPECT_TRUE(fs::exists(attempt_file(kShimPidFile)));
    EXPECT_TRUE(task_pgid(handle->attempt_dir).has_value());
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_FALSE(record->signal);
    EXPECT_FALSE(record->cancel_requested);
    EXPECT_GT(record->ended_at, 1.6e9);
    EXPECT_EQ(record->error, "");
}

// This test verifies that a non-zero exit code is recorded as it is.
TEST_F(LaunchTest, RecordsExitThree) {
    auto record = run(request({"sh", "-c", "exit 3"}));
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->exit_code, 3);
    EXPECT_FALSE(record->signal);
}

// This test verifies that a task killed by a signal is recorded with that signal, and that
// task.pid names the task's process group.
TEST_F(LaunchTest, RecordsDeathBySignal) {
    auto handle = launch(request({"sh", "-c", "echo ready; sleep 60"}), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    ASSERT_TRUE(wait_for_output(handle->attempt_dir, "ready"));
    auto pgid = task_pgid(handle->attempt_dir);
    ASSERT_TRUE(pgid);
    EXPECT_EQ(::getpgid(*pgid), *pgid);  // the task leads its own group
    ASSERT_EQ(::kill(-*pgid, SIGUSR2), 0) << std::strerror(errno);
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->signal, SIGUSR2);
    EXPECT_FALSE(record->exit_code);
    EXPECT_FALSE(record->cancel_requested);
}

// --- output, environment, working directory ---------------------------------------------------

// This test verifies that stdout and stderr land in their log files.
TEST_F(LaunchTest, OutputLandsInLogFiles) {
    auto record = run(request({"sh", "-c", "echo out; echo err >&2; echo more"}));
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "out\nmore\n");
    EXPECT_EQ(read_file(attempt_file(kStderrFile)), "err\n");
}

// This test verifies sbatch's --output/--error in the shim: the task's stdout and stderr are
// written to the files named as well as to the attempt's logs, whole (more than a pipe holds),
// and a child left running is ended with the task as without copies; one file for both streams
// takes them both; the first attempt truncates, a later one appends.
TEST_F(LaunchTest, OutputIsAlsoCopiedToTheNamedFiles) {
    const fs::path out = root_ / "user.out";
    const fs::path err = root_ / "user.err";
    write_file(out, "from an older run\n");
    LaunchRequest r = request({"sh", "-c",
                               "head -c 200000 /dev/zero | tr '\\0' x; echo; echo err >&2; "
                               "(sleep 0.3; echo late) & echo out"});
    r.stdout_copy = out.string();
    r.stderr_copy = err.string();
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0);
    const std::string log = read_file(attempt_file(kStdoutFile));
    EXPECT_EQ(log.size(), 200000u + 1 + 4) << "the background child was killed with the task";
    EXPECT_EQ(read_file(out), log) << "truncated, then the same bytes as CARMA's log";
    EXPECT_EQ(read_file(err), "err\n");
    EXPECT_EQ(read_file(attempt_file(kStderrFile)), "err\n");

    fs::remove_all(root_ / "attempt");
    LaunchRequest again = request({"sh", "-c", "echo second; echo oops >&2"});
    again.stdout_copy = out.string();
    again.stderr_copy = out.string();
    again.append_copies = true;
    record = run(again);
    ASSERT_TRUE(record);
    const std::string both = read_file(out);
    EXPECT_EQ(both.substr(0, log.size()), log) << "a later attempt appends";
    const std::string added = both.substr(log.size());
    EXPECT_TRUE(added == "second\noops\n" || added == "oops\nsecond\n") << added;
}

// This test verifies that a copy the shim cannot open fails the attempt before the task starts,
// with the option, the path and why: a directory that does not exist, and a symbolic link at
// the path (never followed, so a link cannot point the shim at another file).
TEST_F(LaunchTest, OutputFileThatCannotBeOpenedIsNotStarted) {
    LaunchRequest r = request({"sh", "-c", "echo ran > " + (root_ / "ran").string()});
    r.stdout_copy = (root_ / "no-such-dir" / "x.out").string();
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_NE(record->error.find("cannot open --output " + r.stdout_copy), std::string::npos)
        << record->error;
    EXPECT_NE(record->error.find("No such file or directory"), std::string::npos) << record->error;

    fs::remove_all(root_ / "attempt");
    const fs::path target = root_ / "target";
    write_file(target, "keep\n");
    fs::create_symlink(target, root_ / "link.err");
    r.stdout_copy.clear();
    r.stderr_copy = (root_ / "link.err").string();
    record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_NE(record->error.find("cannot open --error"), std::string::npos) << record->error;
    EXPECT_NE(record->error.find("symbolic link"), std::string::npos) << record->error;
    EXPECT_EQ(read_file(target), "keep\n");
    EXPECT_FALSE(fs::exists(root_ / "ran")) << "the task must not have run";
}

// This test verifies that the task's environment is exactly the given one: nothing of the
// test's (or the shim's) environment leaks in, and order and empty values are kept.
TEST_F(LaunchTest, EnvironmentIsExactlyTheGivenOne) {
    LaunchRequest r = request({"/usr/bin/env"});
    r.env = {{"PATH", "/usr/bin:/bin"}, {"FOO", "bar baz"}, {"EMPTY", ""}, {"A", "x=y"}};
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)),
              "PATH=/usr/bin:/bin\nFOO=bar baz\nEMPTY=\nA=x=y\n");
}

// This test verifies that argv[0] is looked up in the task's PATH, not the shim's.
TEST_F(LaunchTest, LooksUpCommandInTasksPath) {
    fs::create_directory(root_ / "bin");
    write_file(root_ / "bin" / "carma-test-tool", "#!/bin/sh\necho tool ran\n");
    fs::permissions(root_ / "bin" / "carma-test-tool", fs::perms::owner_all);
    LaunchRequest r = request({"carma-test-tool"});
    r.env = {{"PATH", (root_ / "bin").string() + ":/usr/bin:/bin"}};
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "tool ran\n");
}

// This test verifies task files: the task gets an open read-write descriptor of each, its number
// in the named variable (replacing a declared one).
TEST_F(LaunchTest, TaskFilesArePassedOpen) {
    const fs::path shared = root_ / "shared";
    write_file(shared, "from the daemon\n");
    LaunchRequest r = request({"bash", "-c",
                               "cat <&\"$CARMA_TEST_FD\"; echo from the task >&\"$CARMA_TEST_FD\"; "
                               "echo \"fd=$CARMA_TEST_FD\""});
    r.env.emplace_back("CARMA_TEST_FD", "declared");
    r.files = {TaskFile{shared.string(), "CARMA_TEST_FD"}};
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    auto out = read_file(attempt_file(kStdoutFile));
    EXPECT_EQ(out.substr(0, out.find("fd=")), "from the daemon\n");
    EXPECT_EQ(out.find("declared"), std::string::npos) << out;
    EXPECT_NE(out.find("fd="), std::string::npos) << out;
    EXPECT_EQ(read_file(shared), "from the daemon\nfrom the task\n");
}

// Which of `pid`'s descriptors refer to `path`.
int descriptors_of(pid_t pid, const fs::path& path) {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        std::error_code link_ec;
        count += fs::read_symlink(entry.path(), link_ec) == path ? 1 : 0;
    }
    return count;
}

// This test verifies that the task, not the shim, holds the task files: locks taken through the
// descriptor end with the task.
TEST_F(LaunchTest, OnlyTheTaskHoldsTaskFiles) {
    const fs::path shared = root_ / "shared";
    write_file(shared, "");
    LaunchRequest r = request({"sleep", "60"});
    r.files = {TaskFile{shared.string(), "CARMA_TEST_FD"}};
    auto handle = launch(r, CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    std::optional<pid_t> task;
    ASSERT_TRUE(wait_until([&] { return (task = task_pgid(handle->attempt_dir)).has_value(); }));
    EXPECT_TRUE(wait_until([&] { return descriptors_of(*task, shared) == 1; }));
    EXPECT_EQ(descriptors_of(handle->shim_pid, shared), 0);
    ASSERT_TRUE(request_stop(*handle));
    EXPECT_TRUE(wait_for_exit(handle->attempt_dir));
}

// This test verifies that a task file that is missing, or a symlink, keeps the task from
// starting (it would run without what it needs) with an error naming the file.
TEST_F(LaunchTest, TaskFileThatCannotBeOpenedIsNotStarted) {
    const fs::path target = root_ / "target";
    write_file(target, "x");
    fs::create_symlink(target, root_ / "link");
    for (const fs::path& path : {root_ / "missing", root_ / "link"}) {
        std::error_code ec;
        fs::remove_all(root_ / "attempt", ec);
        LaunchRequest r = request({"true"});
        r.files = {TaskFile{path.string(), "CARMA_TEST_FD"}};
        auto record = run(r);
        ASSERT_TRUE(record);
        EXPECT_FALSE(record->started) << path;
        EXPECT_NE(record->error.find("cannot open task file " + path.string()), std::string::npos)
            << record->error;
    }
}

// This test verifies that task files are checked up front: a relative path or a bad variable
// name is refused by launch() itself.
TEST_F(LaunchTest, MalformedTaskFilesAreRefused) {
    LaunchRequest r = request({"true"});
    r.files = {TaskFile{"relative/file", "CARMA_TEST_FD"}};
    auto relative = launch(r, CARMA_SHIM_PATH);
    ASSERT_FALSE(relative);
    EXPECT_NE(relative.error().message.find("absolute"), std::string::npos);
    r.files = {TaskFile{(root_ / "f").string(), "A=B"}};
    auto bad_name = launch(r, CARMA_SHIM_PATH);
    ASSERT_FALSE(bad_name);
    EXPECT_NE(bad_name.error().message.find("variable name"), std::string::npos);
}

// This test verifies that the task runs in its working directory.
TEST_F(LaunchTest, HonoursWorkdir) {
    fs::create_directory(root_ / "work");
    LaunchRequest r = request({"pwd"});
    r.workdir = (root_ / "work").string();
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), fs::canonical(root_ / "work").string() + "\n");
}

// This test verifies that a command that does not exist is recorded as not started, with the
// reason, rather than as an ordinary exit 127.
TEST_F(LaunchTest, MissingCommandIsNotStarted) {
    auto handle = launch(request({"carma-no-such-command", "x"}), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_EQ(record->error, "carma-no-such-command: No such file or directory");
    EXPECT_FALSE(record->exit_code);
    EXPECT_FALSE(task_pgid(handle->attempt_dir));
}

// This test verifies that a working directory that does not exist fails the attempt instead of
// running the task somewhere else.
TEST_F(LaunchTest, MissingWorkdirIsNotStarted) {
    LaunchRequest r = request({"pwd"});
    r.workdir = (root_ / "nowhere").string();
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_NE(record->error.find("cannot enter working directory " + r.workdir), std::string::npos)
        << record->error;
    EXPECT_NE(record->error.find("No such file or directory"), std::string::npos);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "");
}

// --- stopping ---------------------------------------------------------------------------------

// This test verifies that a stop request ends a task that ignores SIGTERM with SIGKILL after the
// grace period, and records that the stop was requested.
TEST_F(LaunchTest, StopKillsTaskIgnoringSigtermAfterGrace) {
    LaunchRequest r = request({"sh", "-c", "trap '' TERM; echo ready; sleep 60"});
    r.kill_grace_s = 1;
    auto handle = launch(r, CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    ASSERT_TRUE(wait_for_output(handle->attempt_dir, "ready"));  // the trap is in place
    auto stopped = request_stop(*handle);
    ASSERT_TRUE(stopped) << stopped.error().message;
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->signal, SIGKILL);
    EXPECT_TRUE(record->cancel_requested);
}

// This test verifies that a task that honours SIGTERM ends by it, with the stop recorded.
TEST_F(LaunchTest, StopEndsCooperativeTask) {
    auto handle = launch(request({"sh", "-c", "echo ready; exec sleep 60"}), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    ASSERT_TRUE(wait_for_output(handle->attempt_dir, "ready"));
    ASSERT_TRUE(request_stop(*handle));
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->signal, SIGTERM);
    EXPECT_TRUE(record->cancel_requested);
    // Once it has ended, another stop request is harmless.
    EXPECT_TRUE(request_stop(*handle));
}

// This test verifies that processes the task left behind in its group are killed when it ends.
TEST_F(LaunchTest, KillsLeftoverProcessesOfTheGroup) {
    auto record = run(request({"sh", "-c", "sleep 60 & echo $! > bg.pid"}));
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    pid_t bg = std::atoi(read_file(root_ / "bg.pid").c_str());
    ASSERT_GT(bg, 1);
    EXPECT_TRUE(wait_until([&] { return process_gone(bg); })) << "pid " << bg;
}

// This test verifies that processes which left the task's process group and session (a rank that
// called setsid, a double-forked daemon re-parented to the supervisor) are killed too when the
// task ends, so nothing of it keeps holding a GPU.
TEST_F(LaunchTest, KillsProcessesThatLeftTheGroup) {
    auto record = run(request(
        {"sh", "-c",
         "setsid sleep 60 & echo $! > rank.pid; (setsid sh -c 'sleep 60 & echo $! > daemon.pid' &);"
         " while [ ! -s daemon.pid ]; do sleep 0.01; done"}));
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    for (const char* file : {"rank.pid", "daemon.pid"}) {
        const pid_t p = std::atoi(read_file(root_ / file).c_str());
        ASSERT_GT(p, 1) << file;
        EXPECT_TRUE(wait_until([&] { return process_gone(p); })) << file << " pid " << p;
    }
}

// This test verifies that a stop reaches a rank that called setsid: SIGTERM ends it with the
// task instead of leaving it running after the task is gone.
TEST_F(LaunchTest, StopReachesARankThatCalledSetsid) {
    auto handle = launch(request({"sh", "-c",
                                  "setsid sleep 60 & echo $! > rank.pid; echo ready; wait"}),
                         CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    ASSERT_TRUE(wait_for_output(handle->attempt_dir, "ready"));
    const pid_t rank = std::atoi(read_file(root_ / "rank.pid").c_str());
    ASSERT_GT(rank, 1);
    ASSERT_TRUE(request_stop(*handle));
    ASSERT_TRUE(wait_for_exit(handle->attempt_dir));
    EXPECT_TRUE(wait_until([&] { return process_gone(rank); })) << "pid " << rank;
}

// --- detachment and liveness ------------------------------------------------------------------

// Runs launch() in a child process, first applying `prepare` to that process, and returns once
// that launcher has exited: the shim's pid, or -1.
pid_t launch_in_child(const LaunchRequest& r, const std::function<void()>& prepare) {
    int fds[2];
    if (::pipe(fds) != 0) {
        return -1;
    }
    pid_t launcher = ::fork();
    if (launcher == 0) {
        prepare();
        auto handle = launch(r, CARMA_SHIM_PATH);
        pid_t shim = handle ? handle->shim_pid : -1;
        ssize_t n = ::write(fds[1], &shim, sizeof shim);
        ::_exit(n == sizeof shim ? 0 : 1);
    }
    ::close(fds[1]);
    pid_t shim = -1;
    if (launcher < 0 || ::read(fds[0], &shim, sizeof shim) != static_cast<ssize_t>(sizeof shim)) {
        shim = -1;
    }
    ::close(fds[0]);
    int status = 0;
    if (launcher > 0) {
        ::waitpid(launcher, &status, 0);
    }
    return shim;
}

// This test verifies that the task keeps running when the process that launched it dies, and
// that its shim still writes exit.json afterwards.
TEST_F(LaunchTest, TaskSurvivesDeathOfLauncher) {
    LaunchRequest r =
        request({"sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; echo survived"});
    pid_t shim = launch_in_child(r, [] {});
    ASSERT_GT(shim, 1) << "launch failed in the launcher";

    LaunchHandle handle{shim, r.attempt_dir, ""};
    EXPECT_TRUE(shim_alive(handle));
    EXPECT_FALSE(read_exit(r.attempt_dir));
    auto pgid = task_pgid(r.attempt_dir);
    ASSERT_TRUE(pgid);
    EXPECT_EQ(::kill(-*pgid, 0), 0) << "the task is gone with its launcher";
    write_file(root_ / "go", "");
    auto record = wait_for_exit(r.attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "survived\n");
}

// This test verifies that the launcher's process state does not reach the task: a daemon may
// ignore SIGCHLD, block signals for a signalfd and hold descriptors without O_CLOEXEC, yet the
// task starts with default dispositions, nothing blocked and only stdin, stdout and stderr, and
// its exit status is still recorded.
TEST_F(LaunchTest, LauncherStateDoesNotLeakIntoTask) {
    // /proc/self of the commands themselves: a waiting sh blocks signals of its own.
    LaunchRequest r = request(
        {"sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status; ls /proc/self/fd; exit 5"});
    pid_t shim = launch_in_child(r, [] {
        ::signal(SIGCHLD, SIG_IGN);
        ::signal(SIGHUP, SIG_IGN);
        ::signal(SIGPIPE, SIG_IGN);
        sigset_t set;
        sigfillset(&set);
        ::sigprocmask(SIG_BLOCK, &set, nullptr);
        int leaked[2];
        if (::pipe(leaked) != 0) {  // deliberately without O_CLOEXEC
            ::_exit(1);
        }
    });
    ASSERT_GT(shim, 1) << "launch failed in the launcher";
    auto record = wait_for_exit(r.attempt_dir);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 5);
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)),
              "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n0\n1\n2\n3\n");  // 3: ls's
}

// This test verifies that shim_alive() is true for a running shim, false once it has exited, and
// false for a live process that is not this attempt's shim (a reused pid).
TEST_F(LaunchTest, ShimAliveSurvivesPidReuse) {
    auto handle =
        launch(request({"sh", "-c", "while [ ! -e go ]; do sleep 0.05; done"}), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    EXPECT_TRUE(shim_alive(*handle));
    EXPECT_TRUE(shim_alive({handle->shim_pid, handle->attempt_dir + "/", ""}));  // same directory
    EXPECT_FALSE(shim_alive({::getpid(), handle->attempt_dir, ""}));  // alive, but not a shim
    EXPECT_FALSE(shim_alive({handle->shim_pid, (root_ / "other").string(), ""}));
    write_file(root_ / "go", "");
    ASSERT_TRUE(wait_for_exit(handle->attempt_dir));
    EXPECT_TRUE(wait_until([&] { return !shim_alive(*handle); }));
}

// --- launch errors ----------------------------------------------------------------------------

// This test verifies that an attempt directory is never reused.
TEST_F(LaunchTest, RejectsExistingAttemptDir) {
    LaunchRequest r = request({"true"});
    fs::create_directory(r.attempt_dir);
    auto handle = launch(r, CARMA_SHIM_PATH);
    ASSERT_FALSE(handle);
    EXPECT_EQ(handle.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(handle.error().message.find(r.attempt_dir), std::string::npos);
}

// This test verifies malformed requests are refused before anything starts.
TEST_F(LaunchTest, RejectsMalformedRequests) {
    std::vector<LaunchRequest> bad(4, request({"true"}));
    bad[0].argv.clear();
    bad[1].env.push_back({"A=B", "c"});
    bad[2].kill_grace_s = -1;
    bad[3].workdir.clear();
    for (const auto& r : bad) {
        auto handle = launch(r, CARMA_SHIM_PATH);
        ASSERT_FALSE(handle);
        EXPECT_EQ(handle.error().code, ErrorCode::InvalidArgument) << handle.error().message;
    }
    EXPECT_FALSE(fs::exists(bad[0].attempt_dir));
    if (::geteuid() != 0) {
        LaunchRequest other_user = request({"true"});
        other_user.switch_user = true;
        other_user.uid = ::geteuid() + 1;
        auto handle = launch(other_user, CARMA_SHIM_PATH);
        ASSERT_FALSE(handle);
        EXPECT_EQ(handle.error().code, ErrorCode::InvalidArgument);
    }
}

// This test verifies clear errors when the shim cannot be run or exits without starting.
TEST_F(LaunchTest, ReportsShimThatNeverStarts) {
    auto missing = launch(request({"true"}), "/nonexistent/carma-shim");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("/nonexistent/carma-shim"), std::string::npos);
    EXPECT_NE(missing.error().message.find("No such file or directory"), std::string::npos);

    auto wrong = launch(request({"true"}), "/bin/true");  // runs, but writes no shim.pid
    ASSERT_FALSE(wrong);
    EXPECT_NE(wrong.error().message.find("exited before starting the task"), std::string::npos)
        << wrong.error().message;
}

// --- what the task used ----------------------------------------------------------------------

// This test verifies that without a fence the leader's rusage is recorded: CPU time and the
// largest RSS.
TEST_F(LaunchTest, RecordsUsageWithoutAFence) {
    auto record = run(request({"sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"}));
    ASSERT_TRUE(record);
    EXPECT_EQ(record->exit_code, 0);
    ASSERT_TRUE(record->cpu_s);
    EXPECT_GT(*record->cpu_s, 0.01);
    ASSERT_TRUE(record->max_rss_bytes);
    EXPECT_GT(*record->max_rss_bytes, 0);
    EXPECT_FALSE(record->memory_fence_hit);
    EXPECT_FALSE(record->memory_limit_bytes);
    EXPECT_EQ(record->fence_error, "");
}

// --- a full disk ------------------------------------------------------------------------------

// The attempt directory on a small tmpfs of its own (needs root), filled to the last byte while
// the task waits for a go file outside it; the task then exits 7.
class FullDiskTest : public LaunchTest {
protected:
    void SetUp() override {
        LaunchTest::SetUp();
        ASSERT_EQ(::geteuid(), 0u) << "needs root to mount a small tmpfs as the attempt's disk";
        disk_ = root_ / "disk";
        fs::create_directories(disk_);
        ASSERT_EQ(std::system(("mount -t tmpfs -o size=1m tmpfs " + disk_.string()).c_str()), 0)
            << "mount -t tmpfs failed";
        mounted_ = true;
    }
    void TearDown() override {
        if (HasFailure()) {
            std::cerr << "shim.log on the full disk:\n" << read_file(dir() / kShimLogFile);
        }
        if (mounted_) {
            (void)std::system(("umount -l " + disk_.string()).c_str());
        }
        LaunchTest::TearDown();
    }

    fs::path dir() const { return disk_ / "attempt"; }

    LaunchRequest waiting_task() const {
        LaunchRequest r = request({"sh", "-c", "while [ ! -e " + (root_ / "go").string() +
                                                   " ]; do sleep 0.05; done; exit 7"});
        r.attempt_dir = dir().string();
        return r;
    }

    void fill() {
        (void)std::system(("dd if=/dev/zero of=" + (disk_ / "filler").string() +
                           " bs=4k 2>/dev/null")
                              .c_str());
        // Not one more byte fits.
        std::ofstream probe(disk_ / "probe");
        probe << std::string(8192, 'x');
        probe.flush();
        ASSERT_FALSE(probe.good()) << "the tmpfs is not full";
    }

    // The task's process group has gone: its shim has reaped it and now records its end.
    bool task_gone(const LaunchHandle& handle) const {
        auto pgid = task_pgid(handle.attempt_dir);
        return pgid && ::kill(-*pgid, 0) != 0 && errno == ESRCH;
    }

    fs::path disk_;
    bool mounted_ = false;
};

// This test verifies that a task that ends after its attempt's disk filled up has its exit.json
// with its exit code at once, written into the room its shim reserved before the task started,
// while the disk is still full.
TEST_F(FullDiskTest, EndIsWrittenIntoTheReservedRoom) {
    auto handle = launch(waiting_task(), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    fill();
    write_file(root_ / "go", "");
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record) << "no exit.json on the full disk";
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->exit_code, 7);
    EXPECT_FALSE(record->cancel_requested);
    EXPECT_TRUE(fs::exists(disk_ / "filler"));  // nothing was freed
    EXPECT_FALSE(fs::exists(dir() / kExitReserveFile));  // it became exit.json
    EXPECT_TRUE(wait_until([&] { return !shim_alive(*handle); }));
}

// This test verifies that a shim that cannot write exit.json (the disk is full and the room it
// reserved is gone, as on a file system that cannot overwrite in place) keeps the end: it stays
// alive, answers a stop request without dying or changing the record (the task had already
// ended), leaves no partial exit.json.tmp, and writes exit.json with the task's exit code once
// space returns.
TEST_F(FullDiskTest, EndIsWrittenOnceSpaceReturns) {
    auto handle = launch(waiting_task(), CARMA_SHIM_PATH);
    ASSERT_TRUE(handle) << handle.error().message;
    fs::remove(dir() / kExitReserveFile);
    // A page of shim.log in use already, so that the shim's lines still fit on the full disk.
    std::ofstream(dir() / kShimLogFile, std::ios::app) << "test: the disk fills now\n";
    fill();
    write_file(root_ / "go", "");
    ASSERT_TRUE(wait_until([&] {
        return read_file(dir() / kShimLogFile).find("No space left on device") != std::string::npos;
    }));
    ASSERT_TRUE(task_gone(*handle));
    EXPECT_FALSE(fs::exists(dir() / kExitFile));
    ASSERT_TRUE(shim_alive(*handle)) << "the shim exited without recording the end";
    auto stopped = request_stop(*handle);
    ASSERT_TRUE(stopped) << stopped.error().message;
    ASSERT_TRUE(wait_until([&] {
        return read_file(dir() / kShimLogFile).find("still waiting to record its end") !=
               std::string::npos;
    }));
    EXPECT_TRUE(shim_alive(*handle));
    EXPECT_FALSE(fs::exists(dir() / kExitFile));
    EXPECT_FALSE(fs::exists(dir() / (std::string(kExitFile) + ".tmp")));

    fs::remove(disk_ / "filler");
    fs::remove(disk_ / "probe");
    auto record = wait_for_exit(handle->attempt_dir);
    ASSERT_TRUE(record) << "no exit.json once space returned";
    EXPECT_TRUE(record->started);
    EXPECT_EQ(record->exit_code, 7);
    EXPECT_FALSE(record->signal.has_value());
    EXPECT_FALSE(record->cancel_requested);  // asked after the task had ended
    EXPECT_TRUE(wait_until([&] { return !shim_alive(*handle); }));
    EXPECT_FALSE(fs::exists(dir() / (std::string(kExitFile) + ".tmp")));
    EXPECT_NE(read_file(dir() / kShimLogFile).find("exit.json written after"), std::string::npos)
        << read_file(dir() / kShimLogFile);
}

// --- running as another user ------------------------------------------------------------------

// A user (with a group of its own as supplementary group) that exists for one test. useradd
// takes a lock on /etc/passwd and fails at once when another test holds it: retry.
class ThrowawayUser {
public:
    ~ThrowawayUser() {
        if (!name_.empty()) {
            retry("userdel " + name_);
            retry("groupdel " + group_);
        }
    }

    // Empty on success, else why not.
    std::string create() {
        std::mt19937 rng(std::random_device{}());
        for (int attempt = 0; attempt < 20; ++attempt) {
            std::string suffix = std::to_string(::getpid()) + "x" + std::to_string(rng() % 10000);
            group_ = "carmag" + suffix;
            std::string name = "carmau" + suffix;
            std::string out = (fs::temp_directory_path() / ("useradd-" + suffix)).string();
            if (shell("groupadd " + group_ + " >" + out + " 2>&1") == 0) {
                if (shell("useradd -M -N -s /usr/sbin/nologin -G " + group_ + " " + name + " >" +
                          out + " 2>&1") == 0) {
                    std::remove(out.c_str());
                    name_ = name;
                    return "";
                }
                retry("groupdel " + group_);
            }
            last_error_ = read_file(out);
            std::remove(out.c_str());
            std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
        }
        return "useradd kept failing: " + last_error_;
    }

    const std::string& name() const { return name_; }

private:
    static int shell(const std::string& command) {
        int status = std::system(command.c_str());
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

    static void retry(const std::string& command) {
        for (int i = 0; i < 20 && shell(command + " >/dev/null 2>&1") != 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }

    std::string name_;
    std::string group_;
    std::string last_error_;
};

class RunAsUserTest : public LaunchTest {
protected:
    void SetUp() override {
        if (::geteuid() != 0) {
            FAIL() << "running a task as another user needs root";
        }
        if (::access("/usr/sbin/useradd", X_OK) != 0 && ::access("/sbin/useradd", X_OK) != 0) {
            FAIL() << "useradd is not installed";
        }
        LaunchTest::SetUp();
        std::string why = user_.create();
        if (!why.empty()) {
            FAIL() << why;
        }
        const passwd* pw = ::getpwnam(user_.name().c_str());
        ASSERT_NE(pw, nullptr) << user_.name();
        uid_ = pw->pw_uid;
        gid_ = pw->pw_gid;
        int count = 64;
        groups_.resize(static_cast<size_t>(count));
        ASSERT_GE(::getgrouplist(user_.name().c_str(), gid_, groups_.data(), &count), 0);
        groups_.resize(static_cast<size_t>(count));
        ASSERT_GE(groups_.size(), 2u);  // its primary group and the throwaway one
    }

    LaunchRequest as_user(std::vector<std::string> argv) const {
        LaunchRequest r = request(std::move(argv));
        r.switch_user = true;
        r.uid = uid_;
        r.gid = gid_;
        r.groups = groups_;
        r.workdir = std::string("/");  // moved in: GCC 12's -Wrestrict misfires on `= "/"` here
        return r;
    }

    ThrowawayUser user_;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    std::vector<gid_t> groups_;
};

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

// This test verifies that the task runs with the user's uid, gid and supplementary groups.
TEST_F(RunAsUserTest, RunsAsTheUserWithItsGroups) {
    auto record = run(as_user({"sh", "-c", "id -u; id -g; id -G"}));
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    auto out = lines(read_file(attempt_file(kStdoutFile)));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0], std::to_string(uid_));
    EXPECT_EQ(out[1], std::to_string(gid_));
    std::set<std::string> want;
    for (gid_t g : groups_) {
        want.insert(std::to_string(g));
    }
    std::set<std::string> got;
    std::istringstream ids(out[2]);
    for (std::string id; ids >> id;) {
        got.insert(id);
    }
    EXPECT_EQ(got, want);
}

// This test verifies that a fenced task running as another user is in its fence: the task child
// joins the cgroup while still root, before it switches to the user, who could not.
TEST_F(RunAsUserTest, FencedTaskJoinsItsFenceBeforeSwitchingUser) {
    FenceSpec fence;
    fence.mode = CgroupMode::V1;
    fence.root = "carma-test-as-user-" + std::to_string(::getpid());
    fence.name = "task-1-1";
    fence.pids_max = 50;
    auto prepared = prepare_fence_root(fence.mode, fence.root);
    ASSERT_TRUE(prepared) << prepared.error().message;
    LaunchRequest r = as_user({"sh", "-c", "id -u; cat /proc/self/cgroup"});
    r.fence = fence;
    auto record = run(r);
    const bool leaf_gone = !fs::exists(fence_leaf_path(fence, "pids"));
    auto removed = remove_fence_root(fence.mode, fence.root);
    EXPECT_TRUE(removed) << removed.error().message;
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    const std::string out = read_file(attempt_file(kStdoutFile));
    EXPECT_EQ(out.rfind(std::to_string(uid_) + "\n", 0), 0u) << out;
    EXPECT_NE(out.find("pids:/" + fence.root + "/task-1-1\n"), std::string::npos) << out;
    EXPECT_TRUE(leaf_gone);
}

// This test verifies that a working directory the user may not enter fails the attempt with a
// clear error (the check is the user's, not root's) instead of running the task elsewhere.
TEST_F(RunAsUserTest, WorkdirTheUserCannotEnterFails) {
    fs::path private_dir = root_ / "private";  // root_ is 0700 root
    fs::create_directory(private_dir);
    LaunchRequest r = as_user({"pwd"});
    r.workdir = private_dir.string();
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_EQ(record->error, "cannot enter working directory " + private_dir.string() + " as uid " +
                                 std::to_string(uid_) + ": Permission denied");
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "");
}

// This test verifies that a root shim opens --output files with the user's rights: a file in a
// directory of the user's is created owned by the user; in a directory only root may write, the
// attempt fails with "Permission denied" though root could have written there, and nothing is
// created.
TEST_F(RunAsUserTest, OutputFilesAreOpenedAsTheUser) {
    ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
    const fs::path home = root_ / "home";
    fs::create_directory(home);
    ASSERT_EQ(::chown(home.c_str(), uid_, gid_), 0);
    LaunchRequest r = as_user({"sh", "-c", "echo out; echo err >&2"});
    r.stdout_copy = (home / "job.out").string();
    r.stderr_copy = r.stdout_copy;
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    const std::string text = read_file(home / "job.out");
    EXPECT_TRUE(text == "out\nerr\n" || text == "err\nout\n") << text;
    struct stat st {};
    ASSERT_EQ(::stat((home / "job.out").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid_);
    EXPECT_EQ(st.st_gid, gid_);

    fs::remove_all(root_ / "attempt");
    r.stdout_copy = (root_ / "roots.out").string();  // root_ is root's, 0755
    r.stderr_copy.clear();
    record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_EQ(record->error, "cannot open --output " + r.stdout_copy + " as uid " +
                                 std::to_string(uid_) + ": Permission denied");
    EXPECT_FALSE(fs::exists(root_ / "roots.out"));
}

// Task files for another user: the test fails (does not skip) where it cannot run as root.
class TaskFileAsUserTest : public RunAsUserTest {
protected:
    void SetUp() override {
        ASSERT_EQ(::geteuid(), 0u) << "this test needs root, to run a task as another user";
        RunAsUserTest::SetUp();
        if (IsSkipped()) {
            FAIL() << "could not set up another user (see the skip reason above)";
        }
    }
};

// This test verifies that a task running as another user reaches a 0600 file of the daemon's
// user through the descriptor the shim passes, while opening it by name is denied.
TEST_F(TaskFileAsUserTest, AnotherUserReachesTheFileOnlyThroughItsDescriptor) {
    ASSERT_EQ(::chmod(root_.c_str(), 0711), 0);  // reachable by name, as the state directory is
    const fs::path shared = root_ / "shared";
    write_file(shared, "");
    ASSERT_EQ(::chmod(shared.c_str(), 0600), 0);
    LaunchRequest r = as_user({"bash", "-c",
                               "echo through the descriptor >&\"$CARMA_TEST_FD\"; "
                               "if echo by name >>" + shared.string() + "; then echo opened; "
                               "else echo denied; fi"});
    r.files = {TaskFile{shared.string(), "CARMA_TEST_FD"}};
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "denied\n");
    EXPECT_EQ(read_file(shared), "through the descriptor\n");
}

}  // namespace
}  // namespace carma::exec
