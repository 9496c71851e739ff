#pragma once
// One HTTP/1.1 exchange with the daemon over its Unix socket, for the command-line client.
//
// Why not cpp-httplib, which the daemon serves with: Debian builds libcpp-httplib against
// OpenSSL, zlib and brotli, and loading those libraries took 4.6 ms of the 7.9 ms a `carma`
// command spent starting (perf stat on this machine), which capped sequential submissions near
// 135 per second. The client needs only what our own daemon answers: a status line, headers, and
// a body delimited by Content-Length, by chunked encoding, or by the end of the connection.

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"

namespace carma::api {

struct HttpReply {
    int status = 0;
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;

    std::string header(const std::string& lower_name) const {
        auto it = headers.find(lower_name);
        return it == headers.end() ? std::string() : it->second;
    }
};

enum class HttpFailure { Connect, Exchange };

struct HttpError {
    HttpFailure failure = HttpFailure::Exchange;
    std::string message;
};

struct HttpTimeouts {
    std::chrono::seconds read{60};
    std::chrono::seconds write{30};
};

// `body` is sent as application/json when given. Connect failures are told apart so the caller
// can say why the daemon is unreachable.
tl::expected<HttpReply, HttpError> unix_http_exchange(const std::string& socket_path,
                                                      std::string_view method,
                                                      std::string_view target,
                                                      const std::string* body,
                                                      const HttpTimeouts& timeouts = {});

// The reply in `raw` (everything the server sent before closing); pure, for tests.
tl::expected<HttpReply, std::string> parse_http_reply(std::string_view raw);

}  // namespace carma::api
