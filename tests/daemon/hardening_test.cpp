// Hardening, round three (issue 44), against a real daemon:
// - break 1: any local user, and a TCP client with a read-only token, crashed the daemon with one
//   request body nested 70,000 deep (140 KB) in `after`, `dependencies` or `explicit_env`: an
//   error message quoted the value with dump(), which recurses once per level. Every such body is
//   now refused before it is parsed, on both endpoints and both listeners, and a value within
//   the limit is quoted only by its size;
// - break 2: max_submit_bytes_per_request counted only name, argv and env, so `workload` or
//   `output` of 900 KB, or `after` of 1,000 tasks on an array of 4,000, stored hundreds of MB;
// - break 7: the browser guard read `Transfer-Encoding` itself, case-sensitively, while the
//   parser ignores case, so a `Chunked` text/plain body skipped the 415 check.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <fstream>
#include <string>
#include <vector>

#include "daemon_fixture.h"
#include "http_support.h"

namespace carma::daemon_test {
namespace {

using test_support::HttpReply;
using test_support::socket_request;
using test_support::tcp_request;

std::string nested(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

struct DeepCase {
    const char* target;
    std::string body;
};

std::vector<DeepCase> deep_cases(const std::string& value) {
    const std::string task = R"({"command": ["/bin/true"], "workdir": "/tmp", )";
    return {
        {"/v1/estimate", task + R"("after": )" + value + "}"},
        {"/v1/tasks", task + R"("after": )" + value + "}"},
        {"/v1/tasks", task + R"("dependencies": )" + value + "}"},
        {"/v1/estimate", task + R"("dependencies": )" + value + "}"},
        {"/v1/tasks", task + R"("env": {"A": "1"}, "explicit_env": )" + value + "}"},
        {"/v1/estimate", task + R"("env": {"A": "1"}, "explicit_env": )" + value + "}"},
    };
}

// This test verifies that a body nested 70,000 deep in each of the three fields, on both
// endpoints, over the socket and over TCP with a read-only token, is refused with a 400 that
// names the limit, and that the daemon answers after every one of them.
TEST_F(DaemonTest, DeeplyNestedRequestsAreRefusedNotACrash) {
    const std::string token_file = dir_ + "/token";
    std::ofstream(token_file) << "0123456789abcdef0123456789abcdef\n";
    ::chmod(token_file.c_str(), 0600);
    const int port = 20000 + static_cast<int>((::getpid() + 7919) % 20000);
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file", token_file});
    const httplib::Headers auth = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdef"},
                                   {"Content-Type", "application/json"}};
    for (const DeepCase& c : deep_cases(nested(70000))) {
        const HttpReply local = socket_request(socket_, "POST", c.target, c.body,
                                               {{"Content-Type", "application/json"}});
        EXPECT_EQ(local.status, 400) << c.target << ": " << local.body;
        EXPECT_NE(local.body.find("deeper than 64"), std::string::npos) << local.body;
        ASSERT_TRUE(client().healthz()) << c.target << "\n" << daemon_log();
        const HttpReply remote = tcp_request(port, "POST", c.target, auth, c.body);
        EXPECT_EQ(remote.status, 400) << c.target << ": " << remote.body;
        EXPECT_NE(remote.body.find("deeper than 64"), std::string::npos) << remote.body;
        ASSERT_TRUE(client().healthz()) << c.target << " over TCP\n" << daemon_log();
    }
}

// This test verifies that a nested value within the limit reaches the field's own check, whose
// message quotes it by its size, never by dumping it.
TEST_F(DaemonTest, NestedValuesAreQuotedByTheirSize) {
    start("exclusive");
    for (const DeepCase& c : deep_cases("[" + nested(60) + "]")) {
        const HttpReply r = socket_request(socket_, "POST", c.target, c.body,
                                           {{"Content-Type", "application/json"}});
        EXPECT_EQ(r.status, 400) << c.target << ": " << r.body;
        EXPECT_NE(r.body.find("an array of 1 item"), std::string::npos) << c.body.substr(0, 120)
                                                                          << ": " << r.body;
        EXPECT_EQ(r.body.find("[[[[[[[["), std::string::npos) << r.body;
    }
    EXPECT_TRUE(client().healthz());
}

// This test verifies that the byte limits count every stored field: a 900-KB `workload` or
// `output` is refused by the per-task limit, `after` of 1,000 tasks on 4,000 members (a request
// of 3 KB that would store 128 MB) by the per-request limit, each naming its limit; nothing of
// them is stored, and a small dependency still goes through.
TEST_F(DaemonTest, ByteLimitsCountEveryStoredField) {
    start("exclusive");
    const json sleeper = {{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}};
    const TaskId first = submit(sleeper);
    auto refused = [&](const json& body, const char* limit) {
        const HttpReply r = socket_request(socket_, "POST", "/v1/tasks", body.dump(),
                                           {{"Content-Type", "application/json"}});
        EXPECT_EQ(r.status, 413) << limit << ": " << r.body.substr(0, 300);
        EXPECT_NE(r.body.find(limit), std::string::npos) << r.body.substr(0, 300);
    };
    json big_workload = sleeper;
    big_workload["workload"] = std::string(900 * 1000, 'w');
    refused(big_workload, "max_submit_bytes_per_task");
    json big_output = sleeper;
    big_output["output"] = std::string(900 * 1000, 'o');
    refused(big_output, "max_submit_bytes_per_task");
    json amplified = sleeper;
    amplified["after"] = std::vector<TaskId>(1000, first);
    amplified["array"] = "0-3999";
    refused(amplified, "max_submit_bytes_per_request");
    auto listed = client().list_tasks(true);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 1u) << "nothing of them was stored";
    json small = sleeper;
    small["after"] = {first};
    small["array"] = "0-9";
    const HttpReply ok = socket_request(socket_, "POST", "/v1/tasks", small.dump(),
                                        {{"Content-Type", "application/json"}});
    EXPECT_EQ(ok.status, 201) << ok.body;
}

// The bytes a raw request over the socket gets back (up to the peer's close or 5 s).
std::string raw_exchange(const std::string& socket, const std::string& request) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (fd >= 0) {
            ::close(fd);
        }
        return "cannot connect";
    }
    timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

