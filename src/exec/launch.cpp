// launch(): checks a request, creates the attempt directory, starts carma-shim detached and waits
// until it has started the task (or recorded why not).

#include "exec/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "exec/fd.h"
#include "exec/launch_internal.h"

extern char** environ;

namespace carma::exec {

namespace {

// How long launch() waits for the shim to report that the task started. Generous: on a loaded
// machine exec of the shim and then of the task (perhaps from a network file system) can take
// seconds, and giving up early would leave a task running that nobody tracks.
constexpr auto kStartDeadline = std::chrono::seconds(static_cast<int>(kStartDeadlineS));
constexpr auto kPollInterval = std::chrono::milliseconds(5);

// The last lines of the shim's own log, for error messages.
std::string shim_log_tail(const std::string& dir) {
    auto text = read_small_file(attempt_file(dir, kShimLogFile)).value_or("");
    constexpr size_t kTail = 1000;
    if (text.size() > kTail) {
        text = "..." + text.substr(text.size() - kTail);
    }
    while (!text.empty() && text.back() == '\n') {
        text.pop_back();
    }
    return text.empty() ? "shim.log is empty" : "shim.log: " + text;
}

// --- validation ------------------------------------------------------------------------------

bool has_nul(std::string_view s) {
    return s.find('\0') != std::string_view::npos;
}

Result<void> validate_strings(const LaunchRequest& r) {
    if (r.argv.empty() || r.argv[0].empty()) {
        return fail(ErrorCode::InvalidArgument, "the command is empty; give at least argv[0]");
    }
    for (const auto& arg : r.argv) {
        if (has_nul(arg)) {
            return fail(ErrorCode::InvalidArgument, "a command argument contains a NUL byte");
        }
    }
    for (const auto& [key, value] : r.env) {
        if (key.empty() || key.find('=') != std::string::npos || has_nul(key) || has_nul(value)) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("environment variable name '{}' is invalid: it must be "
                                    "non-empty and contain neither '=' nor NUL",
                                    key));
        }
    }
    if (r.workdir.empty() || has_nul(r.workdir)) {
        return fail(ErrorCode::InvalidArgument, "the working directory is empty or contains NUL");
    }
    if (r.attempt_dir.empty() || has_nul(r.attempt_dir)) {
        return fail(ErrorCode::InvalidArgument, "the attempt directory is empty or contains NUL");
    }
    for (const std::string* copy : {&r.stdout_copy, &r.stderr_copy}) {
        // The shim runs in "/": the daemon makes them absolute against the workdir.
        if (!copy->empty() && ((*copy)[0] != '/' || has_nul(*copy))) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("output file '{}' must be an absolute path without NUL",
                                    *copy));
        }
    }
    if (!r.script.empty() && (r.script_arg == 0 || r.script_arg >= r.argv.size())) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the script's argument {} is not in the command (1 to {}): the "
                                "copy replaces the path an interpreter reads",
                                r.script_arg, r.argv.size() - 1));
    }
    for (const TaskFile& f : r.files) {
        // The shim runs in "/": a relative path would name another file there.
        if (f.path.empty() || f.path[0] != '/' || has_nul(f.path)) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("task file '{}' must be an absolute path without NUL", f.path));
        }
        if (f.env.empty() || f.env.find('=') != std::string::npos || has_nul(f.env)) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("task file {}: variable name '{}' is invalid: it must be "
                                    "non-empty and contain neither '=' nor NUL",
                                    f.path, f.env));
        }
    }
    return {};
}

Result<void> validate(const LaunchRequest& r, const std::string& shim_path) {
    if (auto ok = validate_strings(r); !ok) {
        return ok;
    }
    if (!std::isfinite(r.kill_grace_s) || r.kill_grace_s < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("kill grace {} s must be a finite number >= 0", r.kill_grace_s));
    }
    if (r.switch_user && ::geteuid() != 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("running a task as uid {} needs root; this process is uid {}",
                                r.uid, ::geteuid()));
    }
    if (shim_path.empty()) {
        return fail(ErrorCode::InvalidArgument, "the path of carma-shim is empty");
    }
    if (::access(shim_path.c_str(), X_OK) != 0) {
        return sys_fail(fmt::format("carma-shim {} is not executable", shim_path), errno);
    }
    return {};
}

