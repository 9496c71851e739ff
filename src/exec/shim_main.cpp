// carma-shim: supervises one attempt of a task; see exec/launch.h for the design.
// Usage: carma-shim --request <attempt_dir>/request.json
//
// Single-threaded on purpose: the forked task child may then use any function (malloc included)
// before exec, and all signals are taken synchronously from a signalfd, so there are no handlers
// and no races between a signal and the state it changes.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <optional>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/clock.h"
#include "exec/launch.h"
#include "exec/proc_tree.h"

namespace carma::exec {

namespace {

// stderr is <attempt_dir>/shim.log (set up by launch()).
template <typename... Args>
void shim_log(fmt::format_string<Args...> format, Args&&... args) {
    std::string line = fmt::format("carma-shim[{}]: ", ::getpid()) +
                       fmt::format(format, std::forward<Args>(args)...) + "\n";
    std::fputs(line.c_str(), stderr);
}

std::string attempt_file(const std::string& dir, std::string_view name) {
    return dir + "/" + std::string(name);
}

// Started by hand with a closed standard stream, a later open() would land on 0-2 and dup2()
// in the task child would clobber it.
void ensure_std_fds() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) < 0) {
            ::open("/dev/null", O_RDWR);  // takes the lowest free number, i.e. fd
        }
    }
}

// --- signals ---------------------------------------------------------------------------------

// Returns a signalfd for SIGTERM and SIGCHLD. Dispositions are reset first because ignored ones
// survive exec: with SIGCHLD ignored (as some daemons do) the kernel would reap the task itself
// and its exit status would be lost.
int setup_signals() {
    ::signal(SIGHUP, SIG_IGN);  // the daemon's session ending is no reason to stop
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
        shim_log("cannot block SIGTERM and SIGCHLD: {}", errno_text(errno));
        return -1;
    }
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        shim_log("cannot create a signalfd: {}", errno_text(errno));
    }
    return fd;
}

// The task starts with default dispositions and nothing blocked, not with the shim's setup.
void reset_signals_for_task() {
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) {
            ::signal(sig, SIG_DFL);  // fails harmlessly for glibc's reserved real-time signals
        }
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool sigterm_pending() {
    sigset_t pending;
    sigemptyset(&pending);
    return ::sigpending(&pending) == 0 && sigismember(&pending, SIGTERM) == 1;
}

// --- the task child --------------------------------------------------------------------------

// The request turned into what execvp needs, built before fork.
struct TaskExec {
    std::vector<char*> argv;
    std::vector<std::string> env_storage;
    std::vector<char*> envp;
    std::string stdout_path;
    std::string stderr_path;
};

TaskExec prepare_exec(LaunchRequest& request, const std::string& dir) {
    TaskExec x;
    for (auto& arg : request.argv) {
        x.argv.push_back(arg.data());
    }
    x.argv.push_back(nullptr);
    for (const auto& [key, value] : request.env) {
        x.env_storage.push_back(key + "=" + value);
    }
    for (auto& entry : x.env_storage) {
        x.envp.push_back(entry.data());
    }
    x.envp.push_back(nullptr);
    x.stdout_path = attempt_file(dir, kStdoutFile);
    x.stderr_path = attempt_file(dir, kStderrFile);
    return x;
}

// Sends the reason to the shim through the O_CLOEXEC pipe and exits; the shim writes it into
// exit.json as the attempt's error.
[[noreturn]] void child_fail(int err_fd, const std::string& message) {
    std::string text = message.substr(0, 4000);
    ssize_t ignored = ::write(err_fd, text.data(), text.size());
    (void)ignored;
    ::_exit(127);
}

void redirect_output(int err_fd, const std::string& path, int target) {
    // Opened before switching user: the attempt directory is the daemon's and stays closed to
    // the task's user, who only receives the open descriptor.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        child_fail(err_fd, fmt::format("cannot open {}: {}", path, errno_text(errno)));
    }
    if (::dup2(fd, target) < 0) {
        child_fail(err_fd, fmt::format("cannot redirect to {}: {}", path, errno_text(errno)));
    }
    ::close(fd);
}

