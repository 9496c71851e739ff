// carma-shim: sbatch's --output/--error. The task's stdout and stderr go into pipes that the
// shim copies into the attempt's logs (CARMA's own copy, which `carma logs` and the end's
// classification read) and into the files the user named. Those are opened with the user's
// rights (fsuid, fsgid and groups, as the task would), never following a link at the end: a root
// shim that opened them as root could be sent by a link to overwrite any file.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/launch_internal.h"
#include "exec/shim.h"

namespace carma::exec::shim {

namespace {

constexpr std::size_t kChunk = 64 * 1024;

// Takes the user's file-system rights for as long as it lives (setfsuid is per thread, and the
// shim has one), and gives the shim's back.
class UserRights {
public:
    explicit UserRights(const LaunchRequest& r) : active_(r.switch_user) {
        if (!active_) {
            return;  // the shim already is the task's user
        }
        const int n = ::getgroups(0, nullptr);
        saved_groups_.resize(static_cast<std::size_t>(std::max(n, 0)));
        if (n < 0 || ::getgroups(n, saved_groups_.data()) < 0 ||
            ::setgroups(r.groups.size(), r.groups.data()) != 0) {
            error_ = fmt::format("cannot take the groups of uid {}: {}", r.uid, errno_text(errno));
            return;
        }
        saved_gid_ = static_cast<gid_t>(::setfsgid(r.gid));
        saved_uid_ = static_cast<uid_t>(::setfsuid(r.uid));
        // setfsuid says nothing of failure; an id it cannot take leaves the old one in place.
        if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != r.uid ||
            static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) != r.gid) {
            error_ = fmt::format("cannot take the file-system rights of uid {} gid {}", r.uid,
                                 r.gid);
        }
    }
    ~UserRights() {
        if (active_) {
            ::setfsuid(saved_uid_);
            ::setfsgid(saved_gid_);
            (void)::setgroups(saved_groups_.size(), saved_groups_.data());
        }
    }
    UserRights(const UserRights&) = delete;
    UserRights& operator=(const UserRights&) = delete;

    const std::string& error() const { return error_; }

private:
    bool active_;
    std::vector<gid_t> saved_groups_;
    uid_t saved_uid_ = 0;
    gid_t saved_gid_ = 0;
    std::string error_;
};

// A file of the user's for a copy: created, or truncated by the first attempt (appended to by
// later ones); a regular file, or a character device such as /dev/null.
int open_copy(const std::string& path, bool append, std::string& error) {
    const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC |
                      O_NONBLOCK | (append ? 0 : O_TRUNC);
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) {
        const int err = errno;
        error = err == ELOOP ? fmt::format("{} is a symbolic link, which CARMA does not follow; "
                                           "name the file itself",
                                           path)
                             : errno_text(err);
        return -1;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
        ::close(fd);
        error = fmt::format("{} is not a regular file", path);
        return -1;
    }
    // O_NONBLOCK was for opening (a FIFO would wait for a reader); the copy blocks like a log.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

void close_fd(int& fd) {
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
}

}  // namespace

OutputCopier::~OutputCopier() {
    for (Stream& s : streams_) {
        close_fd(s.pipe_read);
        close_fd(s.pipe_write);
        close_fd(s.log);
        if (s.copy != shared_copy_) {
            close_fd(s.copy);
        }
    }
    close_fd(shared_copy_);
}

std::string OutputCopier::open(const LaunchRequest& r, const std::string& dir) {
    const std::string* paths[2] = {&r.stdout_copy, &r.stderr_copy};
    const std::string_view logs[2] = {kStdoutFile, kStderrFile};
    const char* options[2] = {"--output", "--error"};
    for (int i = 0; i < 2; ++i) {
        if (paths[i]->empty()) {
            continue;
        }
        Stream& s = streams_[i];
        const std::string log = attempt_file(dir, logs[i]);
        // The attempt's log with the shim's rights: the attempt directory stays closed to the user.
        s.log = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s.log < 0) {
            return fmt::format("cannot open {}: {}", log, errno_text(errno));
        }
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
            return fmt::format("cannot create a pipe for the task's {}: {}", options[i],
                               errno_text(errno));
        }
        s.pipe_read = fds[0];
        s.pipe_write = fds[1];
        ::fcntl(s.pipe_read, F_SETFL, ::fcntl(s.pipe_read, F_GETFL) | O_NONBLOCK);
    }
    UserRights user(r);
    if (!user.error().empty()) {
        return user.error();
    }
    for (int i = 0; i < 2; ++i) {
        if (paths[i]->empty()) {
            continue;
        }
        if (i == 1 && *paths[1] == *paths[0]) {
            // One file for both, as sbatch with -o alone: one descriptor, so the lines of the two
            // streams interleave in the order they were copied.
            shared_copy_ = streams_[0].copy;
            streams_[1].copy = shared_copy_;
            continue;
        }
        std::string why;
        streams_[i].copy = open_copy(*paths[i], r.append_copies, why);
        if (streams_[i].copy < 0) {
            return fmt::format("cannot open {} {} as uid {}: {}", options[i], *paths[i], r.uid,
                               why);
        }
    }
    return {};
}

int OutputCopier::task_fd(int stream) const {
    return streams_[stream == 2 ? 1 : 0].pipe_write;
}

void OutputCopier::after_fork() {
    for (Stream& s : streams_) {
        close_fd(s.pipe_write);  // the task holds them now: EOF comes once it and its children end
    }
}

void OutputCopier::add_poll_fds(std::vector<pollfd>& fds) const {
    for (const Stream& s : streams_) {
        if (s.pipe_read >= 0) {
            fds.push_back({s.pipe_read, POLLIN, 0});
        }
    }
}

bool OutputCopier::copying() const {
    return streams_[0].pipe_read >= 0 || streams_[1].pipe_read >= 0;
}

void OutputCopier::pump() {
    char buf[kChunk];
    for (Stream& s : streams_) {
        while (s.pipe_read >= 0) {
            const ssize_t n = ::read(s.pipe_read, buf, sizeof buf);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && errno == EAGAIN) {
                break;  // nothing more for now
            }
            if (n <= 0) {
                close_fd(s.pipe_read);  // EOF: every writer is gone
                break;
            }
            const auto size = static_cast<std::size_t>(n);
            if (s.log >= 0 && !write_all(s.log, buf, size)) {
                shim_log("cannot write the task's output to its log: {}", errno_text(errno));
            }
            if (s.copy >= 0 && !write_all(s.copy, buf, size)) {
                // The user's file (a full disk, a quota): CARMA's copy goes on.
                shim_log("cannot write to the task's --output/--error file: {}; it gets no "
                         "more of the output",
                         errno_text(errno));
                int failed = s.copy;
                for (Stream& other : streams_) {
                    other.copy = other.copy == failed ? -1 : other.copy;
                }
                shared_copy_ = shared_copy_ == failed ? -1 : shared_copy_;
                close_fd(failed);
            }
        }
    }
}

void OutputCopier::drain(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    while (copying() && std::chrono::steady_clock::now() < deadline) {
        std::vector<pollfd> fds;
        add_poll_fds(fds);
        if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) {
            break;
        }
        pump();
    }
    if (copying()) {
        shim_log("the task's output pipes stayed open {} s after its end; copies cut there",
                 timeout_s);
    }
}

}  // namespace carma::exec::shim
