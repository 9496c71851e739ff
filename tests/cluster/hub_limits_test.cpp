// The agents' port (cluster/hub.h) against senders that are not agents, and against a node that
// holds the token but misbehaves: bodies refused unread, credentials checked on the head, slow
// connections that cannot starve a real node, a per-node report rate, JSON errors for any bytes.
// HubLimits.*: senders without the token; RogueNode.*: senders with it.

#include "cluster/hub.h"
#include "cluster/reports.h"

#include "cluster/authenticator.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

namespace carma::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

constexpr const char* kToken = "0123456789abcdef";

// A report POSTed as the agent of `node` would: signed, and the signature fresh each time.
httplib::Result post(httplib::Client& c, const std::string& node, const std::string& body) {
    const httplib::Headers headers{
        {std::string(auth::kAuthHeader), signed_header(node, body, kToken)}};
    return c.Post("/agent/v1/report", headers, body, "application/json");
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (fd >= 0) {
            ::close(fd);
        }
        return -1;
    }
    return fd;
}

struct Answer {
    int status = -1;
    std::string head;
    std::string body;
};

// One complete HTTP answer at the start of `in`, if it is all there.
std::optional<Answer> parse_answer(const std::string& in) {
    const std::size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos || in.size() < 12) {
        return std::nullopt;
    }
    Answer a;
    a.head = in.substr(0, end);
    a.status = std::stoi(in.substr(9, 3));
    std::string lower = a.head;
    for (char& c : lower) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    std::size_t length = 0;
    if (const std::size_t at = lower.find("content-length:"); at != std::string::npos) {
        length = std::stoul(lower.substr(at + 15));
    }
    if (in.size() < end + 4 + length) {
        return std::nullopt;
    }
    a.body = in.substr(end + 4, length);
    return a;
}

// What a client gets that sends `head` and then `body_bytes` of body (chunked or not) as fast
// as the server takes them, reading all the while: the answer, and how much it had sent.
struct Streamed {
    std::optional<Answer> answer;
    std::size_t sent = 0;
    std::string error;
};

Streamed stream_request(int port, const std::string& head, std::size_t body_bytes, bool chunked) {
    Streamed out;
    const int fd = connect_to(port);
    if (fd < 0) {
        out.error = "cannot connect";
        return out;
    }
    std::string piece(64 << 10, ' ');
    if (chunked) {
        piece = "10000\r\n" + piece + "\r\n";
    }
    std::string pending = head;
    std::size_t body_sent = 0;
    bool can_write = true;
    std::string in;
    for (;;) {
        if (pending.empty() && body_sent < body_bytes) {
            pending = piece;
            body_sent += 64 << 10;
        }
        const bool writing = can_write && !pending.empty();
        pollfd p{fd, static_cast<short>(POLLIN | (writing ? POLLOUT : 0)), 0};
        if (::poll(&p, 1, 20000) <= 0) {
            out.error = "nothing happened for 20 s";
            break;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[4096];
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) {
                out.error = n == 0 ? "closed" : std::strerror(errno);
                break;
            }
            in.append(buf, static_cast<std::size_t>(n));
            if ((out.answer = parse_answer(in))) {
                break;
            }
            continue;
        }
        if (p.revents & POLLOUT) {
            const ssize_t n =
                ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                can_write = false;  // cut off: what the server said may still be there to read
            } else if (n > 0) {
                out.sent += static_cast<std::size_t>(n);
                pending.erase(0, static_cast<std::size_t>(n));
            }
        }
    }
    ::close(fd);
    return out;
}

std::string post_head(const std::string& auth, const std::string& length_or_chunked) {
    std::string h = "POST /agent/v1/report HTTP/1.1\r\nHost: server\r\n"
                    "Content-Type: application/json\r\n";
    if (!auth.empty()) {
        h += std::string(auth::kAuthHeader) + ": " + auth + "\r\n";
    }
    h += length_or_chunked + "\r\n\r\n";
    return h;
}

