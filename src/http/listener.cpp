#include "http/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "http/json_reply.h"

namespace carma::http {

namespace {

thread_local Connection* t_connection = nullptr;

int millis_until(std::chrono::steady_clock::time_point t) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        t - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

// Whether fd becomes ready for `events` within timeout_ms.
bool wait_ready(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    int r = 0;
    do {
        r = ::poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    return r > 0;
}

void shut(int fd) { ::shutdown(fd, SHUT_RDWR); }

// Connection slots per peer uid on the Unix socket (connection_gate.h: a newcomer takes the
// place of that uid's connection idle longest; refused only when none is idle).
class PeerSlots {
public:
    explicit PeerSlots(std::size_t per_peer) : per_peer_(per_peer) {}

    SlotPool& of(std::int64_t key) {
        std::lock_guard lock(mu_);
        auto it = pools_.find(key);
        if (it == pools_.end()) {
            it = pools_.emplace(key, std::make_unique<SlotPool>(per_peer_, shut)).first;
        }
        return *it->second;
    }

private:
    std::mutex mu_;
    // A pool per uid that ever connected: a machine has few.
    std::map<std::int64_t, std::unique_ptr<SlotPool>> pools_;
    std::size_t per_peer_;
};

// One thread per open connection, started on demand up to `max` and then kept. httplib's own
// pool is fixed at about the number of cores, so a handful of slow clients could hold every
// thread and leave the next request waiting in the queue.
class ConnectionThreads final : public httplib::TaskQueue {
public:
    explicit ConnectionThreads(std::size_t max) : max_(max) {}
    ~ConnectionThreads() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        std::lock_guard lock(mu_);
        jobs_.push_back(std::move(fn));
        if (idle_ < jobs_.size() && threads_.size() < max_) {
            threads_.emplace_back([this] { work(); });
        }
        cv_.notify_one();
    }

    void shutdown() override {
        std::vector<std::thread> threads;
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
            threads.swap(threads_);
        }
        cv_.notify_all();
        for (std::thread& t : threads) {
            t.join();
        }
    }

private:
    void work() {
        std::unique_lock lock(mu_);
        for (;;) {
            ++idle_;
            cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            --idle_;
            if (jobs_.empty()) {
                return;  // stopping, and every accepted connection has been served
            }
            std::function<void()> fn = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            fn();
            lock.lock();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    std::size_t idle_ = 0;
    std::size_t max_;
    bool stopping_ = false;
};

// After the last answer on a connection whose client may still be sending (a body the server
// refused to read): no more to send, and what still comes is read and dropped for a moment, so
// the client gets the answer instead of a reset (or a SIGPIPE while it writes).
void finish_answer(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
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

// Answers and closes a connection httplib will not see (too many connections, head or body
// too large).
void refuse(int fd, int status, const char* reason, const std::string& message) {
    const std::string body = json_text(nlohmann::json{{"error", message}});
    const std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\n"
                                        "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                                        status, reason, body.size(), body);
    std::size_t sent = 0;
    while (sent < out.size() && wait_ready(fd, POLLOUT, 1000)) {
        const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            break;
        }
        sent += static_cast<std::size_t>(n);
    }
    finish_answer(fd);
}

std::string body_too_large_message(std::size_t limit) {
    return fmt::format("the request body is too large (the limit is {})", size_text(limit));
}

// Chunk sizes and their line ends, on top of a body without Content-Length.
constexpr std::size_t kChunkFramingSlack = 64 << 10;

}  // namespace

// A connection's byte stream with the limits httplib's SocketStream lacks: a deadline for a
// request's head and another for the whole request (a per-read timeout alone lets a client that
// sends a byte every few seconds hold a thread forever), a cap on the head's size, and one on a
// body that has no Content-Length (httplib 0.11 limits only a body with one).
class ConnectionStream final : public httplib::Stream {
public:
    ConnectionStream(int fd, const ListenerLimits& limits, bool unix_socket,
                     const Connection& connection)
        : fd_(fd), limits_(limits), unix_(unix_socket), connection_(connection) {}

    // Called before each request on the connection.
    void begin_request() {
        in_head_ = true;
        head_bytes_ = 0;
        line_bytes_ = 0;
        lines_ = 0;
        previous_ = 0;
        body_bytes_ = 0;
        max_body_bytes_ = limits_.max_body_bytes + kChunkFramingSlack;
        started_ = std::chrono::steady_clock::now();
        deadline_ = started_ + std::chrono::seconds(limits_.head_timeout_s);
    }

    // A body whose Content-Length httplib reads and drops to answer 413 after it.
    void allow_body_bytes(std::size_t n) { max_body_bytes_ = n; }

    bool head_too_large() const { return head_too_large_; }
    bool body_too_large() const { return body_too_large_; }

    bool is_readable() const override {
        return pos_ < len_ ||
               wait_ready(fd_, POLLIN,
                          std::min(limits_.read_timeout_s * 1000, millis_until(deadline_)));
    }