Result<void> make_attempt_dir(const std::string& dir) {
    // 0700: the directory holds the task's output and its environment (which may carry secrets).
    // The shim runs as the daemon's user and opens the logs before switching to the task's user,
    // so neither the task's user nor anyone else needs access.
    if (::mkdir(dir.c_str(), 0700) == 0) {
        return {};
    }
    int err = errno;
    if (err == EEXIST) {
        return fail(
            ErrorCode::InvalidArgument,
            fmt::format("attempt directory {} already exists; each attempt needs a new one", dir));
    }
    return sys_fail(fmt::format("cannot create attempt directory {}", dir), err);
}

// --- starting the shim -----------------------------------------------------------------------

// Descriptors 0-2 are about to be replaced with dup2(); a source among them would be lost.
Result<int> open_high(const std::string& path, int flags, mode_t mode) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    if (fd < 0) {
        return sys_fail(fmt::format("cannot open {}", path), errno);
    }
    if (fd > 2) {
        return fd;
    }
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    ::close(fd);
    if (high < 0) {
        return sys_fail(fmt::format("cannot duplicate descriptor of {}", path), err);
    }
    return high;
}

void reap(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    // ECHILD is fine: a daemon with SIGCHLD ignored, or a reaper thread, collected it already.
}

// Reads the reports until EOF: the shim's first process has exited and the shim has closed its
// copy of the pipe.
Result<pid_t> read_reports(int fd, const std::string& shim_path) {
    pid_t shim_pid = 0;
    ShimStartReport r;
    for (;;) {
        ssize_t n = ::read(fd, &r, sizeof r);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return sys_fail("cannot read the shim's start report", errno);
        }
        if (n == 0) {
            break;
        }
        if (n != sizeof r) {
            return fail(ErrorCode::Internal, "short start report from the shim");
        }
        switch (r.kind) {
            case shim_report::kPid:
                shim_pid = r.value;
                break;
            case shim_report::kFork:
                return sys_fail("cannot fork the shim", r.value);
            case shim_report::kSetsid:
                return sys_fail("the shim cannot start a new session", r.value);
            default:
                return fail(ErrorCode::Internal, "unknown start report from the shim");
        }
    }
    if (shim_pid <= 0) {
        return fail(ErrorCode::Internal,
                    fmt::format("{} exited before starting the task, without reporting the pid of "
                                "its supervisor; is it CARMA's carma-shim, of this version?",
                                shim_path));
    }
    return shim_pid;
}

