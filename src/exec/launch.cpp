#include "exec/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_number.h"
#include "core/text.h"
#include "exec/fd.h"

extern char** environ;

namespace carma::exec {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How long launch() waits for the shim to report that the task started. Generous: on a loaded
// machine exec of the shim and then of the task (perhaps from a network file system) can take
// seconds, and giving up early would leave a task running that nobody tracks.
constexpr auto kStartDeadline = std::chrono::seconds(static_cast<int>(kStartDeadlineS));
constexpr auto kPollInterval = std::chrono::milliseconds(5);

tl::unexpected<Error> sys_fail(std::string_view what, int err) {
    return fail(ErrorCode::Io, fmt::format("{}: {}", what, errno_text(err)));
}

std::string attempt_file(const std::string& dir, std::string_view name) {
    return dir + "/" + std::string(name);
}

// --- small file helpers ----------------------------------------------------------------------

std::optional<std::string> read_small_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

std::optional<pid_t> parse_pid(std::string_view text) {
    long value = 0;
    size_t i = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
        value = value * 10 + (text[i] - '0');
        if (value > INT_MAX) {
            return std::nullopt;
        }
    }
    // A pid file is "<digits>\n"; anything else is a torn or foreign file, not a pid.
    if (i == 0 || value <= 1 || text.substr(i).find_first_not_of("\n") != std::string_view::npos) {
        return std::nullopt;
    }
    return static_cast<pid_t>(value);
}

std::optional<pid_t> read_pid_file(const std::string& path) {
    auto text = read_small_file(path);
    return text ? parse_pid(*text) : std::nullopt;
}

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

// --- process inspection ----------------------------------------------------------------------

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

// --- JSON ------------------------------------------------------------------------------------

Result<json> parse_json(std::string_view text, std::string_view what) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        return fail(ErrorCode::InvalidArgument, fmt::format("{} is not JSON: {}", what, e.what()));
    }
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

}  // namespace

// --- public ----------------------------------------------------------------------------------

Result<std::string> request_to_json(const LaunchRequest& r) {
    json j = {{"argv", r.argv},
              {"workdir", r.workdir},
              {"env", r.env},
              {"uid", r.uid},
              {"gid", r.gid},
              {"groups", r.groups},
              {"switch_user", r.switch_user},
              {"attempt_dir", r.attempt_dir},
              {"kill_grace_s", r.kill_grace_s}};
    json files = json::array();
    for (const TaskFile& f : r.files) {
        files.push_back({{"path", f.path}, {"env", f.env}});
    }
    j["files"] = std::move(files);
    try {
        return j.dump(2) + "\n";
    } catch (const json::exception& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the command, environment and directories must be valid UTF-8: {}",
                                e.what()));
    }
}

namespace {

// A number of a request or exit record as a T (core/json_number.h): nlohmann's get<T>() of 1e300
// or -1 would be undefined or wrap.
template <typename T>
T number_at(const json& j, const char* key, T lo = std::numeric_limits<T>::lowest(),
            T hi = std::numeric_limits<T>::max()) {
    const json& v = j.at(key);
    const std::optional<T> n = json_number<T>(v);
    if (!n || *n < lo || *n > hi) {
        throw std::invalid_argument(fmt::format("{} must be a number from {} to {}", key, lo, hi));
    }
    return *n;
}

// A user or group id: (uid_t)-1 is none, what setuid() and chown() take as "unchanged".
template <typename T>
T id_of(const json& v, const char* what) {
    const std::optional<T> n = json_number<T>(v);
    if (!n || *n == static_cast<T>(-1)) {
        throw std::invalid_argument(fmt::format("{} must be an id from 0 to {}", what,
                                                static_cast<T>(-2)));
    }
    return *n;
}

}  // namespace

Result<LaunchRequest> request_from_json(std::string_view text) {
    auto j = parse_json(text, "the launch request");
    if (!j) {
        return tl::unexpected(j.error());
    }
    try {
        LaunchRequest r;
        j->at("argv").get_to(r.argv);
        j->at("workdir").get_to(r.workdir);
        j->at("env").get_to(r.env);
        r.uid = id_of<uid_t>(j->at("uid"), "uid");
        r.gid = id_of<gid_t>(j->at("gid"), "gid");
        const json& groups = j->at("groups");
        if (!groups.is_array()) {
            throw std::invalid_argument("groups must be an array of group ids");
        }
        for (const json& g : groups) {
            r.groups.push_back(id_of<gid_t>(g, "each of groups"));
        }
        j->at("switch_user").get_to(r.switch_user);
        j->at("attempt_dir").get_to(r.attempt_dir);
        r.kill_grace_s = number_at<double>(*j, "kill_grace_s", 0.0);
        // Optional: a request written before task files existed has none.
        if (j->contains("files")) {
            for (const json& f : j->at("files")) {
                r.files.push_back(TaskFile{f.at("path").get<std::string>(),
                                           f.at("env").get<std::string>()});
            }
        }
        return r;
    } catch (const std::exception& e) {  // json::exception and the range checks above
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the launch request is malformed: {}", e.what()));
    }
}

