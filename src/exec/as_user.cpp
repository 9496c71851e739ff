#include "exec/as_user.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace carma::exec {

namespace {

constexpr int kCannotBecomeUser = 100;

// Only async-signal-safe calls: it runs in the child of a multi-threaded process.
bool enterable(const char* dir) {
    struct stat st {};
    return ::stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && ::access(dir, X_OK) == 0;
}

int look(const char* workdir, const std::vector<const char*>& candidates, const char* env_bin,
         const char* script) {
    int bits = 0;
    struct stat st {};
    if (enterable(workdir)) {
        bits |= 1;
    }
    if (script[0] == '\0' ||
        (::stat(script, &st) == 0 && S_ISREG(st.st_mode) && ::access(script, R_OK) == 0)) {
        bits |= 8;
    }
    if (env_bin[0] == '\0' || enterable(env_bin)) {
        bits |= 4;
    }
    for (const char* c : candidates) {
        if (::stat(c, &st) == 0 && S_ISREG(st.st_mode) && ::access(c, X_OK) == 0) {
            bits |= 2;
            break;
        }
    }
    return bits;
}

// Two bits per directory (DirAccess); async-signal-safe as look().
int look_dirs(const std::vector<const char*>& dirs) {
    int bits = 0;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        struct stat st {};
        int access = 0;
        if (::stat(dirs[i], &st) != 0) {
            access = errno == ENOENT || errno == ENOTDIR ? 1 : 3;
        } else if (!S_ISDIR(st.st_mode)) {
            access = 2;
        } else if (::access(dirs[i], W_OK | X_OK) != 0) {
            access = 3;
        }
        bits |= access << (2 * i);
    }
    return bits;
}

PathCheck from_bits(int bits) {
    return PathCheck{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0};
}

// `look()` (a small exit status, computed without allocating) as `who`: in this process when it
// already is `who`, else in a child that takes `who`'s groups, gid and uid first. `what` names
// the check in errors ("check output directories").
template <typename Look>
Result<int> status_as(const UserIdentity& who, std::string_view what, Look look) {
    if (::geteuid() == who.uid) {
        return look();
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        return fail(ErrorCode::Io, fmt::format("cannot {} as uid {}: fork failed: {}", what,
                                               who.uid, std::strerror(errno)));
    }
    if (pid == 0) {
        if (::setgroups(who.groups.size(), who.groups.data()) != 0 || ::setgid(who.gid) != 0 ||
            ::setuid(who.uid) != 0) {
            ::_exit(kCannotBecomeUser);
        }
        ::_exit(look());
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return fail(ErrorCode::Io, fmt::format("cannot {} as uid {}: waitpid: {}", what,
                                                   who.uid, std::strerror(errno)));
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) == kCannotBecomeUser) {
        return fail(ErrorCode::Io, fmt::format("cannot {} as uid {} (the check could not take "
                                               "that identity)",
                                               what, who.uid));
    }
    return WEXITSTATUS(status);
}

}  // namespace

std::vector<gid_t> supplementary_groups(const std::string& user, gid_t gid) {
    int n = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    if (getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) {
        groups.resize(static_cast<std::size_t>(n));
        getgrouplist(user.c_str(), gid, groups.data(), &n);
    }
    groups.resize(static_cast<std::size_t>(std::max(n, 0)));
    return groups;
}

Result<PathCheck> check_paths_as(const UserIdentity& who, const std::string& workdir,
                                 const std::vector<std::string>& command_candidates,
                                 const std::string& env_bin, const std::string& script) {
    // Everything the child touches is prepared here: no allocation after fork.
    std::vector<const char*> candidates;
    candidates.reserve(command_candidates.size());
    for (const std::string& c : command_candidates) {
        candidates.push_back(c.c_str());
    }
    auto bits = status_as(who, "check the working directory and command", [&] {
        return look(workdir.c_str(), candidates, env_bin.c_str(), script.c_str());
    });
    if (!bits) {
        return tl::unexpected(bits.error());
    }
    return from_bits(*bits);
}

Result<std::vector<DirAccess>> check_writable_dirs_as(const UserIdentity& who,
                                                      const std::vector<std::string>& dirs) {
    // 2 bits each: 3 directories stay below kCannotBecomeUser in the child's exit status.
    static_assert(kMaxDirChecks * 2 < 7);
    if (dirs.size() > kMaxDirChecks) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} directories to check; at most {}", dirs.size(), kMaxDirChecks));
    }
    std::vector<const char*> paths;
    for (const std::string& d : dirs) {
        paths.push_back(d.c_str());
    }
    auto bits = status_as(who, "check output directories", [&] { return look_dirs(paths); });
    if (!bits) {
        return tl::unexpected(bits.error());
    }
    std::vector<DirAccess> out;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        out.push_back(static_cast<DirAccess>((*bits >> (2 * i)) & 3));
    }
    return out;
}

}  // namespace carma::exec
