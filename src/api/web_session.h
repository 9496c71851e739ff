#pragma once
// The web page's session cookie: proof that its holder once presented the web token, without
// being the token. The value is "v1.<expiry>.<HMAC-SHA256(token, 'carma-web-session v1 ' +
// expiry), hex>": it survives a restart of the daemon (nothing is stored), a new token ends every
// session made with the old one, and a stolen cookie stops working at its expiry. The clock is
// the caller's.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace carma::api {

inline constexpr std::string_view kSessionCookie = "carma_session";
inline constexpr std::int64_t kSessionLifetimeS = 30 * 24 * 3600;

// A cookie value for `token` valid until now + lifetime (unix seconds).
std::string make_session(std::string_view token, std::int64_t now,
                         std::int64_t lifetime_s = kSessionLifetimeS);

// The expiry of a session value made for `token`, or nothing when it is not one (or has
// expired at `now`). Compared in constant time.
std::optional<std::int64_t> check_session(std::string_view value, std::string_view token,
                                          std::int64_t now);

// The Set-Cookie header's value for a session: HttpOnly (no script reads it), SameSite=Strict
// (no other site's page makes the browser send it), Secure when the page is served over TLS.
std::string session_cookie_header(const std::string& value, std::int64_t max_age_s, bool tls);

}  // namespace carma::api
