#pragma once
// Users a test makes to check what other users may do: root is needed, and useradd makes each
// user once (no home, /bin/sh); later tests find it.

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace carma::test_support {

// Runs an account command (useradd, usermod, gpasswd, groupadd) and its exit code, tried again
// for a while when it fails: tests run in parallel, and these tools refuse to work while another
// holds the lock on /etc/passwd or /etc/group.
inline int account_command(const std::string& command) {
    int rc = 0;
    for (int attempt = 0; attempt < 25; ++attempt) {
        const int status = std::system(command.c_str());
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (rc == 0) {
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return rc;
}

// The user `name`, made when it does not exist yet; nothing when useradd cannot make it. Its
// strings are the test program's own copies: getpwnam's point into a buffer the next lookup
// overwrites, which gave a test's two users one name.
inline std::optional<passwd> ensure_user(const std::string& name) {
    if (::getpwnam(name.c_str()) == nullptr) {
        const std::string cmd =
            "useradd --no-create-home --shell /bin/sh " + name + " >/dev/null 2>&1";
        if (account_command(cmd) != 0 && ::getpwnam(name.c_str()) == nullptr) {
            return std::nullopt;
        }
    }
    const passwd* pw = ::getpwnam(name.c_str());
    if (pw == nullptr) {
        return std::nullopt;
    }
    static std::map<std::string, std::array<std::string, 5>> kept;  // nodes never move
    std::array<std::string, 5>& s = kept[name];
    s = {pw->pw_name, pw->pw_passwd, pw->pw_gecos, pw->pw_dir, pw->pw_shell};
    passwd copy = *pw;
    copy.pw_name = s[0].data();
    copy.pw_passwd = s[1].data();
    copy.pw_gecos = s[2].data();
    copy.pw_dir = s[3].data();
    copy.pw_shell = s[4].data();
    return copy;
}

// For a test that needs root and the user `name` (`why` ends "needs root ..."): fails the test,
// fatally, naming what is missing. Call it under ASSERT_NO_FATAL_FAILURE.
inline void root_and_user(const std::string& name, std::optional<passwd>& user, const char* why) {
    ASSERT_EQ(::geteuid(), 0u) << "needs root " << why;
    user = ensure_user(name);
    ASSERT_TRUE(user) << "useradd could not create " << name;
}

// Runs `body` in a child process as `pw`; the child's exit code (90: it could not become `pw`).
// Fork before a test starts threads of its own.
inline int as_user(const passwd& pw, const std::function<int()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::initgroups(pw.pw_name, pw.pw_gid) != 0 || ::setgid(pw.pw_gid) != 0 ||
            ::setuid(pw.pw_uid) != 0) {
            ::_exit(90);
        }
        ::_exit(body());
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

}  // namespace carma::test_support
