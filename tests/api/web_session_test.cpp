// The web page's session cookie: made from the web token, never the token itself (issue 18).

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/web_session.h"

namespace carma::api {
namespace {

constexpr std::string_view kToken = "web-token-0123456789abcdef";

// This test verifies that a session made from the token is accepted until it expires, carries
// no trace of the token, and fails for another token, a changed expiry or a changed MAC.
TEST(WebSessionTest, SessionStandsForTheTokenUntilItExpires) {
    const std::string s = make_session(kToken, 1000, 100);
    EXPECT_EQ(s.find(kToken), std::string::npos);
    EXPECT_EQ(check_session(s, kToken, 1000), 1100);
    EXPECT_EQ(check_session(s, kToken, 1099), 1100);
    EXPECT_EQ(check_session(s, kToken, 1100), std::nullopt) << "expired";
    EXPECT_EQ(check_session(s, "another-token-0123456789", 1000), std::nullopt);
    std::string later = s;
    later.replace(3, 4, "9999");  // a longer life, same MAC
    EXPECT_EQ(check_session(later, kToken, 1000), std::nullopt);
    std::string tampered = s;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    EXPECT_EQ(check_session(tampered, kToken, 1000), std::nullopt);
    const std::string token(kToken);  // the raw token is no session either
    for (const std::string& junk : std::vector<std::string>{"", "v1.", "v1.x.y", "v2.1100.00", token}) {
        EXPECT_EQ(check_session(junk, kToken, 1000), std::nullopt) << junk;
    }
}

// This test verifies the cookie's attributes: HttpOnly, SameSite=Strict, a lifetime, and Secure
// only over TLS.
TEST(WebSessionTest, CookieAttributes) {
    const std::string plain = session_cookie_header("v1.1.ab", 60, false);
    EXPECT_EQ(plain, "carma_session=v1.1.ab; Path=/; Max-Age=60; HttpOnly; SameSite=Strict");
    const std::string tls = session_cookie_header("v1.1.ab", 60, true);
    EXPECT_NE(tls.find("; Secure"), std::string::npos);
}

}  // namespace
}  // namespace carma::api