// Opened before switching user (the task's user may have no access to them) and left open across
// exec (no O_CLOEXEC); each descriptor's number goes into the task's environment under the name
// the request gives, replacing a variable of that name.
void open_task_files(int err_fd, const LaunchRequest& r, TaskExec& x) {
    if (r.files.empty()) {
        return;
    }
    for (const TaskFile& f : r.files) {
        const int fd = ::open(f.path.c_str(), O_RDWR | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0) {
            child_fail(err_fd,
                       fmt::format("cannot open task file {}: {}", f.path, errno_text(errno)));
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            child_fail(err_fd, fmt::format("task file {} is not a regular file", f.path));
        }
        const std::string prefix = f.env + "=";
        std::erase_if(x.env_storage,
                      [&](const std::string& entry) { return entry.starts_with(prefix); });
        x.env_storage.push_back(prefix + std::to_string(fd));
    }
    x.envp.clear();
    for (auto& entry : x.env_storage) {
        x.envp.push_back(entry.data());
    }
    x.envp.push_back(nullptr);
}

// Groups first, then gid, then uid: after setuid the process may no longer change the others.
void switch_user(int err_fd, const LaunchRequest& r) {
    if (::setgroups(r.groups.size(), r.groups.data()) != 0) {
        child_fail(err_fd, fmt::format("cannot set the supplementary groups of uid {}: {}", r.uid,
                                       errno_text(errno)));
    }
    if (::setgid(r.gid) != 0) {
        child_fail(err_fd, fmt::format("cannot set gid {}: {}", r.gid, errno_text(errno)));
    }
    if (::setuid(r.uid) != 0) {
        child_fail(err_fd, fmt::format("cannot set uid {}: {}", r.uid, errno_text(errno)));
    }
    if (::getuid() != r.uid || ::geteuid() != r.uid || ::getgid() != r.gid ||
        ::getegid() != r.gid) {
        child_fail(err_fd,
                   fmt::format("switching to uid {} gid {} did not take effect", r.uid, r.gid));
    }
}

[[noreturn]] void run_task_child(int err_fd, const LaunchRequest& r, TaskExec& x) {
    if (::setsid() < 0) {  // its own session and process group: pgid = its pid
        child_fail(err_fd, fmt::format("setsid: {}", errno_text(errno)));
    }
    reset_signals_for_task();
    redirect_output(err_fd, x.stdout_path, 1);
    redirect_output(err_fd, x.stderr_path, 2);
    open_task_files(err_fd, r, x);
    if (r.switch_user) {
        switch_user(err_fd, r);
    }
    // After the switch, so that the kernel checks the user's permissions, not root's.
    if (::chdir(r.workdir.c_str()) != 0) {
        int err = errno;
        child_fail(err_fd, fmt::format("cannot enter working directory {} as uid {}: {}", r.workdir,
                                       ::getuid(), errno_text(err)));
    }
    // execvp searches getenv("PATH"): with environ replaced that is the task's own PATH.
    ::environ = const_cast<char**>(x.envp.data());
    ::execvp(x.argv[0], x.argv.data());
    child_fail(err_fd, fmt::format("{}: {}", r.argv[0], errno_text(errno)));
}

// --- starting and supervising ----------------------------------------------------------------

struct Started {
    pid_t pid = -1;     // > 0: the task runs; its process group id is the same
    std::string error;  // otherwise why it could not be started
};

// Reads the child's error pipe until EOF: empty means exec succeeded (the pipe closed on exec).
std::string read_child_error(int fd) {
    std::string text;
    char buf[512];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return text;
        }
        text.append(buf, static_cast<size_t>(n));
    }
}

Started start_task(LaunchRequest& request, const std::string& dir) {
    TaskExec x = prepare_exec(request, dir);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        return {-1, fmt::format("cannot create a pipe: {}", errno_text(errno))};
    }
    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        return {-1, fmt::format("cannot fork the task: {}", errno_text(err))};
    }
    if (pid == 0) {
        ::close(fds[0]);
        run_task_child(fds[1], request, x);
    }
    ::close(fds[1]);
    std::string error = read_child_error(fds[0]);
    ::close(fds[0]);
    if (error.empty()) {
        return {pid, ""};
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return {-1, error};
}