class HubLimitsBase : public testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               fs::path("carma-hub-limits-" + std::to_string(::getpid()) + "-" +
                        testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        hub_.reset();
        fs::remove_all(dir_);
    }

    Hub& start(const std::function<void(HubOptions&)>& adjust = nullptr) {
        HubOptions o;
        o.token = kToken;
        o.state_dir = dir_.string();
        if (adjust) {
            adjust(o);
        }
        auto h = Hub::create(std::move(o));
        if (!h) {
            ADD_FAILURE() << h.error().message;
            std::abort();
        }
        hub_ = std::move(*h);
        auto listening = hub_->listen();
        if (!listening) {
            ADD_FAILURE() << listening.error().message;
            std::abort();
        }
        const std::string address = hub_->address();
        port_ = std::stoi(address.substr(address.rfind(':') + 1));
        return *hub_;
    }

    std::unique_ptr<httplib::Client> agent() const {
        auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
        c->set_read_timeout(20, 0);
        c->set_keep_alive(true);
        return c;
    }

    fs::path dir_;
    std::unique_ptr<Hub> hub_;
    int port_ = 0;
};

class HubLimits : public HubLimitsBase {};
class RogueNode : public HubLimitsBase {};

constexpr std::size_t k200MiB = std::size_t{200} << 20;

// This test verifies that a sender without the token that announces and streams a 200 MiB body
// is answered 401 before it has sent a tenth of it: the server never reads the body.
TEST_F(HubLimits, HugeBodyWithoutTokenIsRefusedUnread) {
    start();
    const Streamed s = stream_request(
        port_, post_head("", "Content-Length: " + std::to_string(k200MiB)), k200MiB, false);
    ASSERT_TRUE(s.answer) << "no answer: " << s.error << " after " << s.sent << " bytes";
    EXPECT_THAT(s.answer->status, testing::AnyOf(401, 413)) << s.answer->body;
    EXPECT_TRUE(json::accept(s.answer->body)) << s.answer->body;
    EXPECT_LT(s.sent, k200MiB / 10) << "the answer came only after the body was sent";
}

// This test verifies that a request without a token and one with a wrong token are answered
// 401 on their head alone: the body they announce is never sent, and the answer still comes
// (waiting for the body would take the 20 s read timeout set here).
TEST_F(HubLimits, TokenlessAndWrongTokenAreRefusedBeforeTheBody) {
    start([](HubOptions& o) {
        o.limits.read_timeout_s = 20;
        o.limits.request_timeout_s = 60;
    });
    const std::string body(1000, ' ');
    for (const std::string& auth : {std::string(), std::string("Bearer wrong-token-0123456789"),
                                   signed_header("n1", body, "another-servers-token-0000")}) {
        const int fd = connect_to(port_);
        ASSERT_GE(fd, 0);
        const std::string head = post_head(auth, "Content-Length: 1000");
        ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(head.size()));
        std::string in;
        std::optional<Answer> a;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!a && std::chrono::steady_clock::now() < until) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 500) <= 0) {
                continue;
            }
            char buf[4096];
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) {
                break;
            }
            in.append(buf, static_cast<std::size_t>(n));
            a = parse_answer(in);
        }
        ::close(fd);
        ASSERT_TRUE(a) << "'" << auth << "': no answer before the body; got: " << in;
        EXPECT_EQ(a->status, 401) << a->body;
        EXPECT_TRUE(json::accept(a->body)) << a->body;
    }
    EXPECT_TRUE(hub_->nodes().empty());
}

