#include "core/json_limits.h"

#include <string>

#include <gtest/gtest.h>

namespace carma {
namespace {

std::string nested(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

// This test verifies the depth count: brackets nest, those inside strings (escaped quotes
// included) do not, and the offset named is the first bracket past the limit.
TEST(JsonLimitsTest, DepthIsCountedOutsideStrings) {
    EXPECT_FALSE(json_too_deep_at(nested(64)));
    EXPECT_EQ(json_too_deep_at(nested(65)), 64u);
    EXPECT_FALSE(json_too_deep_at(R"({"a": "[[[[[[[[[[[[", "b": [1, {"c": "\"[[[["}]})", 3));
    EXPECT_EQ(json_too_deep_at(R"({"a": [{"b": []}]})", 3), 13u);
    EXPECT_FALSE(json_too_deep_at("", 0));
}

// This test verifies that parsing refuses text nested too deep before parsing it, naming the
// depth and the byte, and says what else is not JSON.
TEST(JsonLimitsTest, ParseRefusesDeepTextAndSaysWhy) {
    auto deep = parse_json_within(nested(70000), "the request body");
    ASSERT_FALSE(deep);
    EXPECT_NE(deep.error().message.find("the request body nests arrays and objects deeper than "
                                        "64 (at byte 64)"),
              std::string::npos)
        << deep.error().message;
    auto broken = parse_json_within("{\"a\": ", "the exit record");
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().message.find("the exit record is not JSON"), 0u);
    auto ok = parse_json_within(R"({"after": [1, 2]})", "x");
    ASSERT_TRUE(ok);
    EXPECT_EQ((*ok)["after"].size(), 2u);
}

// This test verifies that an excerpt never recurses: a value nested 100,000 deep (parsed by
// nlohmann without the limit) is described by its size, as any array or object is; scalars are
// quoted, long strings cut at a character boundary.
TEST(JsonLimitsTest, ExcerptNeverRecurses) {
    const nlohmann::json deep = nlohmann::json::parse(nested(100000));
    EXPECT_EQ(json_excerpt(deep), "an array of 1 item");
    EXPECT_EQ(json_excerpt(nlohmann::json::object({{"a", 1}, {"b", 2}})), "an object of 2 keys");
    EXPECT_EQ(json_excerpt(nlohmann::json::array()), "an array of 0 items");
    EXPECT_EQ(json_excerpt(12.5), "12.5");
    EXPECT_EQ(json_excerpt(nullptr), "null");
    EXPECT_EQ(json_excerpt("x\"y"), R"("x\"y")");
    EXPECT_EQ(json_excerpt(std::string(100, 'a'), 10), "\"aaaaaaaaaa...\"");
    // "é" is two bytes: a cut inside it moves back to the character's start.
    EXPECT_EQ(json_excerpt("aaaa\xc3\xa9zz", 5), "\"aaaa...\"");
}

}  // namespace
}  // namespace carma
