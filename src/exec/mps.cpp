#include "exec/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/text.h"

extern char** environ;

namespace carma::exec {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxQuotedOutput = 2000;  // of the control program's output, in errors

std::string errno_text(int err) {
    const char* text = strerrordesc_np(err);  // unlike strerror, safe with other threads
    return text != nullptr ? std::string(text) : fmt::format("unknown error {}", err);
}

tl::unexpected<Error> sys_fail(std::string_view what, int err) {
    return fail(ErrorCode::Io, fmt::format("{}: {}", what, errno_text(err)));
}

class Fd {
  public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

// --- finding the program ---------------------------------------------------------------------

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool executable(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
}

// A name with a slash is a path; anything else is looked up on PATH, as a shell would.
Result<std::string> resolve_program(const std::string& program) {
    const std::string hint = fmt::format(
        "install the NVIDIA driver's MPS utilities (Debian: nvidia-cuda-mps) or set {} to the "
        "program's path",
        kMpsControlOverrideEnv);
    if (program.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("MPS control program: no program named; {}", hint));
    }
    if (program.find('/') != std::string::npos) {
        if (executable(program)) {
            return program;
        }
        return fail(ErrorCode::NotFound,
                    fmt::format("MPS control program {} does not exist or is not executable; {}",
                                program, hint));
    }
    const std::string path = env_or("PATH", "/usr/local/bin:/usr/bin:/bin");
    std::string_view rest = path;
    while (true) {
        const std::size_t colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
        if (executable(candidate)) {
            return candidate;
        }
        if (colon == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(colon + 1);
    }
    return fail(
        ErrorCode::NotFound,
        fmt::format("MPS control program {} not found on PATH ({}); {}", program, path, hint));
}

// --- directories -------------------------------------------------------------------------------

Result<void> make_shared_dir(const std::string& dir, std::string_view what) {
    if (dir.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("MPS {} directory: none given; name a local directory (e.g. under "
                                "the daemon's state directory)",
                                what));
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot create MPS {} directory {}: {}", what, dir, ec.message()));
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        return sys_fail(fmt::format("cannot inspect MPS {} directory {}", what, dir), errno);
    }
    if (!S_ISDIR(st.st_mode)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("MPS {} directory {} exists and is not a directory", what, dir));
    }
    // Whatever the umask made of it: other users' MPS servers must reach it (see mps.h).
    if (st.st_uid == ::geteuid() && (st.st_mode & 07777) != 0755 &&
        ::chmod(dir.c_str(), 0755) != 0) {
        return sys_fail(fmt::format("cannot make MPS {} directory {} mode 0755", what, dir), errno);
    }
    return {};
}

// Empty stays empty (make_shared_dir refuses it with a hint).
std::string absolute(const std::string& dir) {
    std::error_code ec;
    const fs::path p = dir.empty() ? fs::path() : fs::absolute(dir, ec);
    if (ec || p.empty()) {
        return dir;
    }
    std::string out = p.lexically_normal().string();
    if (out.size() > 1 && out.back() == '/') {
        out.pop_back();
    }
    return out;
}

// The first directory on the way to `dir` that other users cannot search, if any.
std::optional<std::string> closed_ancestor(const std::string& dir) {
    fs::path walked;
    for (const fs::path& part : fs::path(dir)) {
        walked /= part;
        struct stat st {};
        if (::stat(walked.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
            (st.st_mode & S_IXOTH) == 0) {
            return walked.string();
        }
    }
    return std::nullopt;
}

// --- running the control program ---------------------------------------------------------------

// Ours, minus what would change which GPUs the MPS server sees or every client's limit.
std::vector<std::string> control_environment(const std::string& pipe_dir,
                                             const std::string& log_dir,
                                             const std::string& visible_device) {
    constexpr std::string_view kDropped[] = {kMpsPipeDirEnv, kMpsLogDirEnv, kMpsMemLimitEnv,
                                             "CUDA_VISIBLE_DEVICES"};
    std::vector<std::string> out;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view entry = *e;
        const std::string_view name = entry.substr(0, entry.find('='));
        if (std::find(std::begin(kDropped), std::end(kDropped), name) == std::end(kDropped)) {
            out.emplace_back(entry);
        }
    }
    out.push_back(fmt::format("{}={}", kMpsPipeDirEnv, pipe_dir));
    out.push_back(fmt::format("{}={}", kMpsLogDirEnv, log_dir));
    if (!visible_device.empty()) {
        out.push_back("CUDA_VISIBLE_DEVICES=" + visible_device);
    }
    return out;
}

