// Hardening, round three (issue 44, item 8), against a real daemon:
// - a loopback `--web` with `--web-token-file` served the page to anyone who reached it: on a
//   shared server that is every local user. A token file given is now a token required.

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <httplib.h>

#include "daemon_fixture.h"

namespace carma::daemon_test {
namespace {

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

}  // namespace
}  // namespace carma::daemon_test
