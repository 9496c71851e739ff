#pragma once
// Private to carma-shim (shim_*.cpp): the steps of supervising one attempt, which shim_main.cpp's
// run() takes in order. The design is in exec/launch.h, why the shim is single-threaded in
// shim_main.cpp.

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

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

// --- the task child (shim_task.cpp) ----------------------------------------------------------

struct Started {
    pid_t pid = -1;     // > 0: the task runs; its process group id is the same
    std::string error;  // otherwise why it could not be started
};

Started start_task(LaunchRequest& request, const std::string& dir);

// --- signals and supervision (shim_supervise.cpp) --------------------------------------------

int setup_signals();
ExitRecord finish_task(pid_t pid, bool cancel_requested);
ExitRecord not_started(std::string error);
int supervise(pid_t pid, int signal_fd, double grace_s, const std::string& dir);

// --- recording the end (shim_exit.cpp) -------------------------------------------------------

void reserve_exit_space(const std::string& dir);
int record_exit(const std::string& dir, const ExitRecord& record, int signal_fd);

}  // namespace carma::exec::shim