struct RunOutcome {
    int status = 0;      // waitpid status
    std::string output;  // stdout and stderr together
};

std::string describe_status(int status) {
    if (WIFEXITED(status)) {
        return fmt::format("exited with status {}", WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return fmt::format(
            "was killed by signal {} ({})", WTERMSIG(status),
            sigdescr_np(WTERMSIG(status)) != nullptr ? sigdescr_np(WTERMSIG(status)) : "unknown");
    }
    return fmt::format("ended with wait status {}", status);
}

std::string quoted_output(std::string_view output) {
    output = trim(output);
    if (output.empty()) {
        return "(no output)";
    }
    if (output.size() > kMaxQuotedOutput) {
        output = output.substr(output.size() - kMaxQuotedOutput);
        return fmt::format("'...{}'", output);
    }
    return fmt::format("'{}'", output);
}

std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    off_t at = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        out.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
    return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (std::string& s : strings) {
        out.push_back(s.data());
    }
    out.push_back(nullptr);
    return out;
}

// Runs `path args...` with `input` on its stdin and waits up to `timeout_s` for it. Output goes
// to a memory file, not a pipe: `-d` forks a daemon that may keep the descriptor open, and a
// pipe would then never see EOF (or SIGPIPE the daemon once we close our end).
Result<RunOutcome> run_control(const std::string& path, const std::vector<std::string>& args,
                               std::string_view input, std::vector<std::string> env,
                               double timeout_s) {
    Fd out(::memfd_create("carma-mps-control-output", MFD_CLOEXEC));
    if (out.get() < 0) {
        return sys_fail("cannot create a memory file for the MPS control program's output", errno);
    }
    int pipe_fds[2] = {-1, -1};
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return sys_fail("cannot create a pipe for the MPS control program's input", errno);
    }
    Fd in_read(pipe_fds[0]);
    {
        Fd in_write(pipe_fds[1]);
        // A command line or two fits the pipe's buffer, so this never blocks.
        if (!input.empty() && ::write(in_write.get(), input.data(), input.size()) !=
                                  static_cast<ssize_t>(input.size())) {
            return sys_fail("cannot write the MPS control program's input", errno);
        }
    }  // closed: the program reads EOF after the input

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_read.get(), 0);
    posix_spawn_file_actions_adddup2(&actions, out.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, out.get(), 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // The daemon may block signals (for a signalfd) or ignore some; the control daemon this
    // forks must not inherit that. Its own process group lets a timeout kill all of it.
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr,
        static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP));
    std::vector<std::string> argv_strings = {path};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv = pointers(argv_strings);
    std::vector<char*> envp = pointers(env);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        return sys_fail(fmt::format("cannot run MPS control program {}", path), rc);
    }

    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    for (;;) {
        const pid_t got = ::waitpid(pid, &status, WNOHANG);
        if (got == pid) {
            break;
        }
        if (got < 0 && errno != EINTR) {
            // ECHILD: someone else reaped it; its outcome is unknown.
            return sys_fail(fmt::format("cannot learn how MPS control program {} ended", path),
                            errno);
        }
        if (Clock::now() >= deadline) {
            ::kill(-pid, SIGKILL);
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            return fail(ErrorCode::Io,
                        fmt::format("MPS control program {} did not finish within {} s and was "
                                    "killed; output {}; is the MPS control daemon hung?",
                                    path, timeout_s, quoted_output(read_all(out.get()))));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return RunOutcome{status, read_all(out.get())};
}

bool succeeded(int status) {
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

// --- MpsDaemon ---------------------------------------------------------------------------------

Result<MpsDaemon> MpsDaemon::start(const MpsOptions& options) {
    auto path =
        resolve_program(env_or(std::string(kMpsControlOverrideEnv).c_str(), options.control));
    if (!path) {
        return tl::unexpected(path.error());
    }
    if (!(options.timeout_s > 0)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("MPS control timeout {} s: must be positive", options.timeout_s));
    }
    MpsDaemon d;
    d.control_path_ = *path;
    // Absolute: tasks and MPS servers resolve CUDA_MPS_PIPE_DIRECTORY from their own directory.
    d.pipe_dir_ = absolute(options.pipe_dir);
    d.log_dir_ = absolute(options.log_dir);
    d.visible_device_ = options.visible_device;
    d.timeout_s_ = options.timeout_s;
    if (auto ok = make_shared_dir(d.pipe_dir_, "pipe"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = make_shared_dir(d.log_dir_, "log"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto closed = closed_ancestor(d.pipe_dir_)) {
        d.warning_ = fmt::format(
            "MPS pipe directory {}: {} is not searchable by other users, so only tasks of the "
            "daemon's user can use MPS; choose a pipe directory whose parents are mode 0755 "
            "(e.g. under /run)",
            d.pipe_dir_, *closed);
    }
    // A control daemon already serving this pipe directory (CARMA was killed and restarted, and
    // its tasks may still be MPS clients) is adopted, not started twice: `-d` would fail, and
    // quitting it would take the running tasks' servers down.
    auto probe = run_control(d.control_path_, {}, "get_server_list\n",
                             control_environment(d.pipe_dir_, d.log_dir_, d.visible_device_), d.timeout_s_);
    if (probe && succeeded(probe->status)) {
        d.adopted_ = true;
        return d;
    }
    auto run = run_control(d.control_path_, {"-d"}, {},
                           control_environment(d.pipe_dir_, d.log_dir_, d.visible_device_), d.timeout_s_);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!succeeded(run->status)) {
        return fail(ErrorCode::Io,
                    fmt::format("MPS control daemon did not start: `{} -d` {}, saying {}; is the "
                                "NVIDIA driver installed? is another MPS control daemon running "
                                "with pipe directory {}? (its log: {}/control.log)",
                                d.control_path_, describe_status(run->status),
                                quoted_output(run->output), d.pipe_dir_, d.log_dir_));
    }
    return d;
}

Result<void> MpsDaemon::stop() {
    auto run = run_control(control_path_, {}, "quit\n", control_environment(pipe_dir_, log_dir_, visible_device_),
                           timeout_s_);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!succeeded(run->status)) {
        return fail(ErrorCode::Io,
                    fmt::format("MPS control daemon did not take 'quit': `echo quit | {}` {}, "
                                "saying {}; is it still running with pipe directory {}?",
                                control_path_, describe_status(run->status),
                                quoted_output(run->output), pipe_dir_));
    }
    return {};
}

// --- the task's environment ---------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> mps_task_environment(
    const std::string& pipe_dir, std::span<const MpsMemLimit> limits) {
    std::vector<std::pair<std::string, std::string>> env;
    env.emplace_back(kMpsPipeDirEnv, pipe_dir);
    std::string limit = format_pinned_mem_limit(limits);
    if (!limit.empty()) {
        env.emplace_back(kMpsMemLimitEnv, std::move(limit));
    }
    return env;
}

std::vector<MpsMemLimit> ordinal_limits(std::span<const MiB> per_ordinal) {
    std::vector<MpsMemLimit> out;
    for (std::size_t i = 0; i < per_ordinal.size(); ++i) {
        if (per_ordinal[i] > 0) {
            out.push_back(MpsMemLimit{std::to_string(i), per_ordinal[i]});
        }
    }
    return out;
}

Result<std::string> prepare_no_mps_directory(const std::string& dir) {
    const std::string path = absolute(dir);
    if (auto ok = make_shared_dir(path, "no-MPS pipe"); !ok) {
        return tl::unexpected(ok.error());
    }
    return path;
}

}  // namespace carma::exec
