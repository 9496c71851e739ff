// carma-shim: recording the attempt's end in exit.json. Room is reserved before the task starts;
// the end is written into it, else anew, and a task that ran has its end kept and written again
// until it is recorded (see record_exit).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/launch.h"
#include "exec/launch_internal.h"
#include "exec/shim.h"

namespace carma::exec::shim {

namespace {

// Room for exit.json claimed before the task starts: its end is written into these blocks, so a
// disk that filled up (or a quota reached) while the task ran does not keep it from being
// recorded at once. Larger than any record but one with a very long error text.
constexpr std::size_t kExitReserveBytes = 8192;
constexpr auto kFirstRetry = std::chrono::seconds(1);
constexpr auto kLastRetry = std::chrono::seconds(30);

// The record written into the reserved blocks, then renamed to exit.json: readers see no
// exit.json or the whole record, as with write_file_atomic().
Result<void> write_exit_into_reserve(const std::string& dir, const std::string& text) {
    const std::string reserve = attempt_file(dir, kExitReserveFile);
    const std::string path = attempt_file(dir, kExitFile);
    auto failed = [&](std::string_view what, int err) {
        return fail(ErrorCode::Io, fmt::format("cannot {} {}: {}", what, reserve, errno_text(err)));
    };
    int fd = ::open(reserve.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return failed("open", errno);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < text.size()) {
        ::close(fd);
        return fail(ErrorCode::Io, fmt::format("the record ({} bytes) does not fit in {}",
                                               text.size(), reserve));
    }
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done,
                             static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            ::close(fd);
            return failed("write", err);
        }
        done += static_cast<size_t>(n);
    }
    // Shrinking frees blocks and needs none.
    if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0 || ::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        return failed("truncate and fsync", err);
    }
    ::close(fd);
    if (::rename(reserve.c_str(), path.c_str()) != 0) {
        return failed("rename to exit.json", errno);
    }
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dir_fd >= 0 && ::fsync(dir_fd) == 0;
    const int err = errno;
    if (dir_fd >= 0) {
        ::close(dir_fd);
    }
    if (!synced) {
        return fail(ErrorCode::Io, fmt::format("cannot fsync directory {}: {}", dir,
                                               errno_text(err)));
    }
    return {};
}

std::string how_it_ended(const ExitRecord& record) {
    if (record.exit_code) {
        return fmt::format("exit code {}", *record.exit_code);
    }
    if (record.signal) {
        return fmt::format("killed by signal {}", *record.signal);
    }
    return record.error.empty() ? "no exit status" : record.error;
}

bool directory_exists(const std::string& dir) {
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Sleeps for `duration` while answering signals. The task has already ended, so a SIGTERM only
// means "still waiting to record it": acknowledged once in the log. Orphans are reaped.
void wait_answering_signals(std::chrono::milliseconds duration, int signal_fd, bool& stop_seen) {
    const auto until = std::chrono::steady_clock::now() + duration;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return;
        }
        pollfd fd{signal_fd, POLLIN, 0};
        if (::poll(&fd, 1, static_cast<int>(left.count()) + 1) < 0 && errno != EINTR) {
            std::this_thread::sleep_for(left);
            return;
        }
        if ((fd.revents & POLLIN) == 0) {
            continue;
        }
        signalfd_siginfo si{};
        while (::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
            if (si.ssi_signo == SIGTERM && !stop_seen) {
                stop_seen = true;
                shim_log("stop requested, but the task has already ended; still waiting to "
                         "record its end");
            }
        }
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
    }
}

}  // namespace

// Real bytes, not fallocate: overwriting written blocks needs no new ones on every file system
// that overwrites in place (ext4, xfs, tmpfs; not btrfs or zfs, where the retries below cover).
void reserve_exit_space(const std::string& dir) {
    const std::string path = attempt_file(dir, kExitReserveFile);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        shim_log("cannot create {}: {}; the end is recorded once there is room for exit.json",
                 path, errno_text(errno));
        return;
    }
    const std::string room(kExitReserveBytes, ' ');
    for (size_t done = 0; done < room.size();) {
        ssize_t n = ::write(fd, room.data() + done, room.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            shim_log("cannot reserve room for exit.json in {}: {}; the end is recorded once there "
                     "is room for it",
                     path, errno_text(errno));
            ::close(fd);
            ::unlink(path.c_str());
            return;
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
}

// Writes exit.json: into the reserved room first, else anew. A task that ran has its end kept in
// memory and written again (1 s, doubling to 30 s) until it is recorded, whatever the error:
// ENOSPC and EDQUOT pass when space returns, EIO, EROFS or EACCES when an administrator repairs
// or remounts the file system, and until then the daemon, whose store lives in the same state
// directory, could not record the end either; giving up would turn a finished task into a lost
// one. The only end that is given up is when the attempt directory is gone: nobody reads it.
// An attempt that did not start is tried once: the launcher is waiting for exactly this, sees
// the shim exit and queues the task again, and nothing ran that could be lost.
int record_exit(const std::string& dir, const ExitRecord& record, int signal_fd) {
    const std::string text = exit_to_json(record);
    const std::string path = attempt_file(dir, kExitFile);
    const std::string tmp = path + ".tmp";
    if (::access(attempt_file(dir, kExitReserveFile).c_str(), F_OK) == 0) {
        auto reserved = write_exit_into_reserve(dir, text);
        if (reserved) {
            return 0;
        }
        shim_log("{}; writing exit.json anew", reserved.error().message);
        // Frees the reserved blocks, which are the room the record needs.
        ::unlink(attempt_file(dir, kExitReserveFile).c_str());
    }
    const auto first_failure = std::chrono::steady_clock::now();
    auto wait = std::chrono::milliseconds(kFirstRetry);
    std::string first_error;
    std::string last_error;
    int failures = 0;
    bool stop_seen = false;
    for (;;) {
        ::unlink(tmp.c_str());  // a partial one from the last try would hold blocks
        auto ok = write_file_atomic(path, text);
        if (ok) {
            if (failures > 0) {
                shim_log("exit.json written after {} failed {} over {:.0f} s (first: {})",
                         failures, failures == 1 ? "try" : "tries",
                         std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                       first_failure)
                             .count(),
                         first_error);
            }
            return 0;
        }
        ::unlink(tmp.c_str());
        ++failures;
        if (!record.started) {
            shim_log("{}", ok.error().message);
            return 1;
        }
        if (!directory_exists(dir)) {
            shim_log("{}; the attempt directory is gone, so the end of the task ({}) cannot be "
                     "recorded",
                     ok.error().message, how_it_ended(record));
            return 1;
        }
        if (first_error.empty()) {
            first_error = ok.error().message;
        }
        if (ok.error().message != last_error) {  // once per distinct error, not every try
            last_error = ok.error().message;
            shim_log("{}; the end of the task ({}) is kept and written again every {} to {} s "
                     "until it is recorded",
                     last_error, how_it_ended(record), kFirstRetry.count(), kLastRetry.count());
        }
        wait_answering_signals(wait, signal_fd, stop_seen);
        wait = std::min<std::chrono::milliseconds>(wait * 2, kLastRetry);
    }
}

}  // namespace carma::exec::shim