// This test verifies that error answers are JSON whatever bytes the request held: a body of
// invalid UTF-8, a report whose node name is not UTF-8, a path that is not, with and without
// the token.
TEST_F(HubLimits, ErrorRepliesAreJsonForInvalidUtf8) {
    start();
    auto c = agent();
    for (const std::string& body : {std::string("\xff\xfe{\"node\": 1}"),
                                   std::string("{\"node\": \"n\xc3\x28\"}"),
                                   std::string("{\"node\": \"\xed\xa0\x80\", \"version\": 1"),
                                   std::string("[\"\xc0\xaf\"]")}) {
        auto r = post(*c, "n1", body);
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        EXPECT_EQ(r->status, 400) << r->body;
        EXPECT_TRUE(json::accept(r->body)) << r->body;
        EXPECT_THAT(r->body, HasSubstr("not JSON"));
    }
    for (const std::string& auth : {std::string(), signed_header("n1", "{}", kToken)}) {
        const std::string head = "POST /agent/\xff\xfe/report?x=\xc3 HTTP/1.1\r\nHost: s\r\n" +
                                 (auth.empty() ? std::string()
                                               : std::string(auth::kAuthHeader) + ": " + auth +
                                                     "\r\n") +
                                 "Content-Length: 2\r\n\r\n{}";
        const Streamed s = stream_request(port_, head, 0, false);
        ASSERT_TRUE(s.answer) << s.error;
        EXPECT_EQ(s.answer->status, auth.empty() ? 401 : 404) << s.answer->body;
        EXPECT_TRUE(json::accept(s.answer->body)) << s.answer->body;
    }
    EXPECT_TRUE(hub_->nodes().empty());
}

