// The files of an attempt directory as launch() and the daemon read them: pid files, exit.json,
// the tail and slices of logs, and the atomic write that request.json and exit.json go through.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "exec/fd.h"
#include "exec/launch.h"
#include "exec/launch_internal.h"

namespace carma::exec {

namespace fs = std::filesystem;

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

std::optional<ExitRecord> read_exit(const std::string& attempt_dir) {
    auto text = read_small_file(attempt_file(attempt_dir, kExitFile));
    if (!text) {
        return std::nullopt;
    }
    // Written with rename, so a present file is complete; a malformed one counts as missing.
    auto record = exit_from_json(*text);
    return record ? std::optional<ExitRecord>(*record) : std::nullopt;
}

std::optional<pid_t> task_pgid(const std::string& attempt_dir) {
    return read_pid_file(attempt_file(attempt_dir, kTaskPidFile));
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
