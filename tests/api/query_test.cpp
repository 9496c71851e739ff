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

}  // namespace
}  // namespace carma::api
