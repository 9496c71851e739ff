// carma-shim: supervises one attempt of a task; see exec/launch.h for the design.
// Usage: carma-shim --request <attempt_dir>/request.json
//
// Single-threaded on purpose: the forked task child may then use any function (malloc included)
// before exec, and all signals are taken synchronously from a signalfd, so there are no handlers
// and no races between a signal and the state it changes.

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/launch.h"
#include "exec/launch_internal.h"
#include "exec/shim.h"

namespace carma::exec::shim {

namespace {

// Started by hand with a closed standard stream, a later open() would land on 0-2 and dup2()
// in the task child would clobber it.
void ensure_std_fds() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) < 0) {
            ::open("/dev/null", O_RDWR);  // takes the lowest free number, i.e. fd
        }
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
    OutputCopier copier;
    Started started = start_task(*request, dir, copier);
    if (started.pid < 0) {
        shim_log("task not started: {}", started.error);
        return record_exit(dir, not_started(started.error), signal_fd);
    }
    if (auto ok =
            write_file_atomic(attempt_file(dir, kTaskPidFile), fmt::format("{}\n", started.pid));
        !ok) {
        ::kill(-started.pid, SIGKILL);  // a task whose group nobody can find must not run
        finish_task(started.pid, false);
        discard_task_fence(*request);
        return record_exit(dir, not_started(ok.error().message), signal_fd);
    }
    return supervise(started.pid, signal_fd, *request, dir, copier);
}

}  // namespace

}  // namespace carma::exec::shim

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
        carma::exec::shim::detach(*report_fd);
    }
    return carma::exec::shim::run(argv[at + 1]);
}
