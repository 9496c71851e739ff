#include "core/units.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that the memory notations people write parse to MiB.
TEST(UnitsTest, ParsesMemoryNotations) {
    struct Case {
        const char* text;
        MiB want;
    };
    const Case cases[] = {
        {"12GiB", 12 * 1024},   {"12 GiB", 12288}, {"12000MiB", 12000}, {"40000", 40000},
        {"19.83GB", 19830},  // paper GB = MiB / 1000
        {"1.5g", 1536},         {"0", 0},
    };
    for (const Case& c : cases) {
        auto got = parse_memory(c.text);
        ASSERT_TRUE(got) << c.text << ": " << got.error().message;
        EXPECT_EQ(*got, c.want) << c.text;
    }
}

// This test verifies that malformed memory gets an error naming the text and the fix.
TEST(UnitsTest, RejectsMalformedMemory) {
    for (const char* bad : {"", "GiB", "12 parsecs", "-3GiB", "abc"}) {
        auto got = parse_memory(bad);
        ASSERT_FALSE(got) << bad;
        EXPECT_EQ(got.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(got.error().message.find("memory"), std::string::npos);
    }
}

// This test verifies the limit found by the fuzz tests (tests/fuzz): memory beyond 16 TiB per GPU
// is refused with the limit named, so sums such as need + margin stay far from overflow.
TEST(UnitsTest, FuzzRegressionMemoryAbove16TiBIsRefused) {
    ASSERT_TRUE(parse_memory("16TiB"));
    EXPECT_EQ(*parse_memory("16TiB"), kMaxMemoryMib);
    for (const char* bad : {"16777217", "120000000000MiB", "9223372036854775807", "1e300GiB"}) {
        auto got = parse_memory(bad);
        ASSERT_FALSE(got) << bad;
        EXPECT_NE(got.error().message.find("at most 16 TiB"), std::string::npos)
            << got.error().message;
    }
}

// This test verifies that MiB are rendered with thousands separators.
TEST(UnitsTest, FormatsMiB) {
    EXPECT_EQ(format_mib(13236), "13,236 MiB");
    EXPECT_EQ(format_mib(512), "512 MiB");
    EXPECT_EQ(format_mib(1000000), "1,000,000 MiB");
}

}  // namespace
}  // namespace carma
