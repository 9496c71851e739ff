#pragma once
// Private to carma-shim (shim_*.cpp): the steps of supervising one attempt, which shim_main.cpp's
// run() takes in order. The design is in exec/launch.h, why the shim is single-threaded in
// shim_main.cpp.

#include <poll.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "exec/launch.h"

namespace carma::exec::shim {

// stderr is <attempt_dir>/shim.log (set up by launch()).
template <typename... Args>
void shim_log(fmt::format_string<Args...> format, Args&&... args) {
    std::string line = fmt::format("carma-shim[{}]: ", ::getpid()) +
                       fmt::format(format, std::forward<Args>(args)...) + "\n";
    std::fputs(line.c_str(), stderr);
}

// --- copies of the output for --output/--error (shim_output.cpp) ----------------------------

// The task's stdout and stderr through pipes into the attempt's logs and the user's files, for
// the streams the request copies; the others go straight to their logs, as without copies.
class OutputCopier {
public:
    OutputCopier() = default;
    ~OutputCopier();
    OutputCopier(const OutputCopier&) = delete;
    OutputCopier& operator=(const OutputCopier&) = delete;

    // Before the task starts: the logs as the shim, the user's files with the user's rights, the
    // pipes. Returns why it cannot ("" when ready): the attempt then does not start.
    std::string open(const LaunchRequest& request, const std::string& dir);
    // For the task child: the pipe to put on descriptor 1 or 2; -1 when that stream is not
    // copied (it opens its log itself).
    int task_fd(int stream) const;
    void after_fork();  // the shim's ends of the pipes the task writes to are closed
    bool copying() const;  // a pipe is still open
    void add_poll_fds(std::vector<pollfd>& fds) const;
    void pump();  // copies what the pipes hold now
    // Once the task has ended: copies what is left until every pipe is closed, at most this long
    // (a process that escaped the task's end may hold one).
    void drain(double timeout_s);

private:
    struct Stream {
        int pipe_read = -1;
        int pipe_write = -1;
        int log = -1;   // stdout.log or stderr.log
        int copy = -1;  // the user's file
    };
    Stream streams_[2];     // stdout, stderr
    int shared_copy_ = -1;  // one file for both streams
};

// --- the attempt's cgroup (shim_fence.cpp) ---------------------------------------------------
// Only the task joins the fence: the shim stays outside, so that the kernel's memory and pids
// limits never reach the supervisor that must record the task's end.

// Before the fork: the leaf with its limits. Returns why it cannot ("" when made, or when the
// request has no fence): the attempt then does not start.
std::string create_task_fence(const LaunchRequest& request);
// In the task child, before it drops root: joins the leaf. Returns why it cannot ("" when done).
std::string join_task_fence(const LaunchRequest& request);
// Once the task has ended and every process of it is gone: the fence's counters into the record
// (CPU time, memory peak, whether the memory limit killed), then the leaf removed.
void end_task_fence(const LaunchRequest& request, ExitRecord& record);
// After a failed start: the leaf removed, nothing recorded.
void discard_task_fence(const LaunchRequest& request);

// --- the task child (shim_task.cpp) ----------------------------------------------------------

struct Started {
    pid_t pid = -1;     // > 0: the task runs; its process group id is the same
    std::string error;  // otherwise why it could not be started
};

Started start_task(LaunchRequest& request, const std::string& dir, OutputCopier& copier);

// --- signals and supervision (shim_supervise.cpp) --------------------------------------------

int setup_signals();
ExitRecord finish_task(pid_t pid, bool cancel_requested);
ExitRecord not_started(std::string error);
int supervise(pid_t pid, int signal_fd, const LaunchRequest& request, const std::string& dir,
              OutputCopier& copier);

// --- recording the end (shim_exit.cpp) -------------------------------------------------------

void reserve_exit_space(const std::string& dir);
int record_exit(const std::string& dir, const ExitRecord& record, int signal_fd);

}  // namespace carma::exec::shim
