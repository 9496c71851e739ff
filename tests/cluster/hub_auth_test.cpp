// The agents' port authenticates before it reads: a report without the node's key is refused on
// its header (its body never read), a captured report sent again is refused, and an answer is
// signed for the request it answers (cluster/authenticator.h over a real Hub::listen()).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "cluster/authenticator.h"
#include "cluster/hub.h"
#include "exec/clock.h"

namespace carma::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

constexpr const char* kMaster = "0123456789abcdef0123456789abcdef";

using exec::unix_now;

std::string report_body(const std::string& node) {
    AgentReport r;
    r.node = node;
    r.instance = "i-" + node;
    device::GpuInfo g;
    g.index = 0;
    g.uuid = "GPU-" + node;
    g.name = "A100-40GB (emulated)";
    g.total_mib = 40000;
    r.gpus.push_back(g);
    return to_json(r).dump();
}

class HubAuthTest : public testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("carma-hub-auth-" + std::to_string(::getpid()) + "-" +
                testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        start();
    }
    // A server on the state directory, listening on a new port.
    void start() {
        HubOptions o;
        o.token = kMaster;
        o.state_dir = dir_.string();
        auto h = Hub::create(std::move(o));
        ASSERT_TRUE(h) << h.error().message;
        hub_ = std::move(*h);
        ASSERT_TRUE(hub_->listen());
        port_ = std::stoi(hub_->address().substr(hub_->address().rfind(':') + 1));
    }
    void TearDown() override {
        hub_.reset();
        fs::remove_all(dir_);
    }

    httplib::Result post(const std::string& header, const std::string& body) {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(10, 0);
        httplib::Headers h;
        if (!header.empty()) {
            h.emplace(std::string(auth::kAuthHeader), header);
        }
        return c.Post("/agent/v1/report", h, body, "application/json");
    }

    fs::path dir_;
    std::unique_ptr<Hub> hub_;
    int port_ = 0;
};

// This test verifies a signed report's round trip: taken, and answered with a header the agent
// verifies against its request's nonce (and that a rogue key's agent would refuse).
TEST_F(HubAuthTest, ASignedReportIsTakenAndItsAnswerVerifies) {
    auto agent = auth::token_agent("n1", auth::node_key(kMaster, "n1"));
    ASSERT_TRUE(agent);
    auto signed_report = (*agent)->sign_request(report_body("n1"), unix_now());
    ASSERT_TRUE(signed_report);
    auto res = post(signed_report->header, signed_report->body);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const std::string answer_header = res->get_header_value(std::string(auth::kAuthHeader));
    EXPECT_TRUE((*agent)->verify_answer(answer_header, signed_report->nonce, res->body,
                                        unix_now()));
    auto rogue = auth::token_agent("n1", auth::node_key("another-master-token-00000", "n1"));
    EXPECT_FALSE((*rogue)->verify_answer(answer_header, signed_report->nonce, res->body,
                                         unix_now()));
    EXPECT_EQ(hub_->gpus().size(), 1u);
}

// This test verifies that a captured report sent again is refused and changes nothing.
TEST_F(HubAuthTest, AReplayedReportIsRefused) {
    auto agent = auth::token_agent("n1", auth::node_key(kMaster, "n1"));
    auto once = (*agent)->sign_request(report_body("n1"), unix_now());
    ASSERT_TRUE(once);
    auto first = post(once->header, once->body);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->status, 200);
    auto again = post(once->header, once->body);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 401);
    EXPECT_THAT(again->body, HasSubstr("replay"));
}

// This test verifies that replay protection survives a restart: a report captured and taken
// before the server restarted is refused after it (the nonces it took are gone with the old
// process, so a request signed before the start is refused), and a report signed after the
// restart is taken.
TEST_F(HubAuthTest, AReportCapturedBeforeARestartIsRefusedAfterIt) {
    auto agent = auth::token_agent("n1", auth::node_key(kMaster, "n1"));
    ASSERT_TRUE(agent);
    auto captured = (*agent)->sign_request(report_body("n1"), unix_now());
    ASSERT_TRUE(captured);
    auto first = post(captured->header, captured->body);
    ASSERT_TRUE(first);
    ASSERT_EQ(first->status, 200) << first->body;

    // The server restarts on the same state directory. Timestamps carry milliseconds: the new
    // server starts a few of them after the capture, as any real restart does.
    const double signed_at = unix_now();
    while (unix_now() < signed_at + 0.003) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    hub_.reset();
    start();
    auto again = post(captured->header, captured->body);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 401) << again->body;
    EXPECT_THAT(again->body, HasSubstr("before this server started"));
    EXPECT_EQ(hub_->nodes().at(0).last_seen, 0) << "the replayed report was taken";

    auto fresh = (*agent)->sign_request(report_body("n1"), unix_now());
    ASSERT_TRUE(fresh);
    auto taken = post(fresh->header, fresh->body);
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->status, 200) << taken->body;
}

// This test verifies that a sender without a key, or with another node's key, is refused: no
// header or a wrong key is 401 on the header; a node's key does not sign another node's report.
TEST_F(HubAuthTest, WithoutTheKeyNothingIsTaken) {
    auto none = post("", report_body("n1"));
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401);
    EXPECT_TRUE(json::accept(none->body)) << none->body;
    auto wrong = auth::token_agent("n1", auth::node_key("not-the-servers-token-0000", "n1"));
    auto forged = (*wrong)->sign_request(report_body("n1"), unix_now());
    auto res = post(forged->header, forged->body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 401);
    auto n1 = auth::token_agent("n1", auth::node_key(kMaster, "n1"));
    auto as_n2 = (*n1)->sign_request(report_body("n2"), unix_now());
    auto other = post(as_n2->header, as_n2->body);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 403);
    EXPECT_THAT(other->body, HasSubstr("cannot report for another"));
    EXPECT_TRUE(hub_->gpus().empty());
}

// This test verifies that the refusal comes before the body: a sender that announces a 200 MiB
// body and sends none of it gets its 401 at once.
TEST_F(HubAuthTest, AnUnauthenticatedBodyIsRefusedBeforeItIsRead) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string head =
        "POST /agent/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 209715200\r\n\r\n";
    ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(head.size()));
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ::close(fd);
    ASSERT_GT(n, 0) << "no answer before the body was sent";
    EXPECT_THAT(std::string(buf, static_cast<std::size_t>(n)), HasSubstr("HTTP/1.1 401"));
}

}  // namespace
}  // namespace carma::cluster
