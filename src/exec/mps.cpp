#include "exec/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/run_program.h"
#include "exec/sys_fail.h"

extern char** environ;

namespace carma::exec {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxQuotedOutput = 2000;  // of the control program's output, in errors

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

// Runs `path args...` with `input` on its stdin, its stdout and stderr together, for at most
// `timeout_s`.
Result<ProgramRun> run_control(const std::string& path, const std::vector<std::string>& args,
                               std::string input, std::vector<std::string> env,
                               double timeout_s) {
    std::vector<std::string> argv = {path};
    argv.insert(argv.end(), args.begin(), args.end());
    ProgramOptions o;
    o.input = std::move(input);
    o.timeout_s = timeout_s;
    o.env = std::move(env);
    o.stderr_to_stdout = true;
    auto run = run_program(argv, o);
    if (!run) {
        return run;
    }
    if (!run->started()) {
        return sys_fail(fmt::format("cannot run MPS control program {}", path), run->start_error);
    }
    if (run->timed_out) {
        return fail(ErrorCode::Io,
                    fmt::format("MPS control program {} did not finish within {} s and was "
                                "killed; output {}; is the MPS control daemon hung?",
                                path, timeout_s, quoted_output(run->out)));
    }
    return run;
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
    if (probe && probe->succeeded()) {
        d.adopted_ = true;
        return d;
    }
    auto run = run_control(d.control_path_, {"-d"}, {},
                           control_environment(d.pipe_dir_, d.log_dir_, d.visible_device_), d.timeout_s_);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!run->succeeded()) {
        return fail(ErrorCode::Io,
                    fmt::format("MPS control daemon did not start: `{} -d` {}, saying {}; is the "
                                "NVIDIA driver installed? is another MPS control daemon running "
                                "with pipe directory {}? (its log: {}/control.log)",
                                d.control_path_, run->how_it_ended(d.timeout_s_),
                                quoted_output(run->out), d.pipe_dir_, d.log_dir_));
    }
    return d;
}

Result<void> MpsDaemon::stop() {
    auto run = run_control(control_path_, {}, "quit\n", control_environment(pipe_dir_, log_dir_, visible_device_),
                           timeout_s_);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!run->succeeded()) {
        return fail(ErrorCode::Io,
                    fmt::format("MPS control daemon did not take 'quit': `echo quit | {}` {}, "
                                "saying {}; is it still running with pipe directory {}?",
                                control_path_, run->how_it_ended(timeout_s_),
                                quoted_output(run->out), pipe_dir_));
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
