#include "api/web_session.h"

#include <charconv>

#include <fmt/format.h>

#include "core/secret.h"

namespace carma::api {

namespace {

std::string mac_hex(std::string_view token, std::int64_t expiry) {
    return hmac_sha256_hex(token, fmt::format("carma-web-session v1 {}", expiry));
}

}  // namespace

std::string make_session(std::string_view token, std::int64_t now, std::int64_t lifetime_s) {
    const std::int64_t expiry = now + lifetime_s;
    return fmt::format("v1.{}.{}", expiry, mac_hex(token, expiry));
}

std::optional<std::int64_t> check_session(std::string_view value, std::string_view token,
                                          std::int64_t now) {
    if (!value.starts_with("v1.")) {
        return std::nullopt;
    }
    value.remove_prefix(3);
    const std::size_t dot = value.find('.');
    if (dot == std::string_view::npos) {
        return std::nullopt;
    }
    std::int64_t expiry = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + dot, expiry);
    if (ec != std::errc() || end != value.data() + dot || expiry <= now) {
        return std::nullopt;
    }
    const std::string expected = mac_hex(token, expiry);
    if (expected.empty() || !secrets_equal(value.substr(dot + 1), expected)) {
        return std::nullopt;
    }
    return expiry;
}

std::string session_cookie_header(const std::string& value, std::int64_t max_age_s, bool tls) {
    return fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}", kSessionCookie,
                       value, max_age_s, tls ? "; Secure" : "");
}

}  // namespace carma::api
