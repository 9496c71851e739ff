#pragma once
// Launching one attempt of a task under a small per-attempt supervisor process (the "shim",
// binary carma-shim, in the spirit of slurmstepd and containerd-shim). The shim:
//   - is detached from the daemon (its own session, re-parented away from the daemon), so tasks
//     keep running when the daemon stops or is killed;
//   - starts the task in its own session and process group, as the given user (supplementary
//     groups, gid, uid switched before exec when running as root), in its working directory, with
//     exactly the given environment, stdout and stderr in files of the attempt directory;
//   - opens the request's task files read-write before switching user and leaves them open in
//     the task (not close-on-exec), each descriptor number announced in its environment variable:
//     a file the daemon keeps closed to others (mode 0600) reaches only the tasks it launches;
//   - with --output/--error, copies the task's stdout and stderr from pipes into those files of
//     the user's as well as into the attempt's logs (shim_output.cpp);
//   - on SIGTERM sends SIGTERM to the task's process group and SIGKILL after the grace period;
//   - with a fence (exec/cgroup.h), creates the attempt's cgroup before the task starts, puts
//     the task (never itself) into it, and at the end records what the task used and removes it;
//   - writes the attempt's end into `<attempt_dir>/exit.json` atomically (write + rename), so a
//     daemon that was away finds it on restart.
// Files of an attempt directory:
//   shim.pid, task.pid (= the task's process group id), stdout.log, stderr.log, exit.json
// The end is kept in memory until exit.json is written: written into room reserved before the
// task started (exit.json.reserve), else retried with backoff until the disk has room again, so
// a task that ends on a full disk is recorded, not lost (see record_exit in shim_exit.cpp).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "exec/cgroup.h"

