// Query parameters of the HTTP API: whole numbers within their range, words from their list,
// yes/no switches; anything else is an error naming the parameter and what it takes.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "api/query.h"

namespace carma::api {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(QueryTest, IntegerWithinRange) {
    EXPECT_EQ(*integer_param("limit", std::nullopt, 1, 10000, 100), 100);
    EXPECT_EQ(*integer_param("limit", "1", 1, 10000, 100), 1);
    EXPECT_EQ(*integer_param("limit", "10000", 1, 10000, 100), 10000);
    EXPECT_EQ(*integer_param("offset", "9223372036854775807", 0, kMax, 0), kMax);
}

TEST(QueryTest, IntegerRefusesWhatItCannotTake) {
    struct Case {
        const char* text;
        const char* says;
    };
    for (const Case& k : {Case{"-5", "offset=-5 is out of range; give one from 0 to"},
                          Case{"18446744073709551611", "out of range"},
                          Case{"9223372036854775808", "out of range"},
                          Case{"", "is not a whole number"},
                          Case{"12abc", "offset='12abc' is not a whole number"},
                          Case{" 1", "is not a whole number"},
                          Case{"+1", "is not a whole number"},
                          Case{"0x10", "is not a whole number"},
                          Case{"1.5", "is not a whole number"}}) {
        auto r = integer_param("offset", k.text, 0, kMax, 0);
        ASSERT_FALSE(r) << k.text;
        EXPECT_NE(r.error().message.find(k.says), std::string::npos) << r.error().message;
    }
    auto zero = integer_param("limit", "0", 1, 10000, 100);
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("limit=0 is out of range; give one from 1 to 10000"),
              std::string::npos);
}

TEST(QueryTest, GarbageIsNotEchoedWhole) {
    auto r = integer_param("offset", std::string(200, 'x') + "\x01", 0, 1, 0);
    ASSERT_FALSE(r);
    EXPECT_LT(r.error().message.size(), 150u) << r.error().message;
    auto w = word_param("stream", std::string("a\x01" "b", 3), {"stdout", "stderr"}, "stdout");
    ASSERT_FALSE(w);
    EXPECT_NE(w.error().message.find("'a?b'"), std::string::npos) << w.error().message;
}

TEST(QueryTest, Words) {
    EXPECT_EQ(*word_param("stream", std::nullopt, {"stdout", "stderr"}, "stdout"), "stdout");
    EXPECT_EQ(*word_param("stream", "stderr", {"stdout", "stderr"}, "stdout"), "stderr");
    auto r = word_param("stream", "bogus", {"stdout", "stderr"}, "stdout");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "query parameter stream='bogus' is not one of: stdout, stderr");
}

TEST(QueryTest, Flags) {
    EXPECT_FALSE(*flag_param("all", std::nullopt));
    for (const char* yes : {"", "1", "true", "yes"}) {
        EXPECT_TRUE(*flag_param("all", yes)) << yes;
    }
    for (const char* no : {"0", "false", "no"}) {
        EXPECT_FALSE(*flag_param("all", no)) << no;
    }
    EXPECT_FALSE(flag_param("all", "maybe"));
}

// This test verifies decimal numbers (GET /v1/acct?since=): whole or with a fraction, within
// their range; anything else names the parameter.
TEST(QueryTest, Numbers) {
    EXPECT_EQ(*number_param("since", std::nullopt, 0, 1e11, 0), 0);
    EXPECT_EQ(*number_param("since", "1764441600", 0, 1e11, 0), 1764441600);
    EXPECT_EQ(*number_param("since", "1764441600.25", 0, 1e11, 0), 1764441600.25);
    struct Case {
        const char* text;
        const char* says;
    };
    for (const Case& k : {Case{"-1", "since=-1 is out of range; give one from 0 to"},
                          Case{"1e12", "since='1e12' is not a number"},
                          Case{"", "is not a number"}, Case{"nan", "is not a number"},
                          Case{"inf", "is not a number"}, Case{"12h", "is not a number"},
                          Case{"200000000000", "out of range"}}) {
        auto r = number_param("since", k.text, 0, 1e11, 0);
        ASSERT_FALSE(r) << k.text;
        EXPECT_NE(r.error().message.find(k.says), std::string::npos) << r.error().message;
    }
}

// This test verifies free text (GET /v1/acct?user=): absent is empty; empty, too long or with
// control characters is refused naming the parameter.
TEST(QueryTest, Text) {
    EXPECT_EQ(*text_param("user", std::nullopt, 8), "");
    EXPECT_EQ(*text_param("user", "alice", 8), "alice");
    EXPECT_EQ(*text_param("user", "\xc3\xa9l\xc3\xa8ve", 8), "\xc3\xa9l\xc3\xa8ve");
    for (std::string bad : {std::string(), std::string("alexander"), std::string("a\nb"),
                            std::string("a\x7f")}) {
        auto r = text_param("user", bad, 8);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("query parameter user"), std::string::npos)
            << r.error().message;
    }
}

// This test verifies comma lists (GET /v1/acct?state=): absent is empty, items come in order,
// an empty item is refused.
TEST(QueryTest, Lists) {
    EXPECT_TRUE(list_param("state", std::nullopt)->empty());
    EXPECT_EQ(*list_param("state", "failed"), std::vector<std::string>{"failed"});
    EXPECT_EQ(*list_param("state", "failed,cancelled"),
              (std::vector<std::string>{"failed", "cancelled"}));
    for (const char* bad : {"", ",", "failed,", ",failed", "failed,,lost"}) {
        auto r = list_param("state", bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("query parameter state="), std::string::npos)
            << r.error().message;
    }
}

}  // namespace
}  // namespace carma::api
