// The API server's building blocks for identity and secrets: peer credentials and the token
// file (the token comparison is core/secret.h's, tests/core/secret_test.cpp).

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/server.h"

namespace carma::api {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/carma-server-test-XXXXXX";
        path_ = ::mkdtemp(tmpl) ? tmpl : "";
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// This test verifies that a token file is accepted only when closed to group and others and
// owned by the daemon's user, with messages that name the file and the fix.
TEST(ServerTest, TokenFileMustBePrivate) {
    TempDir dir;
    const std::string path = dir.path() + "/token";
    std::ofstream(path) << "0123456789abcdef0123456789abcdef\nignored\n";
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
    auto open_to_all = read_token_file(path);
    ASSERT_FALSE(open_to_all);
    EXPECT_THAT(open_to_all.error().message, HasSubstr(path));
    EXPECT_THAT(open_to_all.error().message, HasSubstr("chmod 600"));
    ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
    EXPECT_FALSE(read_token_file(path));

    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    auto ok = read_token_file(path);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(*ok, "0123456789abcdef0123456789abcdef");

    const std::string short_path = dir.path() + "/short";
    std::ofstream(short_path) << "tiny\n";
    ASSERT_EQ(::chmod(short_path.c_str(), 0600), 0);
    auto too_short = read_token_file(short_path);
    ASSERT_FALSE(too_short);
    EXPECT_THAT(too_short.error().message, HasSubstr("at least 16"));

    auto missing = read_token_file(dir.path() + "/none");
    ASSERT_FALSE(missing);
    EXPECT_THAT(missing.error().message, HasSubstr(dir.path() + "/none"));

    if (::geteuid() == 0) {
        passwd* nobody = ::getpwnam("nobody");
        ASSERT_NE(nobody, nullptr);
        ASSERT_EQ(::chown(path.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
        auto foreign = read_token_file(path);
        ASSERT_FALSE(foreign);
        EXPECT_THAT(foreign.error().message, HasSubstr(path));
        EXPECT_THAT(foreign.error().message, HasSubstr("belongs to nobody"));
        EXPECT_THAT(foreign.error().message, HasSubstr("chmod 600"));
    }
}

// This test verifies that peer credentials are those of the process that connected, even after
// it has exited: they are not looked up by pid.
TEST(ServerTest, PeerCredentialsAreThoseOfTheConnector) {
    TempDir dir;
    ::chmod(dir.path().c_str(), 0755);
    const std::string path = dir.path() + "/s.sock";
    const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::chmod(path.c_str(), 0666);
    ASSERT_EQ(::listen(listener, 4), 0);

    // As root the connector becomes nobody, so its uid differs from everyone else's here.
    uid_t want_uid = ::geteuid();
    gid_t want_gid = ::getegid();
    passwd* nobody = ::geteuid() == 0 ? ::getpwnam("nobody") : nullptr;
    if (nobody) {
        want_uid = nobody->pw_uid;
        want_gid = nobody->pw_gid;
    }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (nobody && (::setgid(nobody->pw_gid) != 0 || ::setuid(nobody->pw_uid) != 0)) {
            ::_exit(2);
        }
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        ::_exit(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // The connector is gone (and reaped) before the connection is even accepted.
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(conn, 0);
    auto peer = peer_credentials(conn);
    ASSERT_TRUE(peer) << peer.error().message;
    EXPECT_EQ(peer->uid, want_uid);
    EXPECT_EQ(peer->gid, want_gid);
    EXPECT_EQ(peer->pid, child);
    const Caller c = caller_from_credentials(*peer);
    EXPECT_EQ(c.uid, want_uid);
    if (nobody) {
        EXPECT_EQ(c.user, "nobody");
    }
    ::close(conn);
    ::close(listener);
}

}  // namespace
}  // namespace carma::api
