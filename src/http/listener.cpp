#include "http/listener.h"

#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "http/chunked_decoder.h"
#include "http/connection_threads.h"
#include "http/json_reply.h"
#include "http/request_parser.h"
#include "http/response_writer.h"
#include "http/socket_io.h"

namespace carma::http {

namespace {

thread_local Connection* t_connection = nullptr;

void shut(int fd) { ::shutdown(fd, SHUT_RDWR); }

std::string body_too_large_message(std::size_t limit) {
    return fmt::format("the request body is too large (the limit is {})", size_text(limit));
}

std::string slow_body_message(const ListenerLimits& l) {
    return fmt::format("the request body did not come in time (at most {} s between reads, {} s "
                       "for the whole request)",
                       l.read_timeout_s, l.request_timeout_s);
}

// Whether a comma-separated header value lists `token` (any case).
bool lists_token(const std::string& value, const char* token) {
    std::size_t pos = 0;
    while (pos <= value.size()) {
        std::size_t comma = value.find(',', pos);
        if (comma == std::string::npos) {
            comma = value.size();
        }
        std::string item = value.substr(pos, comma - pos);
        const std::size_t b = item.find_first_not_of(" \t");
        const std::size_t e = item.find_last_not_of(" \t");
        if (b != std::string::npos && ::strcasecmp(item.substr(b, e - b + 1).c_str(), token) == 0) {
            return true;
        }
        pos = comma + 1;
    }
    return false;
}

// The client asks for the connection to end after this request (HTTP/1.0 unless keep-alive).
bool client_closes(const Request& req) {
    const std::string connection = req.get_header_value("Connection");
    if (lists_token(connection, "close")) {
        return true;
    }
    return req.version == "HTTP/1.0" && !lists_token(connection, "keep-alive");
}

}  // namespace

bool Connection::promote() { return gate_ == nullptr || gate_->promote(ticket_, fd_); }

ConnectionGate::Promotion Connection::promote_as(const std::string& identity) {
    return gate_ == nullptr ? ConnectionGate::Promotion::Promoted
                            : gate_->promote(ticket_, fd_, identity);
}

void Connection::set_idle(bool idle) const {
    if (gate_) {
        gate_->set_idle(ticket_, idle);
    } else if (pool_) {
        pool_->set_idle(slot_, idle);
    }
}

Connection* current_connection() { return t_connection; }

std::string size_text(std::size_t bytes) {
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) {
        return fmt::format("{} MiB", bytes >> 20);
    }
    if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) {
        return fmt::format("{} KiB", bytes >> 10);
    }
    return fmt::format("{} bytes", bytes);
}

struct Listener::Pools {
    explicit Pools(const ListenerLimits& limits)
        : peers(limits.max_authenticated_connections, shut),
          gate(limits.max_unauthenticated_connections, limits.max_authenticated_connections,
               shut, limits.max_connections_per_identity) {}
    // Unix socket: per peer uid; TCP: the unauthenticated and the authenticated.
    PeerSlots peers;
    ConnectionGate gate;
};

Listener::Listener(Transport transport, ListenerLimits limits)
    : transport_(transport),
      limits_(limits),
      pools_(std::make_unique<Pools>(limits)),
      threads_(std::make_unique<ConnectionThreads>(limits.max_threads)) {}

Listener::~Listener() {
    stop();
    threads_->shutdown();
    std::lock_guard lock(mu_);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        listen_fd_ = -1;
    }
}

void Listener::set_admission(Admission admission) { admission_ = std::move(admission); }

Result<int> Listener::bind_tcp(const std::string& host, int port) {
    auto bound = listen_tcp(host, port);
    if (!bound) {
        return tl::unexpected(bound.error());
    }
    std::lock_guard lock(mu_);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
    }
    listen_fd_ = bound->fd;
    return bound->port;
}

Result<void> Listener::bind_unix(const std::string& path) {
    auto fd = listen_unix(path);
    if (!fd) {
        return tl::unexpected(fd.error());
    }
    std::lock_guard lock(mu_);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
    }
    listen_fd_ = *fd;
    return {};
}

void Listener::stop() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (listen_fd_ < 0) {
        return;
    }
    if (serving_) {
        ::shutdown(listen_fd_, SHUT_RDWR);  // the accept loop sees it and closes the socket
    } else {
        ::close(listen_fd_);
        listen_fd_ = -1;
    }
}

