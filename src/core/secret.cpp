#include "core/secret.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <climits>

namespace carma {

std::string hex_lower(const unsigned char* bytes, std::size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string hex(2 * n, '0');
    for (std::size_t i = 0; i < n; ++i) {
        hex[2 * i] = kDigits[bytes[i] >> 4];
        hex[2 * i + 1] = kDigits[bytes[i] & 15];
    }
    return hex;
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
    if (key.size() > static_cast<std::size_t>(INT_MAX)) {
        return {};
    }
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
             &len) == nullptr) {
        return {};
    }
    return hex_lower(out, len);
}

std::string sha256_hex(std::string_view data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr) != 1) {
        return {};
    }
    return hex_lower(out, len);
}

bool secrets_equal(std::string_view given, std::string_view expected) {
    // Every byte of `expected` is looked at whatever the outcome so far; volatile keeps the
    // compiler from stopping early once a difference is known.
    volatile unsigned char diff = given.size() == expected.size() ? 0 : 1;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const auto g = static_cast<unsigned char>(i < given.size() ? given[i] : 0);
        diff = static_cast<unsigned char>(diff | (g ^ static_cast<unsigned char>(expected[i])));
    }
    return diff == 0;
}

}  // namespace carma