// What is left of the task: its group, its session and its leader's descendants, plus whatever
// was re-parented to this shim (a child subreaper): ranks that called setsid or daemonised
// escape the process group but not this. The shim itself is never in it.
std::set<pid_t> task_members(pid_t leader) {
    const std::vector<ProcEntry> table = read_process_table();
    std::set<pid_t> out = task_processes(table, leader);
    for (pid_t p : descendants(table, ::getpid())) {
        out.insert(p);
    }
    for (const ProcEntry& e : table) {
        if (e.zombie) {
            out.erase(e.pid);
        }
    }
    out.erase(::getpid());
    return out;
}

// The group first (one call reaches most of it), then every member outside it.
void signal_task(pid_t leader, int sig) {
    if (::kill(-leader, sig) != 0 && errno != ESRCH) {
        shim_log("cannot send signal {} to process group {}: {}", sig, leader, errno_text(errno));
    }
    for (pid_t p : task_members(leader)) {
        ::kill(p, sig);
    }
}

// Orphans re-parented to the shim must not stay zombies; the leader is reaped last, on purpose
// (see Supervisor::leader_exited).
void reap_orphans(pid_t leader) {
    for (const ProcEntry& e : read_process_table()) {
        if (e.ppid == ::getpid() && e.pid != leader && e.zombie) {
            ::waitpid(e.pid, nullptr, WNOHANG);
        }
    }
}

class Supervisor {
public:
    Supervisor(pid_t pid, int signal_fd, int timer_fd, double grace_s)
        : pid_(pid), signal_fd_(signal_fd), timer_fd_(timer_fd), grace_s_(grace_s) {}

    // Returns once the task (the group leader) has exited; it is not reaped yet.
    bool wait_for_exit() {
        while (!leader_exited()) {
            if (failed_) {
                return false;
            }
            pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {timer_fd_, POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
                shim_log("poll: {}", errno_text(errno));
                return false;
            }
            if ((fds[0].revents & POLLIN) != 0) {
                drain_signals();
            }
            if ((fds[1].revents & POLLIN) != 0) {
                on_grace_expired();
            }
        }
        return true;
    }

    bool cancel_requested() const { return cancel_requested_; }

private:
    // WNOWAIT leaves the leader a zombie, which keeps its pid from being reused, so that the
    // group can still be signalled safely until the shim reaps it.
    bool leader_exited() {
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
            if (errno != EINTR) {
                shim_log("waitid {}: {}", pid_, errno_text(errno));
                failed_ = true;
            }
            return false;
        }
        return info.si_pid == pid_;
    }

    // The signalfd is non-blocking: read until it is empty.
    void drain_signals() {
        signalfd_siginfo si{};
        while (::read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
            if (si.ssi_signo == SIGTERM) {
                on_stop_requested();
            }
            // On SIGCHLD the loop checks the leader on every wake-up; orphans are reaped here.
        }
        reap_orphans(pid_);
    }

    void on_stop_requested() {
        if (cancel_requested_) {
            return;  // the grace period already runs
        }
        cancel_requested_ = true;
        shim_log("stop requested: SIGTERM to process group {}, SIGKILL in {} s", pid_, grace_s_);
        signal_group(SIGTERM);
        signal_group(SIGCONT);  // a stopped task would otherwise not see SIGTERM until SIGKILL
        if (grace_s_ <= 0) {
            signal_group(SIGKILL);
            return;
        }
        itimerspec when{};
        when.it_value.tv_sec = static_cast<time_t>(grace_s_);
        when.it_value.tv_nsec = static_cast<long>((grace_s_ - std::floor(grace_s_)) * 1e9);
        if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) {
            when.it_value.tv_nsec = 1;  // all zero would disarm the timer
        }
        if (::timerfd_settime(timer_fd_, 0, &when, nullptr) != 0) {
            shim_log("cannot arm the grace timer: {}; killing now", errno_text(errno));
            signal_group(SIGKILL);
        }
    }

    void on_grace_expired() {
        uint64_t expirations = 0;
        ssize_t ignored = ::read(timer_fd_, &expirations, sizeof expirations);
        (void)ignored;
        shim_log("grace period over: SIGKILL to process group {}", pid_);
        signal_group(SIGKILL);
    }

    void signal_group(int sig) { signal_task(pid_, sig); }

    pid_t pid_;
    int signal_fd_;
    int timer_fd_;
    double grace_s_;
    bool cancel_requested_ = false;
    bool failed_ = false;
};