// Starts the shim with posix_spawn (glibc's clone(CLONE_VM | CLONE_VFORK): the daemon's address
// space, which holds every queued task, is not copied, where fork() copied its page tables twice
// for each attempt); the shim detaches itself (shim_main.cpp, --detach): its first process forks
// the shim proper, reports its pid and exits, so the shim is re-parented to init (or the nearest
// subreaper) and is never the daemon's child.
Result<pid_t> spawn_shim(const std::string& shim_path, const std::string& dir) {
    auto null_fd = open_high("/dev/null", O_RDWR, 0);
    if (!null_fd) {
        return tl::unexpected(null_fd.error());
    }
    Fd null_guard(*null_fd);
    auto log_fd = open_high(attempt_file(dir, kShimLogFile), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (!log_fd) {
        return tl::unexpected(log_fd.error());
    }
    Fd log_guard(*log_fd);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return sys_fail("cannot create a pipe for starting the shim", errno);
    }
    Fd read_end(pipe_fds[0]);
    Fd pipe_write(pipe_fds[1]);
    // Above the descriptor the shim gets it as: a dup2 onto itself would keep close-on-exec.
    const int high = ::fcntl(pipe_fds[1], F_DUPFD_CLOEXEC, kShimReportFd + 1);
    if (high < 0) {
        return sys_fail("cannot duplicate the shim's report pipe", errno);
    }
    Fd write_end(high);
    pipe_write.reset();

    const std::string report_fd = std::to_string(kShimReportFd);
    const std::string request_path = attempt_file(dir, kRequestFile);
    std::vector<std::string> args = {shim_path, "--detach", report_fd, "--request", request_path};
    std::vector<char*> argv;
    for (auto& arg : args) {
        argv.push_back(arg.data());
    }
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Standard streams to /dev/null and shim.log, the report pipe at a known number, nothing else
    // of the daemon's (its sockets, lock, database) and no signal it blocks for its signalfd.
    posix_spawn_file_actions_adddup2(&actions, *null_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, *log_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, *log_fd, 2);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), kShimReportFd);
    posix_spawn_file_actions_addclosefrom_np(&actions, kShimReportFd + 1);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t first = 0;
    const int err = ::posix_spawn(&first, shim_path.c_str(), &actions, &attr, argv.data(),
                                  environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
        return sys_fail(fmt::format("cannot execute carma-shim {}", shim_path), err);
    }
    write_end.reset();  // so that read() sees EOF once the shim's processes closed theirs
    reap(first);
    return read_reports(read_end.get(), shim_path);
}

// Waits for shim.pid and then task.pid or exit.json. The files are checked after the liveness
// test, so that a shim that wrote exit.json and exited in between is not mistaken for a crash.
Result<void> wait_for_start(pid_t shim_pid, const std::string& dir) {
    auto deadline = std::chrono::steady_clock::now() + kStartDeadline;
    for (;;) {
        bool gone = process_gone(shim_pid);
        if (auto pid = read_pid_file(attempt_file(dir, kShimPidFile))) {
            if (*pid != shim_pid) {
                return fail(
                    ErrorCode::Internal,
                    fmt::format("{}/shim.pid says {} but the shim is {}", dir, *pid, shim_pid));
            }
            if (exists(attempt_file(dir, kTaskPidFile)) || exists(attempt_file(dir, kExitFile))) {
                return {};
            }
        }
        if (gone) {
            return fail(ErrorCode::Internal,
                        fmt::format("carma-shim {} for {} exited before starting the task ({})",
                                    shim_pid, dir, shim_log_tail(dir)));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(shim_pid, SIGKILL);  // not leave a shim running that nobody tracks
            return fail(ErrorCode::Internal,
                        fmt::format("carma-shim {} for {} did not start the task within {} s and "
                                    "was killed ({})",
                                    shim_pid, dir, kStartDeadline.count(), shim_log_tail(dir)));
        }
        std::this_thread::sleep_for(kPollInterval);
    }
}

}  // namespace

Result<LaunchHandle> launch(const LaunchRequest& request, const std::string& shim_path) {
    if (auto ok = validate(request, shim_path); !ok) {
        return tl::unexpected(ok.error());
    }
    // The shim runs in "/" and must not depend on the daemon's working directory.
    LaunchRequest req = request;
    req.attempt_dir = normalized_path(request.attempt_dir);
    req.workdir = normalized_path(request.workdir);
    std::string shim = normalized_path(shim_path);

    auto json_text = request_to_json(req);
    if (!json_text) {
        return tl::unexpected(json_text.error());
    }
    if (auto ok = make_attempt_dir(req.attempt_dir); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = write_file_atomic(attempt_file(req.attempt_dir, kRequestFile), *json_text); !ok) {
        return tl::unexpected(ok.error());
    }
    auto shim_pid = spawn_shim(shim, req.attempt_dir);
    if (!shim_pid) {
        return tl::unexpected(shim_pid.error());
    }
    if (auto ok = wait_for_start(*shim_pid, req.attempt_dir); !ok) {
        return tl::unexpected(ok.error());
    }
    return LaunchHandle{*shim_pid, req.attempt_dir, ""};
}

}  // namespace carma::exec
