#include "http/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "http/json_reply.h"
#include "http/message.h"
#include "http/peer_credentials.h"

namespace carma::http {

int millis_until(Clock::time_point t) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
    return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30));
}

bool wait_ready(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    int r = 0;
    do {
        r = ::poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    return r > 0;
}

namespace {

constexpr int kBacklog = 128;

}  // namespace

namespace {

// The first descriptor `open` makes of host:port's addresses (it returns -1 with errno set when
// an address fails), or why none worked (strerror or the resolver's words).
template <typename Open>
Result<int> first_address(const std::string& host, int port, int flags, Open open) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
        return fail(ErrorCode::Io, ::gai_strerror(rc));
    }
    std::string why = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        if (const int fd = open(*a); fd >= 0) {
            ::freeaddrinfo(found);
            return fd;
        }
        why = std::strerror(errno);
    }
    ::freeaddrinfo(found);
    return fail(ErrorCode::Io, why);
}

// Closes fd keeping errno, and gives -1.
int close_failed(int fd) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
}

}  // namespace

Result<BoundSocket> listen_tcp(const std::string& host, int port) {
    auto listening = first_address(host, port, AI_PASSIVE, [](const addrinfo& a) {
        const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol);
        if (fd < 0) {
            return -1;
        }
        const int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (a.ai_family == AF_INET6) {
            const int no = 0;
            ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
        }
        if (::bind(fd, a.ai_addr, a.ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
            return close_failed(fd);
        }
        return fd;
    });
    if (!listening) {
        return tl::unexpected(listening.error());
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int bound = port;
    if (::getsockname(*listening, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
        bound = addr.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    }
    return BoundSocket{*listening, bound};
}

Result<int> connect_tcp(const std::string& host, int port, int timeout_ms) {
    return first_address(host, port, 0, [&](const addrinfo& a) {
        const int fd =
            ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol);
        if (fd < 0) {
            return -1;
        }
        if (::connect(fd, a.ai_addr, a.ai_addrlen) == 0) {
            return fd;
        }
        if (errno != EINPROGRESS) {
            return close_failed(fd);
        }
        int err = ETIMEDOUT;
        if (wait_ready(fd, POLLOUT, timeout_ms)) {
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
        if (err != 0) {
            errno = err;
            return close_failed(fd);
        }
        return fd;
    });
}

Result<int> listen_unix(const std::string& path) {
    sockaddr_un addr{};
    if (path.size() >= sizeof addr.sun_path) {
        return fail(ErrorCode::InvalidArgument, "the path is too long for a socket");
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return fail(ErrorCode::Io, std::strerror(errno));
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd, kBacklog) != 0) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return fail(ErrorCode::Io, std::strerror(err));
    }
    return fd;
}

bool send_all(int fd, std::string_view data, int wait_ms) {
    while (!data.empty()) {
        if (!wait_ready(fd, POLLOUT, wait_ms)) {
            return false;
        }
        ssize_t n = 0;
        do {
            n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

void finish_answer(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto until = Clock::now() + std::chrono::seconds(1);
    char sink[4096];
    for (std::size_t drained = 0;
         drained < (1 << 20) && wait_ready(fd, POLLIN, millis_until(until));) {
        const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
        if (n <= 0) {
            break;
        }
        drained += static_cast<std::size_t>(n);
    }
}

void refuse(int fd, int status, const std::string& message) {
    const std::string body = json_text(nlohmann::json{{"error", message}});
    const std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\n"
                                        "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                                        status, reason_phrase(status), body.size(), body);
    send_all(fd, out, 1000);
    finish_answer(fd);
}

void SocketReader::consume(std::size_t n) {
    pos_ += std::min(n, buffer_.size() - pos_);
    if (pos_ == buffer_.size()) {
        buffer_.clear();
        if (buffer_.capacity() > (64 << 10)) {
            buffer_.shrink_to_fit();  // a large body's room is not kept for a keep-alive wait
        }
        pos_ = 0;
    } else if (pos_ > (64 << 10)) {
        buffer_.erase(0, pos_);
        pos_ = 0;
    }
}

SocketReader::Got SocketReader::fill(Clock::time_point deadline, std::size_t max_bytes) {
    const int wait = std::min(read_timeout_ms_, millis_until(deadline));
    if (!wait_ready(fd_, POLLIN, wait)) {
        return Got::Timeout;
    }
    const std::size_t had = buffer_.size();
    buffer_.resize(had + max_bytes);
    ssize_t n = 0;
    do {
        n = ::recv(fd_, buffer_.data() + had, max_bytes, 0);
    } while (n < 0 && errno == EINTR);
    buffer_.resize(had + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return Got::Data;  // nothing after all; the caller looks again
    }
    return n <= 0 ? Got::Closed : Got::Data;
}

SocketReader::Got SocketReader::take(std::size_t n, Clock::time_point deadline,
                                     std::string* out) {
    while (n > 0) {
        if (pending().empty()) {
            if (const Got got = fill(deadline, std::min<std::size_t>(n, 64 << 10));
                got != Got::Data) {
                return got;
            }
            continue;
        }
        const std::size_t k = std::min(n, pending().size());
        if (out != nullptr) {
            out->append(pending().substr(0, k));
        }
        consume(k);
        n -= k;
    }
    return Got::Data;
}

Result<PeerCredentials> peer_credentials(int fd) {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return fail(ErrorCode::Io, fmt::format("cannot read the peer credentials of the "
                                               "connection: {}",
                                               std::strerror(errno)));
    }
    return PeerCredentials{cred.uid, cred.gid, cred.pid};
}

}  // namespace carma::http