// Kills what is left of the task (its group and every process that escaped it), reaps the
// leader and records its end.
ExitRecord finish_task(pid_t pid, bool cancel_requested) {
    constexpr int kKillRounds = 200;  // 10 ms apart: killed processes need a moment to go
    for (int round = 0; round < kKillRounds; ++round) {
        signal_task(pid, SIGKILL);
        reap_orphans(pid);
        std::set<pid_t> left = task_members(pid);
        left.erase(pid);
        if (left.empty()) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ExitRecord record;
    record.started = true;
    record.cancel_requested = cancel_requested;
    int status = 0;
    pid_t got = 0;
    while ((got = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    record.ended_at = unix_now();
    if (got != pid) {
        record.error =
            fmt::format("cannot collect the exit status of pid {}: {}", pid, errno_text(errno));
    } else if (WIFEXITED(status)) {
        record.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        record.signal = WTERMSIG(status);
    }
    return record;
}

ExitRecord not_started(std::string error) {
    ExitRecord record;
    record.started = false;
    record.error = std::move(error);
    record.cancel_requested = sigterm_pending();
    record.ended_at = unix_now();
    return record;
}

// --- recording the end -----------------------------------------------------------------------

// Room for exit.json claimed before the task starts: its end is written into these blocks, so a
// disk that filled up (or a quota reached) while the task ran does not keep it from being
// recorded at once. Larger than any record but one with a very long error text.
constexpr std::size_t kExitReserveBytes = 8192;
constexpr auto kFirstRetry = std::chrono::seconds(1);
constexpr auto kLastRetry = std::chrono::seconds(30);

// Real bytes, not fallocate: overwriting written blocks needs no new ones on every file system
// that overwrites in place (ext4, xfs, tmpfs; not btrfs or zfs, where the retries below cover).
void reserve_exit_space(const std::string& dir) {
    const std::string path = attempt_file(dir, kExitReserveFile);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        shim_log("cannot create {}: {}; the end is recorded once there is room for exit.json",
                 path, errno_text(errno));
        return;
    }
    const std::string room(kExitReserveBytes, ' ');
    for (size_t done = 0; done < room.size();) {
        ssize_t n = ::write(fd, room.data() + done, room.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            shim_log("cannot reserve room for exit.json in {}: {}; the end is recorded once there "
                     "is room for it",
                     path, errno_text(errno));
            ::close(fd);
            ::unlink(path.c_str());
            return;
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
}

// The record written into the reserved blocks, then renamed to exit.json: readers see no
// exit.json or the whole record, as with write_file_atomic().
Result<void> write_exit_into_reserve(const std::string& dir, const std::string& text) {
    const std::string reserve = attempt_file(dir, kExitReserveFile);
    const std::string path = attempt_file(dir, kExitFile);
    auto failed = [&](std::string_view what, int err) {
        return fail(ErrorCode::Io, fmt::format("cannot {} {}: {}", what, reserve, errno_text(err)));
    };
    int fd = ::open(reserve.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return failed("open", errno);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < text.size()) {
        ::close(fd);
        return fail(ErrorCode::Io, fmt::format("the record ({} bytes) does not fit in {}",
                                               text.size(), reserve));
    }
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done,
                             static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            ::close(fd);
            return failed("write", err);
        }
        done += static_cast<size_t>(n);
    }
    // Shrinking frees blocks and needs none.
    if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0 || ::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        return failed("truncate and fsync", err);
    }
    ::close(fd);
    if (::rename(reserve.c_str(), path.c_str()) != 0) {
        return failed("rename to exit.json", errno);
    }
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dir_fd >= 0 && ::fsync(dir_fd) == 0;
    const int err = errno;
    if (dir_fd >= 0) {
        ::close(dir_fd);
    }
    if (!synced) {
        return fail(ErrorCode::Io, fmt::format("cannot fsync directory {}: {}", dir,
                                               errno_text(err)));
    }
    return {};
}

std::string how_it_ended(const ExitRecord& record) {
    if (record.exit_code) {
        return fmt::format("exit code {}", *record.exit_code);
    }
    if (record.signal) {
        return fmt::format("killed by signal {}", *record.signal);
    }
    return record.error.empty() ? "no exit status" : record.error;
}

bool directory_exists(const std::string& dir) {
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Sleeps for `duration` while answering signals. The task has already ended, so a SIGTERM only
// means "still waiting to record it": acknowledged once in the log. Orphans are reaped.
void wait_answering_signals(std::chrono::milliseconds duration, int signal_fd, bool& stop_seen) {
    const auto until = std::chrono::steady_clock::now() + duration;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return;
        }
        pollfd fd{signal_fd, POLLIN, 0};
        if (::poll(&fd, 1, static_cast<int>(left.count()) + 1) < 0 && errno != EINTR) {
            std::this_thread::sleep_for(left);
            return;
        }
        if ((fd.revents & POLLIN) == 0) {
            continue;
        }
        signalfd_siginfo si{};
        while (::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
            if (si.ssi_signo == SIGTERM && !stop_seen) {
                stop_seen = true;
                shim_log("stop requested, but the task has already ended; still waiting to "
                         "record its end");
            }
        }
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
    }
}

