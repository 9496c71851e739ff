#include "api/unix_http.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/fd.h"

namespace carma::api {

namespace {

using exec::Fd;

void set_timeout(int fd, int option, std::chrono::seconds s) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(s.count());
    ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

std::optional<std::size_t> parse_number(std::string_view s, int base) {
    std::size_t v = 0;
    s = trim(s);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

tl::expected<std::string, std::string> dechunk(std::string_view in) {
    std::string out;
    while (true) {
        const std::size_t eol = in.find("\r\n");
        if (eol == std::string_view::npos) {
            return tl::unexpected(std::string("a chunked body ends in the middle of a chunk size"));
        }
        std::string_view size_text = in.substr(0, eol);
        size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions
        const auto size = parse_number(size_text, 16);
        if (!size) {
            return tl::unexpected(fmt::format("a chunk size '{}' is not hexadecimal", size_text));
        }
        in.remove_prefix(eol + 2);
        if (*size == 0) {
            return out;  // trailers, if any, are not needed
        }
        if (in.size() < *size + 2) {
            return tl::unexpected(std::string("a chunked body is cut short"));
        }
        out.append(in.substr(0, *size));
        in.remove_prefix(*size + 2);
    }
}

}  // namespace

tl::expected<HttpReply, std::string> parse_http_reply(std::string_view raw) {
    const std::size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string_view::npos) {
        return tl::unexpected(raw.empty() ? std::string("the connection closed without an answer")
                                          : std::string("the answer's headers are cut short"));
    }
    const std::vector<std::string> lines = split_list(raw.substr(0, head_end), '\n');
    HttpReply reply;
    // "HTTP/1.1 200 OK"
    const std::string_view status_line = trim(lines.front());
    const std::size_t sp = status_line.find(' ');
    const auto status = sp == std::string_view::npos
                            ? std::nullopt
                            : parse_number(status_line.substr(sp + 1, 3), 10);
    if (!status_line.starts_with("HTTP/1.") || !status) {
        return tl::unexpected(fmt::format("the answer does not start with an HTTP status line: "
                                          "'{}'",
                                          status_line.substr(0, 80)));
    }
    reply.status = static_cast<int>(*status);
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const std::string_view line = lines[i];
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
            continue;
        }
        reply.headers[to_lower(trim(line.substr(0, colon)))] =
            std::string(trim(line.substr(colon + 1)));
    }
    std::string_view body = raw.substr(head_end + 4);
    if (to_lower(reply.header("transfer-encoding")).find("chunked") != std::string::npos) {
        auto plain = dechunk(body);
        if (!plain) {
            return tl::unexpected(plain.error());
        }
        reply.body = std::move(*plain);
        return reply;
    }
    if (const std::string length = reply.header("content-length"); !length.empty()) {
        const auto n = parse_number(length, 10);
        if (!n) {
            return tl::unexpected(fmt::format("the answer's Content-Length '{}' is not a number",
                                              length));
        }
        if (body.size() < *n) {
            return tl::unexpected(fmt::format("the answer is cut short ({} of {} bytes)",
                                              body.size(), *n));
        }
        body = body.substr(0, *n);
    }
    reply.body = std::string(body);
    return reply;
}

tl::expected<HttpReply, HttpError> unix_http_exchange(const std::string& socket_path,
                                                      std::string_view method,
                                                      std::string_view target,
                                                      const std::string* body,
                                                      const HttpTimeouts& timeouts) {
    auto failed = [](HttpFailure f, std::string message) {
        return tl::unexpected(HttpError{f, std::move(message)});
    };
    sockaddr_un addr{};
    if (socket_path.size() >= sizeof(addr.sun_path)) {
        return failed(HttpFailure::Connect, "the socket path is too long");
    }
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
        return failed(HttpFailure::Connect, errno_text(errno));
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        return failed(HttpFailure::Connect, errno_text(errno));
    }
    set_timeout(fd.get(), SO_RCVTIMEO, timeouts.read);
    set_timeout(fd.get(), SO_SNDTIMEO, timeouts.write);

    std::string request = fmt::format("{} {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
                                      method, target);
    if (body != nullptr) {
        request += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n",
                               body->size());
    } else if (method == "POST") {
        request += "Content-Length: 0\r\n";
    }
    request += "\r\n";
    if (body != nullptr) {
        request += *body;
    }
    for (std::size_t sent = 0; sent < request.size();) {
        const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent,
                                 MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return failed(HttpFailure::Exchange,
                          fmt::format("sending the request failed: {}", errno_text(errno)));
        }
        sent += static_cast<std::size_t>(n);
    }
    // Connection: close: the answer ends where the daemon closes the connection.
    std::string raw;
    char buf[64 * 1024];
    while (true) {
        const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return failed(HttpFailure::Exchange,
                          errno == EAGAIN || errno == EWOULDBLOCK
                              ? fmt::format("no answer within {} s", timeouts.read.count())
                              : fmt::format("reading the answer failed: {}", errno_text(errno)));
        }
        if (n == 0) {
            break;
        }
        raw.append(buf, static_cast<std::size_t>(n));
    }
    auto reply = parse_http_reply(raw);
    if (!reply) {
        return failed(HttpFailure::Exchange, reply.error());
    }
    return *reply;
}

}  // namespace carma::api
