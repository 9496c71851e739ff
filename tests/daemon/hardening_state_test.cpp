// Hardening, round three (issue 44, item 8), against a real daemon:
// - a loopback `--web` with `--web-token-file` served the page to anyone who reached it: on a
//   shared server that is every local user. A token file given is now a token required;
// - a user's Unix groups (for "@group" shares) were looked up once and kept until the daemon
//   restarted: a user removed from a group kept its shares. They are looked up again once
//   `groups_refresh` old.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include <httplib.h>

#include "daemon_fixture.h"
#include "users.h"

namespace carma::daemon_test {
namespace {

using test_support::account_command;
using test_support::root_and_user;

int web_port() {
    return 45000 + static_cast<int>(::getpid() % 15000);
}

// This test verifies that a page served on loopback with --web-token-file requires that token:
// without it the page, its view and its assets answer 401; the token in the Authorization
// header, or the session cookie the sign-in link sets, open it.
TEST_F(DaemonTest, ALoopbackPageWithATokenFileRequiresTheToken) {
    const int web = web_port();
    const std::string web_token = "web-token-0123456789abcdef";
    std::ofstream(dir_ + "/web-token") << web_token << "\n";
    ::chmod((dir_ + "/web-token").c_str(), 0600);
    start("exclusive",
          {"--web", "127.0.0.1:" + std::to_string(web), "--web-token-file", dir_ + "/web-token"});
    EXPECT_NE(daemon_log().find(fmt::format("the web page on http://127.0.0.1:{}/ (sign in", web)),
              std::string::npos)
        << daemon_log();
    httplib::Client page("127.0.0.1", web);
    for (const char* path : {"/", "/v1/view", "/app.js"}) {
        auto anonymous = page.Get(path);
        ASSERT_TRUE(anonymous) << path;
        EXPECT_EQ(anonymous->status, 401) << path << ": " << anonymous->body;
    }
    auto wrong = page.Get("/v1/view", {{"Authorization", "Bearer not-the-web-token-at-all"}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    auto with_token = page.Get("/v1/view", {{"Authorization", "Bearer " + web_token}});
    ASSERT_TRUE(with_token);
    EXPECT_EQ(with_token->status, 200) << with_token->body;
    auto sign_in = page.Get("/?token=" + web_token);
    ASSERT_TRUE(sign_in);
    EXPECT_EQ(sign_in->status, 303);
    const std::string cookie = sign_in->get_header_value("Set-Cookie");
    auto with_session = page.Get("/v1/view", {{"Cookie", cookie.substr(0, cookie.find(';'))}});
    ASSERT_TRUE(with_session);
    EXPECT_EQ(with_session->status, 200) << with_session->body;
}

// This test verifies that a loopback page without a token file still serves every local user,
// as the socket does (what the admin's guide promises for an SSH tunnel).
TEST_F(DaemonTest, ALoopbackPageWithoutATokenFileIsOpenToLocalUsers) {
    const int web = web_port();
    start("exclusive", {"--web", "127.0.0.1:" + std::to_string(web)});
    httplib::Client page("127.0.0.1", web);
    auto view = page.Get("/v1/view");
    ASSERT_TRUE(view);
    EXPECT_EQ(view->status, 200) << view->body;
}

// `user`'s shares as GET /v1/share says; -1 when she is not listed.
double shares_of(api::ApiClient client, const std::string& user) {
    auto share = client.share();
    if (!share) {
        return -1;
    }
    for (const json& u : (*share)["users"]) {
        if (u["user"] == user) {
            return u["shares"].get<double>();
        }
    }
    return -1;
}

// This test verifies that a user removed from a Unix group loses the group's shares while the
// daemon runs, once the lookup is groups_refresh (1 s here) old: carol, the group's only member
// known to the daemon, holds its 5 shares; after `gpasswd -d`, she has the default 1.
TEST_F(DaemonTest, AUserRemovedFromAGroupLosesItsShares) {
    std::optional<passwd> carol;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-carol", carol, "to change group members"));
    const std::string group = "carma-test-phd";
    (void)account_command("getent group " + group + " >/dev/null || groupadd " + group);
    ASSERT_EQ(account_command("usermod -aG " + group + " carma-test-carol"), 0);
    start("carma", {"--config",
                    write_config(dir_, "shares: {\"@" + group + "\": 5}\ngroups_refresh: 1s\n")});
    // A running task of carol's makes her a user the daemon stands (a held one is not in the
    // queue the standings are taken from).
    const json body = {{"command", {"/bin/sleep", "20"}}, {"workdir", "/tmp"}};
    const int rc = test_support::as_user(*carol, [&] {
        auto submitted = client().submit(body);
        return submitted ? 0 : 1;
    });
    ASSERT_EQ(rc, 0);
    EXPECT_TRUE(eventually([&] { return shares_of(client(), "carma-test-carol") == 5; }))
        << shares_of(client(), "carma-test-carol");
    ASSERT_EQ(account_command("gpasswd -d carma-test-carol " + group + " >/dev/null"), 0);
    EXPECT_TRUE(eventually([&] { return shares_of(client(), "carma-test-carol") == 1; }))
        << "still " << shares_of(client(), "carma-test-carol") << " shares";
    (void)account_command("groupdel " + group + " >/dev/null 2>&1");
}

// This test verifies that a user with held tasks only, whom the scheduler does not stand (no
// usage, nothing running or queued), is listed by GET /v1/share with the shares of their group,
// not the default 1: their groups were looked up for the scheduler's users only.
TEST_F(DaemonTest, AHeldOnlyUserIsListedWithTheirGroupsShares) {
    std::optional<passwd> dana;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-dana", dana, "to change group members"));
    const std::string group = "carma-test-held";
    (void)account_command("getent group " + group + " >/dev/null || groupadd " + group);
    ASSERT_EQ(account_command("usermod -aG " + group + " carma-test-dana"), 0);
    start("carma", {"--config", write_config(dir_, "shares: {\"@" + group + "\": 5}\n")});
    const json body = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"hold", true}};
    const int rc = test_support::as_user(*dana, [&] {
        auto submitted = client().submit(body);
        return submitted ? 0 : 1;
    });
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(shares_of(client(), "carma-test-dana"), 5);
    (void)account_command("gpasswd -d carma-test-dana " + group + " >/dev/null 2>&1");
    (void)account_command("groupdel " + group + " >/dev/null 2>&1");
}

}  // namespace
}  // namespace carma::daemon_test