void Listener::listen_after_bind() {
    int fd = -1;
    {
        std::lock_guard lock(mu_);
        if (stopping_ || listen_fd_ < 0) {
            return;
        }
        serving_ = true;
        fd = listen_fd_;
    }
    while (!stopping_) {
        if (!wait_ready(fd, POLLIN, 100)) {
            continue;
        }
        const int conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            continue;
        }
        threads_->enqueue([this, conn] { serve_connection(conn); });
    }
    {
        std::lock_guard lock(mu_);
        ::close(listen_fd_);
        listen_fd_ = -1;
        serving_ = false;
    }
    threads_->shutdown();  // every accepted connection answered or closed
}

void Listener::serve_connection(int fd) {
    Connection conn;
    conn.fd_ = fd;
    struct Scope {
        Connection& conn;
        ~Scope() { t_connection = nullptr; }
    } scope{conn};
    if (transport_ == Transport::Tcp) {
        // Who this is shows only in its request: it waits among the unauthenticated.
        conn.gate_ = &pools_->gate;
        conn.ticket_ = pools_->gate.enter(fd);
        t_connection = &conn;
        serve(fd, conn);
        t_connection = nullptr;
        pools_->gate.leave(conn.ticket_);  // before the descriptor is closed (eviction)
        ::shutdown(fd, SHUT_RDWR);
        ::close(fd);
        return;
    }
    std::int64_t key = -2;
    if (auto peer = peer_credentials(fd)) {
        conn.peer_ = *peer;
        key = peer->uid;
    } else {
        conn.peer_error_ = peer.error().message;
    }
    SlotPool& pool = pools_->peers.of(key);
    if (const std::optional<std::uint64_t> slot = pool.take(fd)) {
        conn.pool_ = &pool;
        conn.slot_ = *slot;
        t_connection = &conn;
        serve(fd, conn);
        t_connection = nullptr;
        pool.give_back(*slot);
    } else {
        refuse(fd, 429,
               fmt::format("too many connections from {} at once (at most {}, each in the "
                           "middle of a request); retry in a moment",
                           conn.peer_ ? fmt::format("uid {}", conn.peer_->uid)
                                      : std::string("an unidentified peer"),
                           limits_.max_authenticated_connections));
    }
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
}

// Requests on one connection until it closes, idles past keep_alive_s or the server stops.
void Listener::serve(int fd, Connection& conn) {
    SocketReader in(fd, limits_.read_timeout_s * 1000);
    for (std::size_t served = 0; served < kMaxRequestsPerConnection && next_request(in);
         ++served) {
        conn.set_idle(false);
        if (!serve_one(in, conn, served + 1 == kMaxRequestsPerConnection)) {
            break;
        }
        conn.set_idle(true);
    }
    if (conn.close_after_) {
        finish_answer(fd);
    }
}

// Waits for the next request's first byte in short steps, so stop() need not wait out every
// idle keep-alive connection.
bool Listener::next_request(SocketReader& in) const {
    if (!in.pending().empty()) {
        return true;  // sent right after the last one
    }
    const auto until = Clock::now() + std::chrono::seconds(limits_.keep_alive_s);
    while (!stopping_) {
        const int left = millis_until(until);
        if (wait_ready(in.fd(), POLLIN, std::min(left, 100))) {
            return true;
        }
        if (left == 0) {
            return false;
        }
    }
    return false;
}

bool Listener::answer(int fd, const Request& req, Response& res, bool close) const {
    finish(req, res);
    WriteOptions w;
    w.head_only = req.method == "HEAD";
    w.close = close;
    w.keep_alive_s = limits_.keep_alive_s;
    return send_all(fd, serialize_response(res, w), limits_.read_timeout_s * 1000);
}