namespace carma::exec {

// A file the task gets an open read-write descriptor of, whoever it runs as; `env` names the
// variable that carries the descriptor's number (replacing one of that name in `env` of the
// request). The path is opened without following a symlink and must be a regular file.
struct TaskFile {
    std::string path;
    std::string env;  // e.g. CARMA_EMULATOR_FD
};

struct LaunchRequest {
    std::vector<std::string> argv;  // argv[0] is looked up in the environment's PATH
    std::string workdir;
    std::vector<std::pair<std::string, std::string>> env;  // the task's whole environment
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups
    bool switch_user = false;   // only as root
    std::string attempt_dir;    // created by launch(); must not exist yet
    double kill_grace_s = 10;
    std::vector<TaskFile> files;  // opened by the shim for the task (see TaskFile)
    // A batch script's copy taken at submit (core/task.h): the shim writes it into the attempt
    // directory as kScriptFile and runs the task with argv[script_arg] naming it through an
    // open descriptor (/dev/fd/N), since the task's user cannot enter that directory. "": none.
    std::string script;
    std::size_t script_arg = 0;
    // sbatch's --output/--error: files in the user's directories that the shim also writes the
    // task's stdout and stderr to, beside stdout.log and stderr.log (shim_output.cpp). Absolute;
    // "" = none; the same path for both is one file. Opened with the task's user's rights,
    // never following a link at the end; one that cannot be opened fails the attempt.
    std::string stdout_copy;
    std::string stderr_copy;
    bool append_copies = false;  // false: truncated (the first attempt); true: appended to
    // The attempt's cgroup (exec/cgroup.h): created by the shim before the task starts (the
    // attempt does not start when it cannot be), joined by the task alone, read and removed by
    // the shim once the task has ended. None: the task runs in the shim's cgroup.
    std::optional<FenceSpec> fence{};
};

struct LaunchHandle {
    pid_t shim_pid = 0;
    std::string attempt_dir;
    std::string node;  // where it runs when CARMA schedules over several nodes; "" = here
};

// Starts the shim and returns once it has written shim.pid (and task.pid, or exit.json if the
// command could not be started). `shim_path` is the carma-shim executable.
Result<LaunchHandle> launch(const LaunchRequest& request, const std::string& shim_path);

struct ExitRecord {
    bool started = false;        // false: the command could not be executed (see error)
    std::optional<int> exit_code;
    std::optional<int> signal;
    bool cancel_requested = false;  // the shim received SIGTERM before the task ended
    double ended_at = 0;            // unix time
    std::string error;              // why it could not start ("No such file or directory")
    // What the task used. With a fence, from its cgroup: the CPU time of every process of the
    // task, and the peak of its memory charge (page cache included) as max_rss_bytes; without
    // one, from the leader's rusage, which counts only the descendants it waited for, and the
    // largest single process's RSS.
    std::optional<double> cpu_s{};
    std::optional<std::int64_t> max_rss_bytes{};
    bool memory_fence_hit = false;  // the kernel killed a process of the task at the memory limit
    std::optional<std::int64_t> memory_limit_bytes{};  // the fence's limit in force
    // Reading or removing the fence after the end failed (the end recorded stands).
    std::string fence_error{};
};

// The attempt's exit.json, if the shim wrote it.
std::optional<ExitRecord> read_exit(const std::string& attempt_dir);
// Whether the shim of this handle is still running (pid alive and really our shim).
bool shim_alive(const LaunchHandle& handle);
// Asks the shim to stop the task (SIGTERM now, SIGKILL after the grace period).
Result<void> request_stop(const LaunchHandle& handle);
// The task's process group id from task.pid, once known.
std::optional<pid_t> task_pgid(const std::string& attempt_dir);

// A restarted daemon's view of an attempt whose daemon died while starting it (recorded, but
// neither shim.pid nor exit.json in its directory): did the task start, or can it be started
// again without running twice? The request is withdrawn first (request.json renamed), so a shim
// that has not read it yet never will (it records "not started"); then a shim that did read it
// is waited for (at most `wait_s`) until it has started the task or given up.
struct InterruptedLaunch {
    bool started = false;  // false: nothing ran and nothing will; the task may be queued again
    pid_t shim_pid = 0;    // when started (0 if its shim.pid is still missing)
};
InterruptedLaunch settle_interrupted_launch(const std::string& attempt_dir, double wait_s = 10);

// --- The attempt directory's files, shared by launch() and carma-shim ------------------------
// carma-shim is started as `carma-shim --request <attempt_dir>/request.json`.

inline constexpr std::string_view kRequestFile = "request.json";
inline constexpr std::string_view kShimPidFile = "shim.pid";
inline constexpr std::string_view kTaskPidFile = "task.pid";
inline constexpr std::string_view kStdoutFile = "stdout.log";
// How long launch() waits for the shim to report the task started.
inline constexpr double kStartDeadlineS = 30;
inline constexpr std::string_view kStderrFile = "stderr.log";
inline constexpr std::string_view kExitFile = "exit.json";
// Room claimed for exit.json before the task starts, renamed to it at the end.
inline constexpr std::string_view kExitReserveFile = "exit.json.reserve";
inline constexpr std::string_view kShimLogFile = "shim.log";  // the shim's own stderr
inline constexpr std::string_view kScriptFile = "script";     // the batch script's copy

// How the shim's first process tells launch() how detaching went (`carma-shim --detach FD`):
// fixed-size records on the pipe at FD, one write() each, which a pipe keeps whole; launch()
// reads until both of the shim's processes have closed it.
struct ShimStartReport {
    char kind = 0;  // one of shim_report
    int value = 0;  // a pid or an errno
};
namespace shim_report {
inline constexpr char kPid = 'P';     // the shim's pid
inline constexpr char kFork = 'F';    // the fork that detaches it failed
inline constexpr char kSetsid = 'S';  // its setsid failed
}  // namespace shim_report
inline constexpr int kShimReportFd = 3;

// The last `max_bytes` of a file (all of it by default), "" when it cannot be read: the end of
// an attempt's stderr classifies its end (out of memory?), shim.pid its supervisor.
std::string read_tail(const std::string& path, std::size_t max_bytes = SIZE_MAX);

// Up to max_bytes of a log from `offset`, and the file's size, opened without following a link a
// task may have put in its place. A missing file is empty; a link or anything but a regular file
// is refused (Forbidden).
struct FileSlice {
    std::string data;
    std::uint64_t size = 0;
};
Result<FileSlice> read_slice(const std::string& path, std::uint64_t offset, std::size_t max_bytes);

// Fails (InvalidArgument) when a string is not valid UTF-8, which JSON cannot carry.
Result<std::string> request_to_json(const LaunchRequest& request);
Result<LaunchRequest> request_from_json(std::string_view text);
std::string exit_to_json(const ExitRecord& record);
Result<ExitRecord> exit_from_json(std::string_view text);
// Writes `path` so that readers see the old content or the whole new one, never a part: writes
// `<path>.tmp`, fsyncs it, renames it over `path` and fsyncs the directory.
Result<void> write_file_atomic(const std::string& path, std::string_view content);

}  // namespace carma::exec
