#include "api/unix_http.h"

#include <gtest/gtest.h>

namespace carma::api {
namespace {

// This test verifies the three ways an answer's body ends, and header names in any case.
TEST(UnixHttpTest, ParsesWhatTheDaemonSends) {
    auto plain = parse_http_reply(
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\ncontent-length: 7\r\n"
        "X-Carma-Log-Size: 42\r\n\r\n{\"a\":1}trailing");
    ASSERT_TRUE(plain) << plain.error();
    EXPECT_EQ(plain->status, 201);
    EXPECT_EQ(plain->body, "{\"a\":1}");
    EXPECT_EQ(plain->header("x-carma-log-size"), "42");
    auto chunked = parse_http_reply(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n6;x=y\r\npedia \r\n"
        "0\r\n\r\n");
    ASSERT_TRUE(chunked) << chunked.error();
    EXPECT_EQ(chunked->body, "Wikipedia ");
    auto until_close = parse_http_reply("HTTP/1.0 404 Not Found\r\n\r\nno such");
    ASSERT_TRUE(until_close);
    EXPECT_EQ(until_close->status, 404);
    EXPECT_EQ(until_close->body, "no such");
}

// This test verifies that a broken answer is an error that says what is wrong, never a crash.
TEST(UnixHttpTest, RefusesBrokenAnswers) {
    for (const auto& [raw, why] : std::vector<std::pair<std::string, std::string>>{
             {"", "without an answer"},
             {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", "cut short"},
             {"SSH-2.0-OpenSSH\r\n\r\n", "status line"},
             {"HTTP/1.1 abc\r\n\r\n", "status line"},
             {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "5 of 10 bytes"},
             {"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "not a number"},
             {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "hexadecimal"},
             {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc", "cut short"}}) {
        auto r = parse_http_reply(raw);
        ASSERT_FALSE(r) << raw;
        EXPECT_NE(r.error().find(why), std::string::npos) << r.error();
    }
}

}  // namespace
}  // namespace carma::api