    bool is_writable() const override {
        return wait_ready(fd_, POLLOUT, limits_.read_timeout_s * 1000);
    }

    ssize_t read(char* ptr, size_t size) override {
        if (head_too_large_ || body_too_large_) {
            return -1;
        }
        if (pos_ == len_) {
            if (!is_readable()) {
                return -1;
            }
            ssize_t n = 0;
            do {
                n = ::recv(fd_, buf_, sizeof buf_, 0);
            } while (n < 0 && errno == EINTR);
            if (n <= 0) {
                return n;
            }
            pos_ = 0;
            len_ = static_cast<std::size_t>(n);
        }
        std::size_t n = std::min(size, len_ - pos_);
        if (in_head_) {
            n = scan_head(n);
            if (head_too_large_) {
                return -1;
            }
        } else {
            if (n > max_body_bytes_ - body_bytes_) {
                body_too_large_ = true;
                return -1;
            }
            body_bytes_ += n;
        }
        std::memcpy(ptr, buf_ + pos_, n);
        pos_ += n;
        return static_cast<ssize_t>(n);
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (head_too_large_ || body_too_large_) {
            // httplib answers a request it could not read with 400; the listener answers 431
            // or 413 instead.
            return static_cast<ssize_t>(size);
        }
        if (!is_writable()) {
            return -1;
        }
        ssize_t n = 0;
        do {
            n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        return n;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        endpoint(true, ip, port);
    }

    void get_local_ip_and_port(std::string& ip, int& port) const override {
        endpoint(false, ip, port);
    }

    socket_t socket() const override { return fd_; }

private:
    // How many of the next n buffered bytes still belong to the head (all of them, or up to the
    // blank line that ends it); marks the head too large past max_head_bytes.
    std::size_t scan_head(std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            const char c = buf_[pos_ + i];
            if (++head_bytes_ > limits_.max_head_bytes) {
                head_too_large_ = true;
                return i;
            }
            if (c != '\n') {
                ++line_bytes_;
                previous_ = c;
                continue;
            }
            const bool blank = line_bytes_ == 0 || (line_bytes_ == 1 && previous_ == '\r');
            if (blank && lines_ > 0) {
                in_head_ = false;
                deadline_ = started_ + std::chrono::seconds(limits_.request_timeout_s);
                return i + 1;
            }
            ++lines_;
            line_bytes_ = 0;
            previous_ = c;
        }
        return n;
    }

    void endpoint(bool peer, std::string& ip, int& port) const {
        ip.clear();
        port = 0;
        if (unix_) {
            if (peer && connection_.peer()) {
                port = connection_.peer()->pid;  // for logs, as httplib itself reports it
            }
            return;
        }
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        auto* sa = reinterpret_cast<sockaddr*>(&addr);
        if ((peer ? ::getpeername(fd_, sa, &len) : ::getsockname(fd_, sa, &len)) != 0) {
            return;
        }
        char text[INET6_ADDRSTRLEN] = {};
        if (addr.ss_family == AF_INET) {
            const auto* in = reinterpret_cast<sockaddr_in*>(&addr);
            ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
            port = ntohs(in->sin_port);
        } else if (addr.ss_family == AF_INET6) {
            const auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
            ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
            port = ntohs(in6->sin6_port);
        }
        ip = text;
    }

    int fd_;
    const ListenerLimits& limits_;
    bool unix_;
    const Connection& connection_;
    char buf_[4096];
    std::size_t pos_ = 0, len_ = 0;
    bool in_head_ = true;
    bool head_too_large_ = false;
    bool body_too_large_ = false;
    std::size_t head_bytes_ = 0, line_bytes_ = 0, lines_ = 0;
    std::size_t body_bytes_ = 0, max_body_bytes_ = 0;
    char previous_ = 0;
    std::chrono::steady_clock::time_point started_{}, deadline_{};
};

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

bool Connection::promote() {
    return gate_ == nullptr || gate_->promote(ticket_, fd_);
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
        : peers(limits.max_authenticated_connections),
          gate(limits.max_unauthenticated_connections, limits.max_authenticated_connections,
               shut) {}
    // Unix socket: per peer uid; TCP: the unauthenticated and the authenticated.
    PeerSlots peers;
    ConnectionGate gate;
};

Listener::Listener(Transport transport, ListenerLimits limits)
    : transport_(transport),
      limits_(limits),
      pools_(std::make_unique<Pools>(limits)) {
    const std::size_t threads = limits_.max_threads;
    new_task_queue = [threads] { return new ConnectionThreads(threads); };
    // Read by httplib for a body with Content-Length (a body without one is counted by
    // ConnectionStream).
    httplib::Server::set_payload_max_length(limits_.max_body_bytes);
    httplib::Server::set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return admit(req, res); });
}

Listener::~Listener() { stop(); }

void Listener::stop() {
    const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) {
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
    }
}

void Listener::set_admission(Admission admission) { admission_ = std::move(admission); }