// Writes exit.json: into the reserved room first, else anew. A task that ran has its end kept in
// memory and written again (1 s, doubling to 30 s) until it is recorded, whatever the error:
// ENOSPC and EDQUOT pass when space returns, EIO, EROFS or EACCES when an administrator repairs
// or remounts the file system, and until then the daemon, whose store lives in the same state
// directory, could not record the end either; giving up would turn a finished task into a lost
// one. The only end that is given up is when the attempt directory is gone: nobody reads it.
// An attempt that did not start is tried once: the launcher is waiting for exactly this, sees
// the shim exit and queues the task again, and nothing ran that could be lost.
int record_exit(const std::string& dir, const ExitRecord& record, int signal_fd) {
    const std::string text = exit_to_json(record);
    const std::string path = attempt_file(dir, kExitFile);
    const std::string tmp = path + ".tmp";
    if (::access(attempt_file(dir, kExitReserveFile).c_str(), F_OK) == 0) {
        auto reserved = write_exit_into_reserve(dir, text);
        if (reserved) {
            return 0;
        }
        shim_log("{}; writing exit.json anew", reserved.error().message);
        // Frees the reserved blocks, which are the room the record needs.
        ::unlink(attempt_file(dir, kExitReserveFile).c_str());
    }
    const auto first_failure = std::chrono::steady_clock::now();
    auto wait = std::chrono::milliseconds(kFirstRetry);
    std::string first_error;
    std::string last_error;
    int failures = 0;
    bool stop_seen = false;
    for (;;) {
        ::unlink(tmp.c_str());  // a partial one from the last try would hold blocks
        auto ok = write_file_atomic(path, text);
        if (ok) {
            if (failures > 0) {
                shim_log("exit.json written after {} failed {} over {:.0f} s (first: {})",
                         failures, failures == 1 ? "try" : "tries",
                         std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                       first_failure)
                             .count(),
                         first_error);
            }
            return 0;
        }
        ::unlink(tmp.c_str());
        ++failures;
        if (!record.started) {
            shim_log("{}", ok.error().message);
            return 1;
        }
        if (!directory_exists(dir)) {
            shim_log("{}; the attempt directory is gone, so the end of the task ({}) cannot be "
                     "recorded",
                     ok.error().message, how_it_ended(record));
            return 1;
        }
        if (first_error.empty()) {
            first_error = ok.error().message;
        }
        if (ok.error().message != last_error) {  // once per distinct error, not every try
            last_error = ok.error().message;
            shim_log("{}; the end of the task ({}) is kept and written again every {} to {} s "
                     "until it is recorded",
                     last_error, how_it_ended(record), kFirstRetry.count(), kLastRetry.count());
        }
        wait_answering_signals(wait, signal_fd, stop_seen);
        wait = std::min<std::chrono::milliseconds>(wait * 2, kLastRetry);
    }
}

Result<LaunchRequest> load_request(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(ErrorCode::Io, fmt::format("cannot read {}: {}", path, errno_text(errno)));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return request_from_json(text.str());
}

int supervise(pid_t pid, int signal_fd, double grace_s, const std::string& dir) {
    int timer_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (timer_fd < 0) {
        shim_log("cannot create a timerfd: {}; a stop will kill at once", errno_text(errno));
        grace_s = 0;
    }
    Supervisor supervisor(pid, signal_fd, timer_fd, grace_s);
    bool exited = supervisor.wait_for_exit();
    ExitRecord record = finish_task(pid, supervisor.cancel_requested());
    if (!exited && record.error.empty()) {
        record.error = "the shim lost track of the task and killed it";
    }
    shim_log("task {} ended: exit code {}, signal {}, cancel requested {}", pid,
             record.exit_code.value_or(-1), record.signal.value_or(0), record.cancel_requested);
    return record_exit(dir, record, signal_fd);
}

