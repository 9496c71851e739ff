#pragma once
// HTTP/1.1 requests from bytes (RFC 9112), with no socket: the listener (http/listener.h) reads
// a head up to its blank line and hands it here, then reads the body as body_framing() says.
// Every malformed input is an answer (a status and a sentence), never an exception.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace carma::http {

// Why a request cannot be served as it came: 400 for malformed bytes, 501 for a transfer
// coding CARMA does not take.
struct ParseFailure {
    int status = 400;
    std::string reason;
};

// Where a request's head ends in `buffer`: the offset just past its blank line, or npos while
// it has not come. Empty lines before the request line are skipped (RFC 9112 2.2), and a bare
// LF ends a line as CRLF does.
std::size_t head_end(std::string_view buffer);

// The request line and headers (without the blank line) into `req`. What was read before a
// failure stays in `req` (an error handler may name the method and path).
std::optional<ParseFailure> parse_head(std::string_view head, Request& req);

// The same pieces for a head of either kind, so a response's (cluster/report_client) is read by
// the same rules as a request's: its first line (empty lines before it skipped; "" when there is
// none), with `pos` set past it; then the header fields from `pos` into `headers`.
std::string_view start_line(std::string_view head, std::size_t& pos);
std::optional<ParseFailure> parse_header_fields(std::string_view head, std::size_t pos,
                                                Headers& headers);

// "GET /x?a=1 HTTP/1.1": method, target, path, params and version.
std::optional<ParseFailure> parse_request_line(std::string_view line, Request& req);

// A target's path ('%XX' decoded; '+' stays) and query (name=value pairs joined by '&', each
// '%XX' decoded and '+' a space); a second '?' or a broken '%' is malformed.
std::optional<ParseFailure> parse_target(std::string_view target, Request& req);

// '%XX' sequences decoded (and '+' as a space when `plus_is_space`); nothing on a '%' not
// followed by two hexadecimal digits.
std::optional<std::string> url_decode(std::string_view text, bool plus_is_space);

// How the body is framed: none, Content-Length bytes, or chunked. Two Content-Lengths that
// differ, one that is not a number, and both Content-Length and Transfer-Encoding are
// malformed (RFC 9112 6.3: a request that could be read two ways, as in request smuggling).
struct BodyFraming {
    enum class Kind { None, Length, Chunked } kind = Kind::None;
    std::uint64_t length = 0;
};
struct FramingResult {
    BodyFraming framing;
    std::optional<ParseFailure> failure;
};
FramingResult body_framing(const Headers& headers);

}  // namespace carma::http
