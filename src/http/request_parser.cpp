#include "http/request_parser.h"

#include <strings.h>

#include <array>
#include <charconv>

#include <fmt/format.h>

#include "core/text.h"
#include "http/client_bytes.h"

namespace carma::http {

namespace {

// A client's bytes in a message: at most 60 of them, escaped (core/text.h).
std::string shown(std::string_view s) { return escaped_bytes(s, 60); }

// RFC 9110 5.6.2: the characters of a token (a method, a header name).
bool token_char(char c) {
    static constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~";
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           kExtra.find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    if (s.empty()) {
        return false;
    }
    for (char c : s) {
        if (!token_char(c)) {
            return false;
        }
    }
    return true;
}


ParseFailure malformed(std::string reason) { return ParseFailure{400, std::move(reason)}; }

// The request methods cpp-httplib took, so that one it would have refused is still refused.
bool known_method(std::string_view m) {
    static constexpr std::array<std::string_view, 9> kMethods = {
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    for (std::string_view k : kMethods) {
        if (m == k) {
            return true;
        }
    }
    return false;
}

// The next line of `text` from `pos` without its line end (CRLF or LF); false at the end.
bool next_line(std::string_view text, std::size_t& pos, std::string_view& line) {
    if (pos >= text.size()) {
        return false;
    }
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
    }
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    return true;
}

}  // namespace

std::size_t head_end(std::string_view buffer) {
    std::size_t pos = 0;
    bool seen_line = false;
    while (pos < buffer.size()) {
        const std::size_t nl = buffer.find('\n', pos);
        if (nl == std::string_view::npos) {
            return std::string_view::npos;
        }
        const std::size_t length = nl - pos;
        const bool blank = length == 0 || (length == 1 && buffer[pos] == '\r');
        pos = nl + 1;
        if (blank && seen_line) {
            return pos;
        }
        seen_line = seen_line || !blank;
    }
    return std::string_view::npos;
}

std::optional<std::string> url_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '%') {
            const int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
            const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return std::nullopt;
            }
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

std::optional<ParseFailure> parse_target(std::string_view target, Request& req) {
    if (target.empty() || target.front() != '/') {
        return malformed(fmt::format("the request target '{}' does not start with '/'",
                                     shown(target)));
    }
    const std::size_t q = target.find('?');
    const std::string_view raw_path = target.substr(0, q);
    std::optional<std::string> path = url_decode(raw_path, false);
    if (!path) {
        req.path = std::string(raw_path);
        return malformed(fmt::format("the path '{}' holds a '%' not followed by two hexadecimal "
                                     "digits",
                                     shown(raw_path)));
    }
    req.path = std::move(*path);
    if (q == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view query = target.substr(q + 1);
    if (query.find('?') != std::string_view::npos) {
        return malformed(fmt::format("the target '{}' has a second '?'", shown(target)));
    }
    std::size_t pos = 0;
    while (pos <= query.size()) {
        std::size_t amp = query.find('&', pos);
        if (amp == std::string_view::npos) {
            amp = query.size();
        }
        const std::string_view pair = query.substr(pos, amp - pos);
        pos = amp + 1;
        if (pair.empty()) {
            continue;
        }
        const std::size_t eq = pair.find('=');
        std::optional<std::string> name = url_decode(pair.substr(0, eq), true);
        std::optional<std::string> value =
            url_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                       true);
        if (!name || !value) {
            return malformed(fmt::format("the query parameter '{}' holds a '%' not followed by "
                                         "two hexadecimal digits",
                                         shown(pair)));
        }
        if (!name->empty()) {
            req.params.emplace(std::move(*name), std::move(*value));
        }
    }
    return std::nullopt;
}