// This test verifies that nodes.json, the server's record of the nodes' GPUs, is its user's
// alone (mode 0600).
TEST_F(HubLimits, NodesFileIsPrivate) {
    Hub& h = start();
    ASSERT_TRUE(h.handle_report(to_json(report_of("n1", 2))));
    struct stat st {};
    ASSERT_EQ(::stat((dir_ / "nodes.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// This test verifies that a token holder that announces a 200 MiB report is answered 413 before
// it has sent a tenth of it, and that a chunked body (no Content-Length) is cut off at the limit
// as it is read; the node is not taken in either time.
TEST_F(RogueNode, HugeReportIsRefusedUnread) {
    start();
    const Streamed s = stream_request(
        port_,
        post_head(signed_header("n1", "{}", kToken), "Content-Length: " + std::to_string(k200MiB)),
        k200MiB, false);
    ASSERT_TRUE(s.answer) << "no answer: " << s.error << " after " << s.sent << " bytes";
    EXPECT_EQ(s.answer->status, 413) << s.answer->body;
    EXPECT_THAT(s.answer->body, HasSubstr("8 MiB"));
    EXPECT_TRUE(json::accept(s.answer->body)) << s.answer->body;
    EXPECT_LT(s.sent, k200MiB / 10);

    const Streamed chunked = stream_request(
        port_, post_head(signed_header("n1", "{}", kToken), "Transfer-Encoding: chunked"),
        k200MiB, true);
    ASSERT_TRUE(chunked.answer) << "no answer: " << chunked.error << " after " << chunked.sent;
    EXPECT_EQ(chunked.answer->status, 413) << chunked.answer->body;
    EXPECT_TRUE(json::accept(chunked.answer->body)) << chunked.answer->body;
    EXPECT_LT(chunked.sent, k200MiB / 10);
    EXPECT_TRUE(hub_->nodes().empty());
}

// This test verifies that 12 connections without credentials, each sending one header line
// every 3 s (and opening again when dropped), do not keep a real node's reports out: every one
// of its reports, one each 0.2 s, is answered and the node stays up. The head deadline is
// shortened to 4 s so the slow ones are dropped and come back within the test.
TEST_F(RogueNode, SlowConnectionsDoNotSilenceARealNode) {
    start([](HubOptions& o) { o.limits.head_timeout_s = 4; });
    std::atomic<bool> done{false};
    std::atomic<int> slow_lines{0};
    std::vector<std::thread> slow;
    for (int i = 0; i < 12; ++i) {
        slow.emplace_back([&, i] {
            while (!done) {
                const int fd = connect_to(port_);
                if (fd < 0) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    continue;
                }
                std::string line = "POST /agent/v1/report HTTP/1.1\r\n";
                for (int n = 0; !done; ++n) {
                    if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0) {
                        break;  // dropped by the head deadline: open another
                    }
                    ++slow_lines;
                    line = "X-Slow-" + std::to_string(i) + "-" + std::to_string(n) + ": 1\r\n";
                    for (int t = 0; t < 30 && !done; ++t) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    }
                }
                ::close(fd);
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the slow ones are in
    auto c = agent();
    int answered = 0;
    std::vector<std::string> failures;
    for (int i = 0; i < 40; ++i) {
        auto r = post(*c, "real", to_json(report_of("real", 2)).dump());
        if (r && r->status == 200) {
            ++answered;
        } else {
            failures.push_back(r ? std::to_string(r->status) + " " + r->body
                                 : httplib::to_string(r.error()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    done = true;
    for (std::thread& t : slow) {
        t.join();
    }
    EXPECT_EQ(answered, 40) << "first failure: " << (failures.empty() ? "" : failures[0]);
    EXPECT_GT(slow_lines.load(), 12 * 3) << "the slow connections did not run";
    const auto nodes = hub_->nodes();
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].state, "up");
}

int threads_of_this_process() {
    std::error_code ec;
    int n = 0;
    for (fs::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
         it.increment(ec)) {
        ++n;
    }
    return n;
}

// The answer on `fd` if one came within `wait_ms` (or is all there now).
std::optional<Answer> answer_within(int fd, std::string& in, int wait_ms, bool* closed) {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, wait_ms) > 0) {
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) {
            *closed = n == 0 || (errno != EAGAIN && errno != EINTR);
            break;
        }
        in.append(buf, static_cast<std::size_t>(n));
        if (auto a = parse_answer(in)) {
            return a;
        }
    }
    return parse_answer(in);
}

// This test verifies that one node's key cannot take the agents' port from the other nodes (the
// red team's attack: signed heads announcing 1 MiB, the body trickled a byte at a time, new
// connections all the while): past its few connections the node's next ones are refused on their
// head (429, naming the per-node cap), its trickling ones are cut off by the request deadline
// (408), another node's every report is answered, and the server's threads stay few. The total
// cap is lowered to 8 so that without a per-node cap the slow node would hold every slot.
TEST_F(RogueNode, OneNodesSlowConnectionsCannotSilenceTheOthers) {
    start([](HubOptions& o) {
        o.limits.max_authenticated_connections = 8;
        o.limits.request_timeout_s = 3;
    });
    const int threads_before = threads_of_this_process();
    int threads_most = threads_before;
    struct Slow {
        int fd;
        std::string in;
    };
    std::vector<Slow> held;
    int refused_per_node = 0;
    int cut_off = 0;
    std::string refusal;
    std::vector<std::string> failures;
    auto real = agent();
    const std::string megabyte = "Content-Length: " + std::to_string(1 << 20);
    // Rounds a tenth of a second apart, until the deadline has cut a trickle off (3 s).
    for (int round = 0; round < 30 || (cut_off == 0 && round < 400); ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        // A new slow connection: a signed head announcing 1 MiB, then nothing yet.
        const int fd = connect_to(port_);
        ASSERT_GE(fd, 0);
        const std::string head = post_head(signed_header("slow", "{}", kToken), megabyte);
        ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(head.size()));
        std::string in;
        bool closed = false;
        if (auto a = answer_within(fd, in, 200, &closed)) {
            if (a->status == 429) {
                ++refused_per_node;
                refusal = a->body;
            } else {
                failures.push_back("the slow node's head got " + std::to_string(a->status));
            }
            ::close(fd);
        } else {
            held.push_back(Slow{fd, std::move(in)});
        }
        // The held ones trickle a byte each; those the server cut off are counted and closed.
        for (auto it = held.begin(); it != held.end();) {
            (void)::send(it->fd, " ", 1, MSG_NOSIGNAL);
            bool gone = false;
            const std::optional<Answer> a = answer_within(it->fd, it->in, 0, &gone);
            if (a || gone) {
                cut_off += a && a->status == 408 ? 1 : 0;
                ::close(it->fd);
                it = held.erase(it);
            } else {
                ++it;
            }
        }
        auto r = post(*real, "real", to_json(report_of("real", 2)).dump());
        if (!r || r->status != 200) {
            failures.push_back(r ? std::to_string(r->status) + " " + r->body
                                 : httplib::to_string(r.error()));
        }
        threads_most = std::max(threads_most, threads_of_this_process());
    }
    for (const Slow& s : held) {
        ::close(s.fd);
    }
    EXPECT_TRUE(failures.empty()) << failures.size() << " reports of the other node failed, "
                                  << "the first: " << failures.front();
    EXPECT_GT(refused_per_node, 0) << "the slow node was never refused a connection";
    EXPECT_THAT(refusal, HasSubstr("node slow has too many connections open at once"));
    EXPECT_GT(cut_off, 0) << "no trickling connection was cut off by the request deadline";
    // Its few connections, the other node's one, and a few being closed: not one per attempt.
    EXPECT_LE(threads_most - threads_before,
              static_cast<int>(agent_port_limits().max_connections_per_identity) + 6);
    const auto nodes = hub_->nodes();
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].node, "real");
    EXPECT_EQ(nodes[0].state, "up");
}

// This test verifies the per-node report rate: a node that sends reports back to back is
// answered 429 (JSON, with Retry-After) once its burst is spent, and a refused report is not
// taken (its new GPUs do not appear), while another node at a normal pace is never refused.
TEST_F(RogueNode, OverFastSenderGets429) {
    // A burst of 5 and almost no refill: the sixth report in a row is refused whatever the
    // machine's speed.
    start([](HubOptions& o) {
        o.report_burst = 5;
        o.report_rate_per_s = 0.01;
    });
    auto c = agent();
    int accepted = 0;
    std::optional<httplib::Response> refused;
    for (int i = 0; i < 30 && !refused; ++i) {
        auto r = post(*c, "fast", to_json(report_of("fast", 1)).dump());
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        if (r->status == 429) {
            refused = *r;
        } else {
            ASSERT_EQ(r->status, 200) << r->body;
            ++accepted;
        }
    }
    ASSERT_TRUE(refused) << "30 reports in a row were all taken";
    EXPECT_EQ(accepted, 5);
    EXPECT_TRUE(json::accept(refused->body)) << refused->body;
    EXPECT_THAT(refused->body, HasSubstr("node fast reports faster"));
    EXPECT_FALSE(refused->get_header_value("Retry-After").empty());
    auto more = post(*c, "fast", to_json(report_of("fast", 3)).dump());
    ASSERT_TRUE(more);
    EXPECT_EQ(more->status, 429);
    EXPECT_EQ(hub_->gpus().size(), 1u) << "a refused report was taken";

    auto calm = agent();
    for (int i = 0; i < 3; ++i) {
        auto r = post(*calm, "calm", to_json(report_of("calm", 1)).dump());
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        EXPECT_EQ(r->status, 200) << r->body;
    }
    EXPECT_EQ(hub_->gpus().size(), 2u);
}

// This test verifies the default rate: at least 10 reports a second, and 20 times the rate the
// report period asks for, so an agent at the server's pace (a report per period) never meets it.
TEST_F(RogueNode, DefaultRateFollowsTheReportPeriod) {
    start([](HubOptions& o) { o.report_period_s = 0.01; });  // --time-scale 100
    auto c = agent();
    for (int i = 0; i < 60; ++i) {
        auto r = post(*c, "quick", to_json(report_of("quick", 1)).dump());
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        ASSERT_EQ(r->status, 200) << "report " << i << ": " << r->body;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

}  // namespace
}  // namespace carma::cluster
