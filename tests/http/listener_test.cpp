// The HTTP listener (http/listener.h) over real sockets: binding (TCP port 0, Unix socket),
// keep-alive and pipelining, HEAD, chunked bodies, the answers it makes itself (400, 408, 413,
// 429, 431) and admission before the body.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/listener.h"

namespace carma::http {
namespace {

using testing::HasSubstr;
using testing::StartsWith;

int connect_tcp(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

int connect_unix(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void send_text(int fd, const std::string& s) {
    ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Everything the server sends until it closes or `wait_ms` passes without a byte.
std::string read_all(int fd, int wait_ms = 5000) {
    std::string in;
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, wait_ms) <= 0) {
            return in;
        }
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            return in;
        }
        in.append(buf, static_cast<std::size_t>(n));
    }
}

class ListenerTest : public testing::Test {
protected:
    void start(Listener::Transport transport, ListenerLimits limits = {}) {
        listener_ = std::make_unique<Listener>(transport, limits);
        listener_->Get("/hello", [](const Request& req, Response& res) {
            res.set_content("hello " + req.get_param_value("name"), "text/plain");
        });
        listener_->Post("/echo", [](const Request& req, Response& res) {
            res.set_content(req.body, "application/octet-stream");
        });
        listener_->Get("/who", [](const Request&, Response& res) {
            const Connection* c = current_connection();
            res.set_content(c && c->peer() ? std::to_string(c->peer()->uid) : "none",
                            "text/plain");
        });
        listener_->Get("/stall", [](const Request&, Response& res) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            res.set_content("late", "text/plain");
        });
        if (transport == Listener::Transport::Tcp) {
            auto port = listener_->bind_tcp("127.0.0.1", 0);
            ASSERT_TRUE(port) << port.error().message;
            ASSERT_GT(*port, 0);
            port_ = *port;
        } else {
            path_ = (std::filesystem::temp_directory_path() /
                     ("carma-listener-" + std::to_string(::getpid()) + ".sock"))
                        .string();
            ::unlink(path_.c_str());
            auto bound = listener_->bind_unix(path_);
            ASSERT_TRUE(bound) << bound.error().message;
        }
        thread_ = std::thread([this] { listener_->listen_after_bind(); });
    }
    void TearDown() override {
        if (listener_) {
            listener_->stop();
        }
        if (thread_.joinable()) {
            thread_.join();
        }
        if (!path_.empty()) {
            ::unlink(path_.c_str());
        }
    }
    int connect() { return path_.empty() ? connect_tcp(port_) : connect_unix(path_); }
    // One request on a fresh connection; the whole reply.
    std::string exchange(const std::string& request) {
        const int fd = connect();
        EXPECT_GE(fd, 0);
        send_text(fd, request);
        std::string out = read_all(fd);
        ::close(fd);
        return out;
    }

    std::unique_ptr<Listener> listener_;
    std::thread thread_;
    int port_ = 0;
    std::string path_;
};

// This test verifies keep-alive with pipelined requests on one connection, HTTP/1.0 closing,
// HEAD answered from the GET route without a body, and a chunked body read whole.
TEST_F(ListenerTest, KeepAlivePipeliningHeadAndChunked) {
    start(Listener::Transport::Tcp);
    const int fd = connect();
    ASSERT_GE(fd, 0);
    send_text(fd, "GET /hello?name=a%20b HTTP/1.1\r\nHost: x\r\n\r\n"
                  "HEAD /hello HTTP/1.1\r\n\r\n"
                  "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
                  "POST /echo HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nwxyz");
    const std::string all = read_all(fd);
    ::close(fd);
    EXPECT_THAT(all, StartsWith("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(all, HasSubstr("Content-Length: 9\r\nConnection: keep-alive\r\n"
                               "Keep-Alive: timeout=5\r\n\r\nhello a b"));
    EXPECT_THAT(all, HasSubstr("Content-Length: 6\r\nConnection: keep-alive\r\n"
                               "Keep-Alive: timeout=5\r\n\r\nHTTP/1.1 200 OK"))
        << "HEAD: the GET answer's length, no body";
    EXPECT_THAT(all, HasSubstr("Content-Length: 5\r\nConnection: keep-alive\r\n"
                               "Keep-Alive: timeout=5\r\n\r\nabcde"));
    EXPECT_THAT(all, HasSubstr("Content-Length: 4\r\nConnection: close\r\n\r\nwxyz"));
    const std::string old = exchange("GET /hello HTTP/1.0\r\n\r\n");
    EXPECT_THAT(old, HasSubstr("Connection: close"));
    EXPECT_THAT(exchange("GET /nothing HTTP/1.1\r\nConnection: close\r\n\r\n"),
                StartsWith("HTTP/1.1 404 Not Found\r\n"));
}

