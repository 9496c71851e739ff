// Who a caller is (api/server.h): a Unix-socket peer by its credentials, a TCP client by the
// user it acts as, and the token a TCP client or the web page must present, read from a file
// only the daemon's user may read.

#include "api/server.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace carma::api {

namespace {

std::string user_name(uid_t uid) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

}  // namespace

Caller caller_from_credentials(const PeerCredentials& peer) {
    Caller c;
    c.uid = peer.uid;
    c.gid = peer.gid;
    c.pid = peer.pid;
    c.user = user_name(peer.uid);
    return c;
}

Result<Caller> caller_for_user(const std::string& name) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || !found) {
        return fail(ErrorCode::NotFound, fmt::format("there is no user named '{}'", name));
    }
    Caller c;
    c.uid = found->pw_uid;
    c.gid = found->pw_gid;
    c.user = found->pw_name;
    return c;
}

Result<std::string> read_token_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return fail(ErrorCode::Io, fmt::format("cannot open token file {}: {}", path,
                                               std::strerror(errno)));
    }
    // Checked on the open file, so the file read is the file checked.
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    std::string text;
    if (stat_ok && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0) {
        char buf[4096];
        ssize_t n = 0;
        while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1 << 16)) {
            text.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("token file {} is not a regular file", path));
    }
    if (st.st_uid != ::geteuid()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("token file {} belongs to {}, not to {} who runs the daemon; "
                                "`chown {} {}` and `chmod 600 {}`",
                                path, user_name(st.st_uid), user_name(::geteuid()),
                                user_name(::geteuid()), path, path));
    }
    if ((st.st_mode & 077) != 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("token file {} may be read by other users (mode {:04o}); "
                                "`chmod 600 {}`",
                                path, st.st_mode & 07777, path));
    }
    std::string token = text.substr(0, text.find('\n'));
    if (!token.empty() && token.back() == '\r') {
        token.pop_back();
    }
    if (token.size() < 16) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("token file {} must hold a token of at least 16 characters on "
                                "its first line",
                                path));
    }
    return token;
}

}  // namespace carma::api
