#pragma once
// Secrets compared and MACs written one way, for every part that checks a credential: the
// agents' port (cluster/auth, cluster/munge_auth) and the API's tokens and web sessions
// (api/caller, api/web_session). Pure computation: no I/O, clock or state. Its own library
// (carma_secret, over OpenSSL's libcrypto), so the `carma` command, which checks no secret,
// does not load libcrypto.

#include <cstddef>
#include <string>
#include <string_view>

namespace carma {

// Lowercase hex of `n` bytes.
std::string hex_lower(const unsigned char* bytes, std::size_t n);

// Lowercase hex of HMAC-SHA256(key, message): 64 digits; "" only when OpenSSL fails (it does not
// for in-memory data) or the key is longer than OpenSSL takes (2 GiB).
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

// Lowercase hex of SHA-256(data): 64 digits; "" only when OpenSSL fails.
std::string sha256_hex(std::string_view data);

// Whether a presented secret is the expected one, in time that depends only on the expected
// length, so how long an answer takes does not tell how many leading bytes were right.
// Different lengths are never equal (a shorter string padded with NULs is still different).
bool secrets_equal(std::string_view given, std::string_view expected);

}  // namespace carma