httplib::Server::HandlerResponse Listener::admit(const httplib::Request& req,
                                                 httplib::Response& res) {
    Connection* conn = t_connection;
    if (conn == nullptr) {
        return HandlerResponse::Unhandled;  // not served by this listener's loop
    }
    if (admission_) {
        if (admission_(req, res, *conn) == HandlerResponse::Handled) {
            // Said in the answer, so that a keep-alive client opens a new connection for its
            // next request instead of writing it into one this end is closing.
            if (conn->closing()) {
                res.set_header("Connection", "close");
            }
            return HandlerResponse::Handled;
        }
    }
    if (!req.has_header("Content-Length")) {
        return HandlerResponse::Unhandled;
    }
    const std::string text = req.get_header_value("Content-Length");
    std::uint64_t length = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
    if (ec != std::errc() || end != text.data() + text.size() ||
        length <= limits_.max_body_bytes) {
        return HandlerResponse::Unhandled;  // httplib reads it, or answers a malformed one
    }
    if (!limits_.refuse_long_body_unread) {
        if (conn->stream_) {
            conn->stream_->allow_body_bytes(std::numeric_limits<std::size_t>::max());
        }
        return HandlerResponse::Unhandled;  // httplib reads and drops it, then answers 413
    }
    send_json(res, 413, nlohmann::json{{"error", body_too_large_message(limits_.max_body_bytes)}});
    conn->close_after_answer();
    res.set_header("Connection", "close");
    return HandlerResponse::Handled;
}

bool Listener::process_and_close_socket(socket_t fd) {
    Connection conn;
    conn.fd_ = fd;
    if (transport_ == Transport::Tcp) {
        // Who this is shows only in its request: it waits among the unauthenticated.
        conn.gate_ = &pools_->gate;
        conn.ticket_ = pools_->gate.enter(fd);
        struct Scope {
            ConnectionGate& gate;
            Connection& conn;
            ~Scope() {
                t_connection = nullptr;
                gate.leave(conn.ticket_);
            }
        } scope{pools_->gate, conn};
        t_connection = &conn;
        const bool ok = serve(fd, conn);
        if (conn.close_after_) {
            finish_answer(fd);
        }
        ::shutdown(fd, SHUT_RDWR);
        ::close(fd);
        return ok;
    }
    std::int64_t key = -2;
    if (auto peer = peer_credentials(fd)) {
        conn.peer_ = *peer;
        key = peer->uid;
    } else {
        conn.peer_error_ = peer.error().message;
    }
    bool ok = false;
    SlotPool& pool = pools_->peers.of(key);
    if (const std::optional<std::uint64_t> slot = pool.take(fd)) {
        conn.pool_ = &pool;
        conn.slot_ = *slot;
        struct Scope {
            SlotPool& pool;
            std::uint64_t slot;
            ~Scope() {
                t_connection = nullptr;
                pool.give_back(slot);
            }
        } scope{pool, *slot};
        t_connection = &conn;
        ok = serve(fd, conn);
        if (conn.close_after_) {
            finish_answer(fd);
        }
    } else {
        refuse(fd, 429, "Too Many Requests",
               fmt::format("too many connections from {} at once (at most {}, each in "
                           "the middle of a request); retry in a moment",
                           conn.peer_ ? fmt::format("uid {}", conn.peer_->uid)
                                      : std::string("an unidentified peer"),
                           limits_.max_authenticated_connections));
    }
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    return ok;
}

// Requests on one connection until it closes, idles past keep_alive_s or the server stops.
bool Listener::serve(int fd, Connection& conn) {
    ConnectionStream stream(fd, limits_, transport_ == Transport::UnixSocket, conn);
    conn.stream_ = &stream;
    struct Scope {
        Connection& conn;
        ~Scope() { conn.stream_ = nullptr; }
    } scope{conn};
    bool ok = false;
    for (std::size_t left = keep_alive_max_count_; left > 0 && next_request(fd); --left) {
        conn.set_idle(false);
        stream.begin_request();
        bool closed = false;
        ok = process_request(stream, left == 1, closed, nullptr);
        if (stream.head_too_large()) {
            refuse(fd, 431, "Request Header Fields Too Large",
                   fmt::format("the request line and headers are larger than {} bytes",
                               limits_.max_head_bytes));
            return false;
        }
        if (stream.body_too_large()) {
            refuse(fd, 413, "Payload Too Large", body_too_large_message(limits_.max_body_bytes));
            return false;
        }
        if (!ok || closed || conn.close_after_) {
            break;
        }
        conn.set_idle(true);
    }
    return ok;
}

// Waits for the next request's first byte in short steps, so stop() need not wait out every
// idle keep-alive connection.
bool Listener::next_request(int fd) const {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(limits_.keep_alive_s);
    while (svr_sock_ != INVALID_SOCKET) {
        const int left = millis_until(until);
        if (wait_ready(fd, POLLIN, std::min(left, 100))) {
            return true;
        }
        if (left == 0) {
            return false;
        }
    }
    return false;
}

}  // namespace carma::http
