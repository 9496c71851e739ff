#include "exec/run_program.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/fd.h"

extern char** environ;

namespace carma::exec {

namespace {

tl::unexpected<Error> sys_fail(std::string_view what, const std::string& program, int err) {
    return fail(ErrorCode::Io, fmt::format("cannot run {}: {}: {}", program, what, errno_text(err)));
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

// A spawn that leaves the child nothing of this process's signal state, in a process group of
// its own, with `in`, `out` and `err` as its descriptors 0, 1 and 2.
struct Spawn {
    posix_spawn_file_actions_t actions{};
    posix_spawnattr_t attr{};

    Spawn(int in, int out, int err) {
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, in, 0);
        posix_spawn_file_actions_adddup2(&actions, out, 1);
        posix_spawn_file_actions_adddup2(&actions, err, 2);
        posix_spawnattr_init(&attr);
        sigset_t none;
        sigemptyset(&none);
        sigset_t all;
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setpgroup(&attr, 0);
        posix_spawnattr_setflags(&attr, static_cast<short>(POSIX_SPAWN_SETSIGMASK |
                                                           POSIX_SPAWN_SETSIGDEF |
                                                           POSIX_SPAWN_SETPGROUP));
    }
    ~Spawn() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
    }
    Spawn(const Spawn&) = delete;
    Spawn& operator=(const Spawn&) = delete;
};

}  // namespace

bool ProgramRun::succeeded() const {
    return started() && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string ProgramRun::how_it_ended(double timeout_s) const {
    if (!started()) {
        return fmt::format("did not start: {}", errno_text(start_error));
    }
    if (timed_out) {
        return fmt::format("did not finish within {} s and was killed", timeout_s);
    }
    if (WIFEXITED(status)) {
        return fmt::format("exited with status {}", WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        const char* name = sigdescr_np(WTERMSIG(status));
        return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                           name != nullptr ? name : "unknown");
    }
    return fmt::format("ended with wait status {}", status);
}

Result<ProgramRun> run_program(const std::vector<std::string>& argv,
                               const ProgramOptions& options) {
    if (argv.empty() || argv[0].empty()) {
        return fail(ErrorCode::InvalidArgument, "run_program: no program named");
    }
    const std::string& program = argv[0];
    Fd out(::memfd_create("carma-program-stdout", MFD_CLOEXEC));
    if (out.get() < 0) {
        return sys_fail("memfd_create", program, errno);
    }
    Fd err(options.stderr_to_stdout ? -1 : ::memfd_create("carma-program-stderr", MFD_CLOEXEC));
    if (!options.stderr_to_stdout && err.get() < 0) {
        return sys_fail("memfd_create", program, errno);
    }
    int pipe_fds[2] = {-1, -1};
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        return sys_fail("pipe", program, errno);
    }
    Fd in_read(pipe_fds[0]);
    {
        Fd in_write(pipe_fds[1]);
        // A few KiB fit the pipe's buffer, so this never blocks; a program that does not read
        // its input fails on its own and says so.
        if (!options.input.empty() &&
            ::write(in_write.get(), options.input.data(), options.input.size()) !=
                static_cast<ssize_t>(options.input.size())) {
            return sys_fail("writing its input", program, errno);
        }
    }  // closed: the program reads EOF after the input

    std::vector<std::string> argv_strings = argv;
    std::vector<char*> args = pointers(argv_strings);
    std::vector<std::string> env_strings = options.env.value_or(std::vector<std::string>{});
    std::vector<char*> envp = pointers(env_strings);
    char** env = options.env ? envp.data() : environ;

    ProgramRun run;
    pid_t pid = 0;
    {
        Spawn spawn(in_read.get(), out.get(), options.stderr_to_stdout ? out.get() : err.get());
        const bool search = program.find('/') == std::string::npos;
        const int rc = search ? ::posix_spawnp(&pid, program.c_str(), &spawn.actions, &spawn.attr,
                                               args.data(), env)
                              : ::posix_spawn(&pid, program.c_str(), &spawn.actions, &spawn.attr,
                                              args.data(), env);
        if (rc != 0) {
            run.start_error = rc;
            return run;
        }
    }

    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(options.timeout_s);
    for (auto pause = std::chrono::milliseconds(1);;
         pause = std::min(pause * 2, std::chrono::milliseconds(20))) {
        const pid_t got = ::waitpid(pid, &run.status, WNOHANG);
        if (got == pid) {
            break;
        }
        if (got < 0 && errno != EINTR) {
            // ECHILD: someone else reaped it; how it ended is unknown.
            return sys_fail("waiting for it", program, errno);
        }
        if (Clock::now() >= deadline) {
            ::kill(-pid, SIGKILL);
            while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
            }
            run.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(pause);
    }
    run.out = read_all(out.get());
    if (!options.stderr_to_stdout) {
        run.err = read_all(err.get());
    }
    return run;
}

std::string command_text(const std::vector<std::string>& argv) {
    std::string out;
    for (const std::string& a : argv) {
        out += out.empty() ? "" : " ";
        out += shell_quote(a);
    }
    return out;
}

}  // namespace carma::exec
