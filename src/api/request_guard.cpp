#include "api/request_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::api {

namespace {

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isdigit(c) != 0;
    });
}

// The media type of a Content-Type value, without parameters, lower case.
std::string media_type(std::string_view content_type) {
    std::string_view t = content_type.substr(0, content_type.find(';'));
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) {
        t.remove_suffix(1);
    }
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) {
        t.remove_prefix(1);
    }
    return to_lower(t);
}

bool changes_state(std::string_view method) {
    return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

bool is_api_path(std::string_view path) {
    return path.starts_with("/v1/") || path == "/metrics";
}

// How a refusal starts: the request, so a log or a console shows which one it was.
std::string what(const RequestHead& head) { return fmt::format("{} {}", head.method, head.path); }

}  // namespace

bool is_loopback_host(std::string_view host) {
    if (host == "localhost" || host == "::1" || host == "[::1]") {
        return true;
    }
    in_addr addr{};
    const std::string text(host);
    return ::inet_pton(AF_INET, text.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
}

std::optional<std::string> host_of(std::string_view value) {
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
        value.remove_suffix(1);
    }
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
    }
    if (value.empty()) {
        return std::nullopt;
    }
    std::string_view host = value;
    if (value.front() == '[') {  // an IPv6 literal, maybe with a port
        const std::size_t close = value.find(']');
        if (close == std::string_view::npos) {
            return std::nullopt;
        }
        const std::string_view rest = value.substr(close + 1);
        if (!rest.empty() && !(rest.front() == ':' && all_digits(rest.substr(1)))) {
            return std::nullopt;
        }
        host = value.substr(1, close - 1);
    } else if (const std::size_t colon = value.rfind(':'); colon != std::string_view::npos) {
        if (!all_digits(value.substr(colon + 1))) {
            return std::nullopt;
        }
        host = value.substr(0, colon);
    }
    if (host.empty()) {
        return std::nullopt;
    }
    // A name or an address: letters, digits, dots, dashes, underscores, colons (IPv6) only.
    const bool plain = std::all_of(host.begin(), host.end(), [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '.' || c == '-' || c == '_' || c == ':';
    });
    if (!plain) {
        return std::nullopt;
    }
    std::string out = to_lower(host);
    if (out.size() > 1 && out.back() == '.') {
        out.pop_back();  // "localhost." is localhost
    }
    return out;
}

std::optional<ApiError> check_request_head(const RequestHead& head, const GuardOptions& options) {
    // 1. Host: this machine, never a name an attacker points at it.
    if (!head.host) {
        return ApiError{400, fmt::format("{}: the request has no Host header; HTTP/1.1 needs "
                                         "one (CARMA's clients send 'Host: localhost')",
                                         what(head))};
    }
    const bool socket_path = options.unix_socket && head.host->starts_with("/");
    if (!socket_path) {
        const std::optional<std::string> host = host_of(*head.host);
        const bool listed =
            host && std::any_of(options.allowed_hosts.begin(), options.allowed_hosts.end(),
                                [&](const std::string& a) { return to_lower(a) == *host; });
        if (!host || !(is_loopback_host(*host) || listed)) {
            return ApiError{403, fmt::format("{}: Host '{}' is not a name of this daemon, so "
                                             "the request may come from a web page that points "
                                             "its own name at this machine; use localhost or a "
                                             "loopback address, or have the admin add the name "
                                             "to allowed_hosts",
                                             what(head), head.host->substr(0, 200))};
        }
    }
    // 2. Fetch metadata: another site (or another port of this one) asked for it.
    if (head.sec_fetch_site == "cross-site" || head.sec_fetch_site == "same-site") {
        const bool navigation = (head.method == "GET" || head.method == "HEAD") &&
                                head.sec_fetch_mode == "navigate";
        if (!navigation) {
            return ApiError{403, fmt::format("{}: refused because a web page of another origin "
                                             "sent it (Sec-Fetch-Site: {}); CARMA's API answers "
                                             "its own page and non-browser clients only",
                                             what(head), head.sec_fetch_site)};
        }
    }
    // 3. Origin: a browser's statement of who asks.
    if (!head.origin.empty()) {
        const std::string origin = to_lower(head.origin);
        const std::string own = to_lower(*head.host);
        if (origin != "http://" + own && origin != "https://" + own) {
            return ApiError{403, fmt::format("{}: refused because a web page of another origin "
                                             "({}) sent it; CARMA's API answers its own page "
                                             "and non-browser clients only",
                                             what(head), head.origin.substr(0, 200))};
        }
    }
    // 4. A body that changes something is JSON, declared as such.
    if (changes_state(head.method) && head.has_body &&
        media_type(head.content_type) != "application/json") {
        return ApiError{415, fmt::format("{}: the body must be sent as 'Content-Type: "
                                         "application/json' (it says '{}')",
                                         what(head),
                                         head.content_type.empty()
                                             ? std::string("nothing")
                                             : head.content_type.substr(0, 100))};
    }
    // 5. A browser reaching the API: only CARMA's own page, which says so.
    const bool browser_fetch = !head.sec_fetch_mode.empty() && head.sec_fetch_mode != "navigate";
    if (browser_fetch && is_api_path(head.path) && head.carma_page != "1") {
        return ApiError{403, fmt::format("{}: a browser's request to the API must come from "
                                         "CARMA's own page (header {}: 1)",
                                         what(head), kPageHeader)};
    }
    return std::nullopt;
}

}  // namespace carma::api
