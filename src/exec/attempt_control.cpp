// A running shim seen from outside: is this pid still our shim, asking it to stop the task, and
// settling an attempt whose launcher died while starting it.

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "exec/fd.h"
#include "exec/launch.h"
#include "exec/launch_internal.h"

namespace carma::exec {

namespace fs = std::filesystem;

namespace {

std::optional<std::vector<std::string>> proc_cmdline(pid_t pid) {
    auto text = read_small_file(fmt::format("/proc/{}/cmdline", pid));
    if (!text) {
        return std::nullopt;
    }
    std::vector<std::string> args;
    size_t start = 0;
    while (start < text->size()) {
        size_t end = text->find('\0', start);
        if (end == std::string::npos) {
            end = text->size();
        }
        args.push_back(text->substr(start, end - start));
        start = end + 1;
    }
    return args;
}

// A raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C", so its wrappers do not link from
// C++.
int pidfd_open(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0U));
}

// Returns 0 or the errno. Falls back to kill() only on kernels without pidfds (before 5.3).
int send_sigterm(int pidfd, int pidfd_open_errno, pid_t pid) {
    int rc = -1;
    if (pidfd >= 0) {
        rc = static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0U));
    } else if (pidfd_open_errno == ENOSYS) {
        rc = ::kill(pid, SIGTERM);
    } else {
        return pidfd_open_errno;
    }
    return rc == 0 ? 0 : errno;
}

// A live carma-shim started for this attempt directory, if any (its argv names the request).
std::optional<pid_t> find_shim(const std::string& attempt_dir) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) {
            continue;
        }
        const auto pid = static_cast<pid_t>(std::stol(name));
        if (is_our_shim(pid, attempt_dir) && !process_gone(pid)) {
            return pid;
        }
    }
    return std::nullopt;
}

}  // namespace

// Absolute and without "." / ".." / trailing "/", so that the shim's command line (and with it
// shim_alive()) does not depend on how the caller spelled the directory.
std::string normalized_path(const std::string& path) {
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    if (ec) {
        p = path;
    }
    p = p.lexically_normal();
    if (!p.has_filename() && p.has_relative_path()) {
        p = p.parent_path();
    }
    return p.string();
}

// Gone also when it is a zombie: a daemon that made itself a child subreaper would inherit the
// shim and, until it reaps it, kill(pid, 0) still succeeds.
bool process_gone(pid_t pid) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
        return true;
    }
    auto stat = read_small_file(fmt::format("/proc/{}/stat", pid));
    if (!stat) {
        return true;
    }
    size_t paren = stat->rfind(')');  // the command name may itself contain ')'
    if (paren == std::string::npos || paren + 2 >= stat->size()) {
        return false;
    }
    char state = (*stat)[paren + 2];
    return state == 'Z' || state == 'X';
}

bool is_our_shim(pid_t pid, const std::string& attempt_dir) {
    auto args = proc_cmdline(pid);
    std::string request = attempt_file(normalized_path(attempt_dir), kRequestFile);
    // `carma-shim [--detach FD] --request PATH`: shims started by an older daemon lack --detach.
    return args && (args->size() == 3 || args->size() == 5) &&
           (*args)[args->size() - 2] == "--request" && args->back() == request;
}

bool shim_alive(const LaunchHandle& handle) {
    if (handle.shim_pid <= 1) {
        return false;
    }
    // EPERM means another user's process: the shim runs as the daemon's user, so not ours.
    if (::kill(handle.shim_pid, 0) != 0) {
        return false;
    }
    // The pid may have been reused since; only our shim has this attempt's request on its
    // command line. A zombie has an empty command line.
    return is_our_shim(handle.shim_pid, handle.attempt_dir);
}

Result<void> request_stop(const LaunchHandle& handle) {
    if (exists(attempt_file(handle.attempt_dir, kExitFile))) {
        return {};  // already ended: nothing to stop
    }
    // A pidfd pins the process: once it is verified to be our shim, the signal cannot hit a
    // process that reused the pid in between.
    Fd pidfd(handle.shim_pid > 1 ? pidfd_open(handle.shim_pid) : -1);
    int open_err = errno;
    if (!shim_alive(handle)) {
        if (exists(attempt_file(handle.attempt_dir, kExitFile))) {
            return {};  // it ended while we looked
        }
        return fail(ErrorCode::NotFound,
                    fmt::format("carma-shim {} of {} is not running and left no exit.json; the "
                                "attempt is lost",
                                handle.shim_pid, handle.attempt_dir));
    }
    int err = send_sigterm(pidfd.get(), open_err, handle.shim_pid);
    if (err != 0 && err != ESRCH) {  // ESRCH: it ended in between, exit.json tells how
        return sys_fail(fmt::format("cannot send SIGTERM to carma-shim {} of {}", handle.shim_pid,
                                    handle.attempt_dir),
                        err);
    }
    return {};
}

InterruptedLaunch settle_interrupted_launch(const std::string& attempt_dir, double wait_s) {
    const std::string request = attempt_file(attempt_dir, kRequestFile);
    // After this rename no new shim can start the task: it finds no request.
    (void)::rename(request.c_str(), (request + ".withdrawn").c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    for (;;) {
        const auto shim = find_shim(attempt_dir);
        // Files after the process check: a shim that wrote them and exited is not missed.
        if (auto record = read_exit(attempt_dir)) {
            const auto pid = read_pid_file(attempt_file(attempt_dir, kShimPidFile));
            return InterruptedLaunch{record->started, pid.value_or(0)};
        }
        if (task_pgid(attempt_dir)) {
            const auto pid = read_pid_file(attempt_file(attempt_dir, kShimPidFile));
            return InterruptedLaunch{true, pid.value_or(shim.value_or(0))};
        }
        if (!shim) {
            return InterruptedLaunch{};
        }
        if (std::chrono::steady_clock::now() > deadline) {
            // A shim that holds the request but neither started the task nor gave up: treat it
            // as running; its exit (or its death) is recorded as any other attempt's.
            return InterruptedLaunch{true, *shim};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace carma::exec