std::optional<ParseFailure> parse_request_line(std::string_view line, Request& req) {
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        return malformed(fmt::format("the request line '{}' is not METHOD TARGET HTTP/1.1",
                                     shown(line)));
    }
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (!is_token(method)) {
        return malformed(fmt::format("the request line '{}' is not METHOD TARGET HTTP/1.1",
                                     shown(line)));
    }
    req.method = std::string(method);
    req.target = std::string(target);
    for (char c : target) {
        if (control_char(c)) {
            return malformed("the request target holds a control character");
        }
    }
    if (auto failed = parse_target(target, req)) {
        return failed;
    }
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
        return malformed(fmt::format("'{}' is not HTTP/1.1 or HTTP/1.0", shown(version)));
    }
    req.version = std::string(version);
    if (!known_method(method)) {
        return malformed(fmt::format("unknown method '{}'", shown(method)));
    }
    return std::nullopt;
}

std::string_view start_line(std::string_view head, std::size_t& pos) {
    pos = 0;
    std::string_view line;
    while (next_line(head, pos, line)) {
        if (!line.empty()) {
            return line;  // empty lines before it are skipped
        }
    }
    return {};
}

std::optional<ParseFailure> parse_header_fields(std::string_view head, std::size_t pos,
                                                Headers& headers) {
    std::string_view line;
    while (next_line(head, pos, line)) {
        if (line.empty()) {
            return std::nullopt;  // the blank line that ends the head
        }
        if (line.front() == ' ' || line.front() == '\t') {
            return malformed("a header line starts with whitespace (obsolete line folding)");
        }
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
            return malformed(fmt::format("the header line '{}' has no ':'", shown(line)));
        }
        const std::string_view name = line.substr(0, colon);
        if (!is_token(name)) {
            return malformed(fmt::format("'{}' is not a header name", shown(name)));
        }
        const std::string_view value = trim_ows(line.substr(colon + 1));
        for (char c : value) {
            if (c == '\r' || c == '\0' || c == '\n') {
                return malformed(fmt::format("the value of header {} holds a CR, LF or NUL byte",
                                             name));
            }
        }
        headers.emplace(std::string(name), std::string(value));
    }
    return std::nullopt;
}

std::optional<ParseFailure> parse_head(std::string_view head, Request& req) {
    std::size_t pos = 0;
    const std::string_view line = start_line(head, pos);
    if (line.empty()) {
        return malformed("no request line");
    }
    if (line.find_first_of(std::string_view("\r\0", 2)) != std::string_view::npos) {
        return malformed("the request line holds a CR or NUL byte");
    }
    if (auto failed = parse_request_line(line, req)) {
        return failed;
    }
    return parse_header_fields(head, pos, req.headers);
}

FramingResult body_framing(const Headers& headers) {
    FramingResult r;
    const auto lengths = headers.equal_range("Content-Length");
    const auto codings = headers.equal_range("Transfer-Encoding");
    const std::size_t n_lengths = static_cast<std::size_t>(std::distance(lengths.first,
                                                                         lengths.second));
    const std::size_t n_codings = static_cast<std::size_t>(std::distance(codings.first,
                                                                         codings.second));
    if (n_lengths > 0 && n_codings > 0) {
        r.failure = malformed("the request has both Content-Length and Transfer-Encoding; "
                              "send one");
        return r;
    }
    if (n_lengths > 1) {
        r.failure = malformed("the request has more than one Content-Length header");
        return r;
    }
    if (n_codings > 1) {
        r.failure = malformed("the request has more than one Transfer-Encoding header");
        return r;
    }
    if (n_lengths == 1) {
        const std::string& text = lengths.first->second;
        std::uint64_t length = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
            r.failure = malformed(fmt::format("Content-Length '{}' is not a whole number of "
                                              "bytes",
                                              shown(text)));
            return r;
        }
        r.framing = {BodyFraming::Kind::Length, length};
        return r;
    }
    if (n_codings == 1) {
        if (::strcasecmp(codings.first->second.c_str(), "chunked") != 0) {
            r.failure = ParseFailure{
                501, fmt::format("Transfer-Encoding '{}' is not supported; send the body with "
                                 "Content-Length or chunked",
                                 shown(codings.first->second))};
            return r;
        }
        r.framing.kind = BodyFraming::Kind::Chunked;
    }
    return r;
}

}  // namespace carma::http