// One request: its head within head_timeout_s and max_head_bytes, admission, its body within
// request_timeout_s of its first byte and max_body_bytes, the route, the answer. False when the
// connection is to end.
bool Listener::serve_one(SocketReader& in, Connection& conn, bool last) {
    const int fd = in.fd();
    const auto started = Clock::now();
    const auto head_deadline = started + std::chrono::seconds(limits_.head_timeout_s);
    const auto deadline = started + std::chrono::seconds(limits_.request_timeout_s);
    std::size_t end = std::string_view::npos;
    while ((end = head_end(in.pending())) == std::string_view::npos) {
        if (in.pending().size() > limits_.max_head_bytes) {
            break;
        }
        const SocketReader::Got got = in.fill(head_deadline);
        if (got == SocketReader::Got::Closed) {
            return false;
        }
        if (got == SocketReader::Got::Timeout) {
            refuse(fd, 408, fmt::format("the request line and headers did not come within {} s",
                                        Clock::now() >= head_deadline ? limits_.head_timeout_s
                                                                      : limits_.read_timeout_s));
            return false;
        }
    }
    if (end == std::string_view::npos || end > limits_.max_head_bytes) {
        refuse(fd, 431, fmt::format("the request line and headers are larger than {} bytes",
                                    limits_.max_head_bytes));
        return false;
    }
    Request req;
    Response res;
    std::optional<ParseFailure> failed = parse_head(in.pending().substr(0, end), req);
    in.consume(end);
    FramingResult framing;
    if (!failed) {
        framing = body_framing(req.headers);
        failed = framing.failure;
    }
    if (failed) {
        res.status = failed->status;
        req.parse_error = failed->reason;
        conn.close_after_answer();  // what else it sent is read and dropped, not reset
        answer(fd, req, res, true);
        return false;
    }
    const BodyFraming& body = framing.framing;
    const bool has_body = body.kind == BodyFraming::Kind::Chunked ||
                          (body.kind == BodyFraming::Kind::Length && body.length > 0);
    req.has_body = has_body;
    bool close = last || client_closes(req) || stopping_;

    if (admission_ && admission_(req, res, conn) == HandlerResponse::Handled) {
        // An unread body would be taken for the next request: the connection ends with it.
        close = close || conn.closing() || has_body;
        return answer(fd, req, res, close) && !close;
    }
    if (body.kind == BodyFraming::Kind::Length && body.length > limits_.max_body_bytes) {
        if (limits_.refuse_long_body_unread) {
            conn.close_after_answer();
        } else if (in.take(body.length, deadline, nullptr) != SocketReader::Got::Data) {
            return false;  // read and dropped, so a client that sends it all first gets the answer
        }
        send_json(res, 413,
                  nlohmann::json{{"error", body_too_large_message(limits_.max_body_bytes)}});
        close = close || conn.closing();
        return answer(fd, req, res, close) && !close;
    }
    if (has_body && lists_token(req.get_header_value("Expect"), "100-continue") &&
        !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", limits_.read_timeout_s * 1000)) {
        return false;
    }
    if (body.kind == BodyFraming::Kind::Length) {
        req.body.reserve(static_cast<std::size_t>(body.length));
        const SocketReader::Got got = in.take(body.length, deadline, &req.body);
        if (got == SocketReader::Got::Timeout) {
            refuse(fd, 408, slow_body_message(limits_));
        }
        if (got != SocketReader::Got::Data) {
            return false;
        }
    } else if (body.kind == BodyFraming::Kind::Chunked) {
        ChunkedDecoder decoder(limits_.max_body_bytes);
        for (;;) {
            std::size_t used = 0;
            const ChunkedDecoder::State state = decoder.feed(in.pending(), used, req.body);
            in.consume(used);
            if (state == ChunkedDecoder::State::Done) {
                break;
            }
            if (state == ChunkedDecoder::State::TooLarge) {
                refuse(fd, 413, body_too_large_message(limits_.max_body_bytes));
                return false;
            }
            if (state == ChunkedDecoder::State::Malformed) {
                res.status = 400;
                req.parse_error = "the chunked body is malformed: " + decoder.error();
                conn.close_after_answer();
                answer(fd, req, res, true);
                return false;
            }
            const SocketReader::Got got = in.fill(deadline, 64 << 10);
            if (got == SocketReader::Got::Timeout) {
                refuse(fd, 408, slow_body_message(limits_));
            }
            if (got != SocketReader::Got::Data) {
                return false;
            }
        }
    }
    route(req, res);
    close = close || conn.closing() || stopping_;
    return answer(fd, req, res, close) && !close;
}

}  // namespace carma::http