void report(int fd, char kind, int value) {
    const ShimStartReport r{kind, value};
    const ssize_t ignored = ::write(fd, &r, sizeof r);
    (void)ignored;  // nothing else to do: launch() then sees a short or missing report
}

// The first process forks the shim proper, reports its pid on `report_fd` and exits, so the
// shim is re-parented away from whoever started it (the daemon); the shim starts a session of
// its own and closes the pipe, and launch() reads until both have. Returns in the shim.
void detach(int report_fd) {
    // posix_spawn leaves glibc's two internal signals (32, 33) ignored in the new program, and
    // libc's sigaction refuses to touch them: back to their defaults with the system call itself,
    // so the task inherits nothing of its launcher.
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)();
        unsigned long mask;
    } default_action{SIG_DFL, 0, nullptr, 0};
    for (int sig = 32; sig < SIGRTMIN; ++sig) {
        ::syscall(SYS_rt_sigaction, sig, &default_action, nullptr, sizeof default_action.mask);
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        report(report_fd, shim_report::kFork, errno);
        ::_exit(127);
    }
    if (pid > 0) {
        report(report_fd, shim_report::kPid, pid);
        ::_exit(0);
    }
    if (::setsid() < 0) {
        report(report_fd, shim_report::kSetsid, errno);
        ::_exit(127);
    }
    ::close(report_fd);
}

int run(const std::string& request_path) {
    std::string dir = request_path.substr(0, request_path.rfind('/'));
    ensure_std_fds();
    int signal_fd = setup_signals();
    if (signal_fd < 0) {
        return 1;  // cannot be stopped safely: better not start (launch() reports shim.log)
    }
    if (::chdir("/") != 0) {  // not keep the daemon's working directory busy
        shim_log("chdir /: {}", errno_text(errno));
    }
    // After the signal setup: a SIGTERM sent by a caller who read shim.pid is never lost.
    if (auto ok =
            write_file_atomic(attempt_file(dir, kShimPidFile), fmt::format("{}\n", ::getpid()));
        !ok) {
        shim_log("{}", ok.error().message);
        return 1;
    }
    reserve_exit_space(dir);
    auto request = load_request(request_path);
    if (!request) {
        return record_exit(dir, not_started(request.error().message), signal_fd);
    }
    // A child subreaper: the task's orphans are re-parented here, not to init, so escaped
    // processes are still found, signalled on a stop and killed when the task ends.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        shim_log("cannot become a child subreaper: {}; processes that leave the task's group "
                 "may outlive it",
                 errno_text(errno));
    }
    Started started = start_task(*request, dir);
    if (started.pid < 0) {
        shim_log("task not started: {}", started.error);
        return record_exit(dir, not_started(started.error), signal_fd);
    }
    if (auto ok =
            write_file_atomic(attempt_file(dir, kTaskPidFile), fmt::format("{}\n", started.pid));
        !ok) {
        ::kill(-started.pid, SIGKILL);  // a task whose group nobody can find must not run
        finish_task(started.pid, false);
        return record_exit(dir, not_started(ok.error().message), signal_fd);
    }
    return supervise(started.pid, signal_fd, request->kill_grace_s, dir);
}

}  // namespace

}  // namespace carma::exec

int main(int argc, char** argv) {
    // launch() starts `carma-shim --detach FD --request PATH`; `--request PATH` alone runs the
    // attempt in this very process (tests).
    std::optional<int> report_fd;
    int at = 1;
    if (argc == 5 && std::string_view(argv[1]) == "--detach") {
        report_fd = std::atoi(argv[2]);
        at = 3;
    }
    if (argc != at + 2 || std::string_view(argv[at]) != "--request" || argv[at + 1][0] != '/' ||
        (report_fd && *report_fd < 3)) {
        std::fputs("usage: carma-shim [--detach FD] --request /absolute/attempt_dir/request.json\n",
                   stderr);
        return 2;
    }
    if (report_fd) {
        carma::exec::detach(*report_fd);
    }
    return carma::exec::run(argv[at + 1]);
}