// This test verifies that the browser guard reads the body as the parser does: a chunked
// text/plain submission is refused with 415 however `chunked` is spelled, and nothing is
// submitted; the same body declared JSON is accepted, so the refusal is the content type's.
TEST_F(DaemonTest, ChunkedInAnyCaseIsCheckedForItsContentType) {
    start("exclusive");
    const std::string body = json{{"command", {"/bin/true"}}, {"workdir", "/tmp"}}.dump();
    auto chunked = [&](const std::string& coding, const std::string& type) {
        char size[32];
        std::snprintf(size, sizeof size, "%zx", body.size());
        return raw_exchange(socket_, "POST /v1/tasks HTTP/1.1\r\nHost: localhost\r\n"
                                     "Transfer-Encoding: " + coding + "\r\nContent-Type: " + type +
                                     "\r\nConnection: close\r\n\r\n" + size + "\r\n" + body +
                                     "\r\n0\r\n\r\n");
    };
    for (const char* coding : {"chunked", "Chunked", "CHUNKED"}) {
        const std::string reply = chunked(coding, "text/plain");
        EXPECT_EQ(reply.rfind("HTTP/1.1 415", 0), 0u) << coding << ": " << reply;
    }
    auto listed = client().list_tasks(true);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 0u) << "nothing was submitted";
    const std::string accepted = chunked("CHUNKED", "application/json");
    EXPECT_EQ(accepted.rfind("HTTP/1.1 201", 0), 0u) << accepted;
}

}  // namespace
}  // namespace carma::daemon_test
