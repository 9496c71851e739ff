// carma-shim: supervising the running task. Signals arrive on a signalfd; a stop sends SIGTERM to
// everything of the task and SIGKILL after the grace period; once the leader has exited, what is
// left of the task is killed and the leader reaped into an ExitRecord.

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/clock.h"
#include "exec/launch.h"
#include "exec/proc_tree.h"
#include "exec/shim.h"

namespace carma::exec::shim {

namespace {

constexpr double kDrainS = 10;

bool sigterm_pending() {
    sigset_t pending;
    sigemptyset(&pending);
    return ::sigpending(&pending) == 0 && sigismember(&pending, SIGTERM) == 1;
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
    Supervisor(pid_t pid, int signal_fd, int timer_fd, double grace_s, OutputCopier& copier)
        : pid_(pid), signal_fd_(signal_fd), timer_fd_(timer_fd), grace_s_(grace_s),
          copier_(copier) {}

    // Returns once the task (the group leader) has exited; it is not reaped yet.
    bool wait_for_exit() {
        while (!leader_exited()) {
            if (failed_) {
                return false;
            }
            std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}, {timer_fd_, POLLIN, 0}};
            copier_.add_poll_fds(fds);
            if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
                shim_log("poll: {}", errno_text(errno));
                return false;
            }
            if ((fds[0].revents & POLLIN) != 0) {
                drain_signals();
            }
            if ((fds[1].revents & POLLIN) != 0) {
                on_grace_expired();
            }
            // The task blocks once a pipe is full: copied as soon as there is something.
            copier_.pump();
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
    OutputCopier& copier_;
};

}  // namespace

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
    rusage usage{};
    while ((got = ::wait4(pid, &status, 0, &usage)) < 0 && errno == EINTR) {
    }
    record.ended_at = unix_now();
    if (got == pid) {  // the fence's counters replace these when there is one (shim_fence.cpp)
        record.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
        record.max_rss_bytes = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // KiB
    }
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

int supervise(pid_t pid, int signal_fd, const LaunchRequest& request, const std::string& dir,
              OutputCopier& copier) {
    double grace_s = request.kill_grace_s;
    int timer_fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (timer_fd < 0) {
        shim_log("cannot create a timerfd: {}; a stop will kill at once", errno_text(errno));
        grace_s = 0;
    }
    Supervisor supervisor(pid, signal_fd, timer_fd, grace_s, copier);
    bool exited = supervisor.wait_for_exit();
    ExitRecord record = finish_task(pid, supervisor.cancel_requested());
    // After finish_task: nothing of the task runs any more, so the counters are final and the
    // leaf can go (remove_fence kills what escaped the process tree but not the cgroup).
    end_task_fence(request, record);
    // Every process of the task is gone: what it wrote is copied before the end is recorded,
    // so the daemon reads whole logs when it classifies the end.
    copier.drain(kDrainS);
    if (!exited && record.error.empty()) {
        record.error = "the shim lost track of the task and killed it";
    }
    shim_log("task {} ended: exit code {}, signal {}, cancel requested {}", pid,
             record.exit_code.value_or(-1), record.signal.value_or(0), record.cancel_requested);
    return record_exit(dir, record, signal_fd);
}

}  // namespace carma::exec::shim
