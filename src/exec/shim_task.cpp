// carma-shim: starting the task. The forked child takes its own session, its fence (the cgroup
// the shim made for it), the task's default signal dispositions, its stdout, stderr and task
// files, then its user, working directory and environment, and execs; why it failed reaches the
// shim through a close-on-exec pipe.

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/fd.h"
#include "exec/launch.h"
#include "exec/launch_internal.h"
#include "exec/shim.h"

namespace carma::exec::shim {

namespace {

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

// The batch script's copy (LaunchRequest::script), written into the attempt directory as the
// record of what ran and opened for the task without O_CLOEXEC: the interpreter reads it as
// /dev/fd/N, which works for a user who cannot enter the directory (the file itself is 0644).
// Sets argv[script_arg] to that path; the descriptor, or -1 with `why`.
int open_script(LaunchRequest& request, const std::string& dir, std::string& why) {
    const std::string path = attempt_file(dir, kScriptFile);
    if (auto written = write_file_atomic(path, request.script); !written) {
        why = fmt::format("cannot write the script's copy: {}", written.error().message);
        return -1;
    }
    if (::chmod(path.c_str(), 0644) != 0) {
        why = fmt::format("cannot make the script's copy {} readable: {}", path,
                          errno_text(errno));
        return -1;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW);
    if (fd < 0) {
        why = fmt::format("cannot open the script's copy {}: {}", path, errno_text(errno));
        return -1;
    }
    request.argv[request.script_arg] = fmt::format("/dev/fd/{}", fd);
    return fd;
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

// A copied stream (--output/--error) goes into the shim's pipe, the others into their logs.
void redirect_stream(int err_fd, int pipe_fd, const std::string& log, int target) {
    if (pipe_fd < 0) {
        redirect_output(err_fd, log, target);
    } else if (::dup2(pipe_fd, target) < 0) {
        child_fail(err_fd, fmt::format("cannot redirect descriptor {} to the shim's pipe: {}",
                                       target, errno_text(errno)));
    }
}

[[noreturn]] void run_task_child(int err_fd, const LaunchRequest& r, TaskExec& x,
                                 const OutputCopier& copier) {
    if (::setsid() < 0) {  // its own session and process group: pgid = its pid
        child_fail(err_fd, fmt::format("setsid: {}", errno_text(errno)));
    }
    // As root, before anything else the task does is charged: joining a cgroup needs the right
    // to write its cgroup.procs, which the task's user does not have.
    if (std::string why = join_task_fence(r); !why.empty()) {
        child_fail(err_fd, why);
    }
    reset_signals_for_task();
    redirect_stream(err_fd, copier.task_fd(1), x.stdout_path, 1);
    redirect_stream(err_fd, copier.task_fd(2), x.stderr_path, 2);
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

}  // namespace

Started start_task(LaunchRequest& request, const std::string& dir, OutputCopier& copier) {
    if (std::string why = copier.open(request, dir); !why.empty()) {
        return {-1, why};
    }
    Fd script;
    if (!request.script.empty()) {
        std::string why;
        script.reset(open_script(request, dir, why));
        if (script.get() < 0) {
            return {-1, why};
        }
    }
    TaskExec x = prepare_exec(request, dir);
    if (std::string why = create_task_fence(request); !why.empty()) {
        return {-1, why};
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        const int err = errno;
        discard_task_fence(request);
        return {-1, fmt::format("cannot create a pipe: {}", errno_text(err))};
    }
    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        discard_task_fence(request);
        return {-1, fmt::format("cannot fork the task: {}", errno_text(err))};
    }
    if (pid == 0) {
        ::close(fds[0]);
        run_task_child(fds[1], request, x, copier);
    }
    ::close(fds[1]);
    script.reset();  // the task holds its own
    copier.after_fork();
    std::string error = read_child_error(fds[0]);
    ::close(fds[0]);
    if (error.empty()) {
        return {pid, ""};
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    discard_task_fence(request);
    return {-1, error};
}

}  // namespace carma::exec::shim
