#include "http/response_writer.h"

#include <strings.h>

#include <fmt/format.h>

namespace carma::http {

std::string serialize_response(const Response& res, const WriteOptions& options) {
    const int status = res.status < 0 ? 200 : res.status;
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
    for (const auto& [name, value] : res.headers) {
        const char* n = name.c_str();
        if (::strcasecmp(n, "Content-Length") == 0 || ::strcasecmp(n, "Connection") == 0 ||
            ::strcasecmp(n, "Keep-Alive") == 0 || ::strcasecmp(n, "Transfer-Encoding") == 0) {
            continue;  // from the body and the connection, below
        }
        out += name;
        out += ": ";
        out += value;
        out += "\r\n";
    }
    if (!res.body.empty() && !res.has_header("Content-Type")) {
        out += "Content-Type: text/plain\r\n";
    }
    out += fmt::format("Content-Length: {}\r\n", res.body.size());
    if (options.close) {
        out += "Connection: close\r\n";
    } else {
        out += fmt::format("Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n",
                           options.keep_alive_s);
    }
    out += "\r\n";
    if (!options.head_only) {
        out += res.body;
    }
    return out;
}

}  // namespace carma::http
