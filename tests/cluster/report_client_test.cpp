// The agent's report client (cluster/report_client.h) against fake servers: an answer is capped
// while it is read, whether its length is announced or not, and a normal answer comes through.

#include "cluster/report_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::cluster {
namespace {

using testing::HasSubstr;

constexpr std::size_t k100MiB = std::size_t{100} << 20;

// A server on a loopback port that answers one connection with what `answer` writes.
class FakeServer {
public:
    // `answer(fd)` writes the answer and returns how many bytes of it went out.
    explicit FakeServer(std::function<std::size_t(int fd)> answer) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(fd_, 4) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            return;
        }
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this, answer = std::move(answer)] {
            const int conn = ::accept(fd_, nullptr, nullptr);
            if (conn < 0) {
                return;
            }
            std::string in;
            char buf[4096];
            while (in.find("\r\n\r\n") == std::string::npos) {  // the request's head
                const ssize_t n = ::recv(conn, buf, sizeof buf, 0);
                if (n <= 0) {
                    break;
                }
                in.append(buf, static_cast<std::size_t>(n));
            }
            sent_ = answer(conn);
            ::close(conn);
        });
    }
    ~FakeServer() {
        if (thread_.joinable()) {
            thread_.join();
        }
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    int port() const { return port_; }
    // What the answer had sent when the client stopped reading (after the client is done).
    std::size_t sent() {
        if (thread_.joinable()) {
            thread_.join();
        }
        return sent_;
    }

private:
    int fd_ = -1;
    int port_ = 0;
    std::thread thread_;
    std::atomic<std::size_t> sent_{0};
};

// Writes `head`, then `piece` again and again until `total` bytes of body or the client is gone.
std::size_t stream(int fd, const std::string& head, const std::string& piece, std::size_t total) {
    std::size_t sent = 0;
    if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
        return 0;
    }
    while (sent < total) {
        const ssize_t n = ::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL);
        if (n <= 0) {
            break;
        }
        sent += static_cast<std::size_t>(n);
    }
    return sent;
}

// This test verifies that an answer announcing 100 MiB is refused on its head, with an error
// that names the address and the limit, and that the client stops reading it: the server
// cannot send it all.
TEST(ReportClient, AnAnnouncedHugeAnswerIsRefusedUnread) {
    FakeServer server([](int fd) {
        return stream(fd,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(k100MiB) + "\r\n\r\n",
                      std::string(64 << 10, ' '), k100MiB);
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), 1 << 20);
    auto answer = client.post("carma1 token x", "{}", "application/json");
    ASSERT_FALSE(answer) << "a 100 MiB answer was read, status " << answer->status;
    EXPECT_EQ(answer.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(answer.error().message, HasSubstr("larger than an agent reads"));
    EXPECT_THAT(answer.error().message, HasSubstr("1 MiB"));
    EXPECT_THAT(answer.error().message,
                HasSubstr("127.0.0.1:" + std::to_string(server.port())));
    EXPECT_LT(server.sent(), k100MiB);
}

// This test verifies that an answer without a length (chunked, endless) is cut off at the limit
// as it is read.
TEST(ReportClient, AnEndlessChunkedAnswerIsCutOffAtTheLimit) {
    FakeServer server([](int fd) {
        const std::string chunk(64 << 10, 'x');
        return stream(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                      "10000\r\n" + chunk + "\r\n", k100MiB);
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), 1 << 20);
    auto answer = client.post("carma1 token x", "{}", "application/json");
    ASSERT_FALSE(answer) << "an endless answer was read, status " << answer->status;
    EXPECT_THAT(answer.error().message, HasSubstr("larger than an agent reads"));
    EXPECT_LT(server.sent(), k100MiB);
}

// This test verifies that an answer within the limit comes through whole, with its status, its
// authentication header and its body, and that a port nobody listens on is an Io error
// naming it.
TEST(ReportClient, AnAnswerWithinTheLimitComesThrough) {
    const std::string body(1000, 'a');
    FakeServer server([&](int fd) {
        return stream(fd,
                      "HTTP/1.1 200 OK\r\nX-Carma-Auth: carma1 token ts=1 mac=2\r\n"
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n",
                      body, body.size());
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), body.size());
    auto answer = client.post("carma1 token x", "{}", "application/json");
    ASSERT_TRUE(answer) << answer.error().message;
    EXPECT_EQ(answer->status, 200);
    EXPECT_EQ(answer->auth_header, "carma1 token ts=1 mac=2");
    EXPECT_EQ(answer->body, body);

    ReportClient nobody("127.0.0.1", 1, kMaxAnswerBytes, 2, 2);
    auto unreachable = nobody.post("carma1 token x", "{}", "application/json");
    ASSERT_FALSE(unreachable);
    EXPECT_EQ(unreachable.error().code, ErrorCode::Io);
    EXPECT_THAT(unreachable.error().message, HasSubstr("cannot reach the server at 127.0.0.1:1"));
}

// This test verifies that a head of endless header lines (each short, so no line limit applies)
// is refused once it has more lines than an answer carries, and the rest is not read.
TEST(ReportClient, EndlessHeaderLinesAreRefused) {
    FakeServer server([](int fd) {
        return stream(fd, "HTTP/1.1 200 OK\r\n", "X-Pad: 1\r\n", k100MiB);
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), 1 << 20);
    auto answer = client.post("carma1 token x", "{}", "application/json");
    ASSERT_FALSE(answer) << "endless headers were read, status " << answer->status;
    EXPECT_EQ(answer.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(answer.error().message, HasSubstr("larger than an agent reads"));
    EXPECT_LT(server.sent(), k100MiB);
}

// This test verifies that an answer trickled a byte at a time, each byte within the read
// timeout, is given up on as a whole instead of holding the agent as long as it goes on.
TEST(ReportClient, ATrickledAnswerIsGivenUpOn) {
    std::atomic<bool> stop{false};
    FakeServer server([&](int fd) {
        const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
        std::size_t sent = 0;
        for (char c : head + "0123456789") {
            if (stop || ::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
                break;
            }
            ++sent;
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
        }
        return sent;
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), 1 << 20, 1, 1);
    auto answer = client.post("carma1 token x", "{}", "application/json");
    stop = true;
    ASSERT_FALSE(answer) << "a trickled answer was waited for to its end";
    EXPECT_EQ(answer.error().code, ErrorCode::Io);
    EXPECT_THAT(answer.error().message, HasSubstr("no answer in time"));
}

// This test verifies that a chunked answer within the limit comes through whole.
TEST(ReportClient, AChunkedAnswerComesThrough) {
    FakeServer server([](int fd) {
        return stream(fd, "HTTP/1.1 201 Created\r\ntransfer-encoding: Chunked\r\n\r\n",
                      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 1);
    });
    ASSERT_GT(server.port(), 0);
    ReportClient client("127.0.0.1", server.port(), 1 << 20);
    auto answer = client.post("carma1 token x", "{}", "application/json");
    ASSERT_TRUE(answer) << answer.error().message;
    EXPECT_EQ(answer->status, 201);
    EXPECT_EQ(answer->body, "hello world");
}

}  // namespace
}  // namespace carma::cluster
