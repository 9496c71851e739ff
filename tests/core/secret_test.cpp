// The one hex encoding, HMAC and secret comparison every credential check uses (core/secret.h).

#include "core/secret.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies HMAC-SHA256 and SHA-256 against published vectors (RFC 4231 case 2, FIPS
// 180-2 "abc"), in lowercase hex.
TEST(Secret, HmacAndShaMatchTheStandardVectors) {
    EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const unsigned char bytes[] = {0x00, 0x0f, 0xa0, 0xff};
    EXPECT_EQ(hex_lower(bytes, sizeof bytes), "000fa0ff");
    EXPECT_EQ(hex_lower(bytes, 0), "");
}

// This test verifies that the secret comparison says equal exactly when the strings are.
TEST(Secret, SecretsEqualExactlyWhenTheStringsAre) {
    EXPECT_TRUE(secrets_equal("Bearer 0123456789abcdef", "Bearer 0123456789abcdef"));
    EXPECT_FALSE(secrets_equal("Bearer 0123456789abcdeF", "Bearer 0123456789abcdef"));
    EXPECT_FALSE(secrets_equal("Bearer 0123456789abcde", "Bearer 0123456789abcdef"));
    EXPECT_FALSE(secrets_equal("Bearer 0123456789abcdef0", "Bearer 0123456789abcdef"));
    EXPECT_FALSE(secrets_equal("", "Bearer 0123456789abcdef"));
    // A shorter string padded with NULs is still a different string.
    EXPECT_FALSE(secrets_equal(std::string_view("ab\0", 3), "ab"));
    EXPECT_FALSE(secrets_equal("ab", std::string_view("ab\0", 3)));
    EXPECT_TRUE(secrets_equal("", ""));
}

}  // namespace
}  // namespace carma