// This test verifies that malformed requests get a 400 with a JSON reason (and the connection
// ends), an over-large head 431, an over-large chunked body 413 before all of it is sent, and a
// body of Content-Length above the limit 413 after it is read and dropped.
TEST_F(ListenerTest, MalformedAndOversizedRequests) {
    ListenerLimits limits;
    limits.max_body_bytes = 1000;
    limits.max_head_bytes = 512;
    start(Listener::Transport::Tcp, limits);
    for (const auto& [request, says] : std::vector<std::pair<std::string, std::string>>{
             {"GET / HTTP/1.1\r\nno colon\r\n\r\n", "has no ':'"},
             {"GET /%zz HTTP/1.1\r\n\r\n", "two hexadecimal digits"},
             {"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
              "more than one Content-Length"},
             {"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
              "both Content-Length and Transfer-Encoding"},
             {"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdefff\r\n",
              "more than 16 hexadecimal digits"},
             {"GET /x?a=1?b=2 HTTP/1.1\r\n\r\n", "second '?'"}}) {
        const std::string reply = exchange(request);
        EXPECT_THAT(reply, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << request;
        EXPECT_THAT(reply, HasSubstr("{\"error\":\"malformed request: ")) << request;
        EXPECT_THAT(reply, HasSubstr(says)) << request;
        EXPECT_THAT(reply, HasSubstr("Connection: close")) << request;
    }
    const std::string big_head =
        exchange("GET /hello HTTP/1.1\r\nX-Filler: " + std::string(600, 'a') + "\r\n\r\n");
    EXPECT_THAT(big_head, StartsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    EXPECT_THAT(big_head, HasSubstr("larger than 512 bytes"));

    const int fd = connect();
    send_text(fd, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; ++i) {
        send_text(fd, "190\r\n" + std::string(400, 'x') + "\r\n");  // 1200 bytes in all
    }
    const std::string cut = read_all(fd);
    ::close(fd);
    EXPECT_THAT(cut, StartsWith("HTTP/1.1 413 Payload Too Large\r\n"));
    EXPECT_THAT(cut, HasSubstr("the limit is 1000 bytes"));

    const std::string dropped = exchange(
        "POST /echo HTTP/1.1\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n" +
        std::string(2000, 'y'));
    EXPECT_THAT(dropped, StartsWith("HTTP/1.1 413 Payload Too Large\r\n"));
}

// This test verifies the head deadline: a client that trickles its head is answered 408 and
// dropped when head_timeout_s has passed, however often it sends a byte.
TEST_F(ListenerTest, TrickledHeadMeetsTheDeadline) {
    ListenerLimits limits;
    limits.head_timeout_s = 1;
    start(Listener::Transport::Tcp, limits);
    const int fd = connect();
    const auto began = std::chrono::steady_clock::now();
    const std::string head = "GET /hello HTTP/1.1\r\nX-Slow: 1234567890\r\n";
    std::string got;
    for (char c : head) {
        if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
            break;
        }
        got = read_all(fd, 100);
        if (!got.empty()) {
            break;
        }
    }
    ::close(fd);
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_THAT(got, StartsWith("HTTP/1.1 408 Request Timeout\r\n"));
    EXPECT_LT(took, std::chrono::seconds(3));
}

// This test verifies the Unix socket: the peer's uid reaches the handler, and beyond the
// per-uid cap a connection in the middle of a request makes the next one get 429.
TEST_F(ListenerTest, UnixSocketPeerAndPerUidCap) {
    ListenerLimits limits;
    limits.max_authenticated_connections = 1;
    start(Listener::Transport::UnixSocket, limits);
    EXPECT_THAT(exchange("GET /who HTTP/1.1\r\nConnection: close\r\n\r\n"),
                HasSubstr("\r\n\r\n" + std::to_string(::getuid())));
    const int busy = connect();
    send_text(busy, "GET /stall HTTP/1.1\r\nConnection: close\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string refused = exchange("GET /hello HTTP/1.1\r\n\r\n");
    EXPECT_THAT(refused, StartsWith("HTTP/1.1 429 Too Many Requests\r\n"));
    EXPECT_THAT(refused, HasSubstr("too many connections from uid"));
    EXPECT_THAT(read_all(busy), HasSubstr("late"));
    ::close(busy);
}

// This test verifies admission: it sees the head before the body is read, and a refusal with
// close_after_answer() ends the connection without reading the announced body.
TEST_F(ListenerTest, AdmissionBeforeTheBody) {
    start(Listener::Transport::Tcp);
    listener_->set_admission([](const Request& head, Response& res, Connection& conn) {
        if (head.get_header_value("Authorization") == "yes") {
            return HandlerResponse::Unhandled;
        }
        res.status = 401;
        res.set_content("{\"error\":\"no\"}", "application/json");
        conn.close_after_answer();
        return HandlerResponse::Handled;
    });
    const int fd = connect();
    send_text(fd, "POST /echo HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n");
    const std::string refused = read_all(fd);
    ::close(fd);
    EXPECT_THAT(refused, StartsWith("HTTP/1.1 401 Unauthorized\r\n"));
    EXPECT_THAT(refused, HasSubstr("Connection: close"));
    EXPECT_THAT(exchange("POST /echo HTTP/1.1\r\nAuthorization: yes\r\nContent-Length: 2\r\n"
                         "Connection: close\r\n\r\nok"),
                HasSubstr("\r\n\r\nok"));
}

// This test verifies that stop() before listen_after_bind() has begun ends it at once, and
// that a port taken is an error.
TEST(ListenerStopTest, StopBeforeServing) {
    Listener a(Listener::Transport::Tcp, {});
    auto port = a.bind_tcp("127.0.0.1", 0);
    ASSERT_TRUE(port);
    Listener b(Listener::Transport::Tcp, {});
    EXPECT_FALSE(b.bind_tcp("127.0.0.1", *port));
    a.stop();
    a.listen_after_bind();  // returns at once
    EXPECT_FALSE(b.bind_tcp("no-such-host.invalid", 0));
}

}  // namespace
}  // namespace carma::http
