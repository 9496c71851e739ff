// The checks on a request's head that keep web pages of other origins out (issue 18): Host,
// fetch metadata, Origin, the content type of bodies and the page's own header.

#include <gtest/gtest.h>

#include "api/request_guard.h"

namespace carma::api {
namespace {

// A request as the CLI sends it: no browser headers.
RequestHead cli(std::string method, std::string path, std::string host = "localhost") {
    RequestHead h;
    h.method = std::move(method);
    h.path = std::move(path);
    h.host = std::move(host);
    return h;
}

int status_of(const RequestHead& h, const GuardOptions& o = {}) {
    const std::optional<ApiError> e = check_request_head(h, o);
    return e ? e->status : 0;
}

// This test verifies that Host is read as host[:port], lower case, IPv6 in brackets, and that
// anything else is not a host.
TEST(RequestGuardTest, HostOfAHostHeader) {
    EXPECT_EQ(host_of("localhost"), "localhost");
    EXPECT_EQ(host_of("LocalHost:8080"), "localhost");
    EXPECT_EQ(host_of("127.0.0.1:80"), "127.0.0.1");
    EXPECT_EQ(host_of("[::1]:8080"), "::1");
    EXPECT_EQ(host_of("[::1]"), "::1");
    EXPECT_EQ(host_of("gpu-server.lab.example."), "gpu-server.lab.example");
    EXPECT_EQ(host_of(""), std::nullopt);
    EXPECT_EQ(host_of("localhost:http"), std::nullopt);
    EXPECT_EQ(host_of("[::1"), std::nullopt);
    EXPECT_EQ(host_of("evil.example/x"), std::nullopt);
    EXPECT_EQ(host_of("a b"), std::nullopt);
}

// This test verifies that only this machine's names pass: localhost and loopback addresses with
// any port, names the admin listed, and on the Unix socket the socket paths clients send; a
// rebinding page's own name is refused with the host and `allowed_hosts` named.
TEST(RequestGuardTest, HostMustNameThisMachine) {
    for (const char* host : {"localhost", "localhost:8080", "127.0.0.1", "127.3.4.5:9",
                             "[::1]:8080", "LOCALHOST"}) {
        EXPECT_EQ(status_of(cli("GET", "/v1/tasks", host)), 0) << host;
    }
    const std::optional<ApiError> rebinding =
        check_request_head(cli("GET", "/v1/tasks", "attacker.example:8080"), {});
    ASSERT_TRUE(rebinding);
    EXPECT_EQ(rebinding->status, 403);
    EXPECT_NE(rebinding->message.find("attacker.example"), std::string::npos);
    EXPECT_NE(rebinding->message.find("allowed_hosts"), std::string::npos);
    for (const char* host : {"10.0.0.5", "0.0.0.0", "128.0.0.1", "localhost.attacker.example",
                             "/tmp/carma.sock"}) {
        EXPECT_EQ(status_of(cli("GET", "/v1/view", host)), 403) << host;
    }
    GuardOptions listed;
    listed.allowed_hosts = {"gpu-server", "10.0.0.5"};
    EXPECT_EQ(status_of(cli("GET", "/", "GPU-Server:8080"), listed), 0);
    EXPECT_EQ(status_of(cli("GET", "/", "10.0.0.5"), listed), 0);
    EXPECT_EQ(status_of(cli("GET", "/", "gpu-server.attacker.example"), listed), 403);
    GuardOptions socket;
    socket.unix_socket = true;
    EXPECT_EQ(status_of(cli("GET", "/v1/tasks", "/var/lib/carma/carma.sock"), socket), 0);
    EXPECT_EQ(status_of(cli("GET", "/v1/tasks", "attacker.example"), socket), 403);
    RequestHead none = cli("GET", "/healthz");
    none.host.reset();
    EXPECT_EQ(status_of(none), 400);
}

// This test verifies that what a browser marks as coming from another site, or another port of
// this one, is refused unless it is a plain navigation to a page; the page's own requests pass.
TEST(RequestGuardTest, FetchMetadataOfOtherSitesIsRefused) {
    RequestHead post = cli("POST", "/v1/tasks", "localhost:8080");
    post.content_type = "application/json";
    post.has_body = true;
    for (const char* site : {"cross-site", "same-site"}) {
        RequestHead h = post;
        h.sec_fetch_site = site;
        h.sec_fetch_mode = "no-cors";
        EXPECT_EQ(status_of(h), 403) << site;
        RequestHead nav = cli("GET", "/", "localhost:8080");
        nav.sec_fetch_site = site;
        nav.sec_fetch_mode = "navigate";
        EXPECT_EQ(status_of(nav), 0) << site << ": following a link to the page";
        RequestHead form = nav;
        form.method = "POST";
        form.path = "/v1/tasks";
        EXPECT_EQ(status_of(form), 403) << site << ": a form posted from elsewhere";
    }
    RequestHead own = cli("GET", "/v1/view", "localhost:8080");
    own.sec_fetch_site = "same-origin";
    own.sec_fetch_mode = "cors";
    own.carma_page = "1";
    EXPECT_EQ(status_of(own), 0);
    RequestHead typed = cli("GET", "/", "localhost:8080");
    typed.sec_fetch_site = "none";
    typed.sec_fetch_mode = "navigate";
    EXPECT_EQ(status_of(typed), 0);
}

// This test verifies that an Origin other than the request's own, or "null", is refused, and
// the request's own (http or https) passes.
TEST(RequestGuardTest, OriginMustBeTheRequestsOwn) {
    RequestHead h = cli("DELETE", "/v1/tasks/3", "localhost:8080");
    h.origin = "http://localhost:8080";
    EXPECT_EQ(status_of(h), 0);
    h.origin = "https://localhost:8080";
    EXPECT_EQ(status_of(h), 0);
    for (const char* origin : {"http://localhost:3000", "http://attacker.example", "null",
                               "http://localhost:8080.attacker.example"}) {
        h.origin = origin;
        const std::optional<ApiError> e = check_request_head(h, {});
        ASSERT_TRUE(e) << origin;
        EXPECT_EQ(e->status, 403) << origin;
        EXPECT_NE(e->message.find("another origin"), std::string::npos) << e->message;
    }
}

// This test verifies that a body that changes something must be declared JSON (the type a page
// of another origin can send only after a preflight); bodiless requests and reads need nothing.
TEST(RequestGuardTest, BodiesMustBeJson) {
    RequestHead h = cli("POST", "/v1/tasks");
    h.has_body = true;
    for (const char* type : {"text/plain", "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x", ""}) {
        h.content_type = type;
        const std::optional<ApiError> e = check_request_head(h, {});
        ASSERT_TRUE(e) << type;
        EXPECT_EQ(e->status, 415) << type;
        EXPECT_NE(e->message.find("application/json"), std::string::npos);
    }
    for (const char* type : {"application/json", "Application/JSON; charset=utf-8"}) {
        h.content_type = type;
        EXPECT_EQ(status_of(h), 0) << type;
    }
    RequestHead hold = cli("POST", "/v1/tasks/4/hold");
    EXPECT_EQ(status_of(hold), 0) << "no body, nothing to declare";
}

// This test verifies that a browser's request to the API needs the page's header, while
// navigations and the page's assets do not, and non-browser clients never do.
TEST(RequestGuardTest, BrowserRequestsToTheApiCarryThePagesHeader) {
    RequestHead fetch = cli("GET", "/v1/tasks", "localhost:8080");
    fetch.sec_fetch_site = "same-origin";
    fetch.sec_fetch_mode = "cors";
    const std::optional<ApiError> e = check_request_head(fetch, {});
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 403);
    EXPECT_NE(e->message.find("X-Carma-Page"), std::string::npos);
    fetch.carma_page = "1";
    EXPECT_EQ(status_of(fetch), 0);
    RequestHead script = cli("GET", "/app.js", "localhost:8080");
    script.sec_fetch_site = "same-origin";
    script.sec_fetch_mode = "no-cors";
    EXPECT_EQ(status_of(script), 0);
    RequestHead log = cli("GET", "/v1/tasks/3/logs", "localhost:8080");
    log.sec_fetch_site = "same-origin";
    log.sec_fetch_mode = "navigate";
    EXPECT_EQ(status_of(log), 0) << "the page's log link opens in a tab";
    EXPECT_EQ(status_of(cli("GET", "/v1/tasks")), 0);
}

}  // namespace
}  // namespace carma::api
