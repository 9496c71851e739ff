#pragma once
// "HOST:PORT" as the daemon's listeners (--tcp, --web, --agents) and `carma agent --server`
// take it. Pure.

#include <string>

#include <fmt/format.h>

#include "core/result.h"

namespace carma {

struct HostPort {
    std::string host;
    int port = 0;
};

// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8080": the port a whole number in 1..65535.
// `option` names the flag in the error.
inline Result<HostPort> parse_host_port(const char* option, const std::string& text) {
    const auto colon = text.rfind(':');
    const std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
    std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    int number = 0;
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (digits) {
        number = std::stoi(port);
    }
    if (host.empty() || !digits || number < 1 || number > 65535) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} '{}' must be HOST:PORT with a port in 1..65535, e.g. "
                                "127.0.0.1:8080",
                                option, text));
    }
    return HostPort{host, number};
}

// "host:port" as a URL or a log writes it: an IPv6 address in brackets ("[::1]:8080").
inline std::string format_host_port(const std::string& host, int port) {
    return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                               : fmt::format("{}:{}", host, port);
}

}  // namespace carma