std::string exit_to_json(const ExitRecord& record) {
    json j = {{"started", record.started},
              {"cancel_requested", record.cancel_requested},
              {"ended_at", record.ended_at}};
    if (record.exit_code) {
        j["exit_code"] = *record.exit_code;
    }
    if (record.signal) {
        j["signal"] = *record.signal;
    }
    if (!record.error.empty()) {
        j["error"] = record.error;
    }
    // An error text may quote a path in another encoding: replace rather than lose the record.
    return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<ExitRecord> exit_from_json(std::string_view text) {
    auto j = parse_json(text, "exit.json");
    if (!j) {
        return tl::unexpected(j.error());
    }
    try {
        ExitRecord r;
        j->at("started").get_to(r.started);
        r.cancel_requested = j->value("cancel_requested", false);
        if (j->contains("ended_at")) {
            r.ended_at = number_at<double>(*j, "ended_at");
        }
        if (j->contains("exit_code")) {
            r.exit_code = number_at<int>(*j, "exit_code");
        }
        if (j->contains("signal")) {
            r.signal = number_at<int>(*j, "signal");
        }
        r.error = j->value("error", "");
        return r;
    } catch (const std::exception& e) {  // json::exception and the range checks above
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("exit.json is malformed: {}", e.what()));
    }
}

Result<void> write_file_atomic(const std::string& path, std::string_view content) {
    std::string tmp = path + ".tmp";
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
        return sys_fail(fmt::format("cannot create {}", tmp), errno);
    }
    for (size_t done = 0; done < content.size();) {
        ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return sys_fail(fmt::format("cannot write {}", tmp), errno);
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
        return sys_fail(fmt::format("cannot fsync {}", tmp), errno);
    }
    fd.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        return sys_fail(fmt::format("cannot rename {} to {}", tmp, path), errno);
    }
    // The rename itself survives a crash only once the directory is on disk.
    std::string dir = fs::path(path).parent_path().string();
    Fd dir_fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0) {
        return sys_fail(fmt::format("cannot fsync directory {}", dir), errno);
    }
    return {};
}

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

std::optional<ExitRecord> read_exit(const std::string& attempt_dir) {
    auto text = read_small_file(attempt_file(attempt_dir, kExitFile));
    if (!text) {
        return std::nullopt;
    }
    // Written with rename, so a present file is complete; a malformed one counts as missing.
    auto record = exit_from_json(*text);
    return record ? std::optional<ExitRecord>(*record) : std::nullopt;
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

std::optional<pid_t> task_pgid(const std::string& attempt_dir) {
    return read_pid_file(attempt_file(attempt_dir, kTaskPidFile));
}

namespace {

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

std::string read_tail(const std::string& path, std::size_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return {};
    }
    in.seekg(0, std::ios::end);
    const auto size = static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg()));
    const std::size_t start = size > max_bytes ? size - max_bytes : 0;
    in.seekg(static_cast<std::streamoff>(start));
    std::string out(size - start, '\0');
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    return out;
}

Result<FileSlice> read_slice(const std::string& path, std::uint64_t offset,
                             std::size_t max_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) {
            return FileSlice{};
        }
        if (errno == ELOOP) {
            return fail(ErrorCode::Forbidden,
                        fmt::format("{} is a symbolic link; CARMA does not follow it", path));
        }
        return fail(ErrorCode::Io, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    }
    FileSlice out;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(ErrorCode::Forbidden, fmt::format("{} is not a regular file", path));
    }
    out.size = static_cast<std::uint64_t>(st.st_size);
    if (offset < out.size) {
        out.data.resize(
            static_cast<std::size_t>(std::min<std::uint64_t>(out.size - offset, max_bytes)));
        const ssize_t n =
            ::pread(fd, out.data.data(), out.data.size(), static_cast<off_t>(offset));
        out.data.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    }
    ::close(fd);
    return out;
}

}  // namespace carma::exec
