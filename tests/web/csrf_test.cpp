// The daemon's socket seen through `ssh -N -L PORT:/path/carma.sock` (docs/user-guide.md, The web
// page): a relay of the socket on 127.0.0.1 (tests/web/tunnel.h) and a real daemon on emulated
// GPUs. A page of another origin, loaded in headless Chromium while the tunnel is open, must not be
// able to submit, hold or cancel tasks as the user (cross-site request forgery), nor may a request
// for another host name (DNS rebinding) read the user's tasks; the daemon's own page, opened
// through the tunnel, keeps working.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "http_support.h"
#include "support.h"
#include "browser.h"
#include "tunnel.h"

#ifndef CARMA_BIN
#error "CARMA_BIN must name the carma executable"
#endif

namespace carma {
namespace {

using test_support::eventually;
using test_support::read_text;

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test_support::Browser;
using test_support::UnixSocketRelay;

using Reply = test_support::HttpReply;

// The start of a reply's body, for a failure message.
std::string brief(const std::string& body) {
    return body.size() > 300 ? body.substr(0, 300) + "..." : body;
}

// The test's own client on the daemon's socket, as `carma` is (it says `Host: localhost`).
Reply over_socket(const std::string& socket, const std::string& method, const std::string& target,
                  const std::string& body = "") {
    return test_support::socket_request(socket, method, target, body, {{"Host", "localhost"}});
}

// One request written byte for byte to 127.0.0.1:port (nothing added: no Host unless the
// request has one), and the reply read to the end of the connection.
Reply raw_http(int port, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return {-1, "cannot connect to 127.0.0.1:" + std::to_string(port), {}};
    }
    for (std::size_t sent = 0; sent < request.size();) {
        const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            ::close(fd);
            return {-1, "the connection closed while sending", {}};
        }
        sent += static_cast<std::size_t>(n);
    }
    std::string raw;
    char chunk[65536];
    while (true) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0) {
            break;
        }
        raw.append(chunk, static_cast<std::size_t>(n));
    }
    ::close(fd);
    Reply reply{-1, raw, {}};
    if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() >= 12) {
        reply.status = std::atoi(raw.substr(9, 3).c_str());
    }
    if (const std::size_t end = raw.find("\r\n\r\n"); end != std::string::npos) {
        reply.body = raw.substr(end + 4);
    }
    return reply;
}

// A request of `method` for `target` with exactly these header lines (each "Name: value"), and
// `Connection: close`.
std::string request_text(const std::string& method, const std::string& target,
                         const std::vector<std::string>& headers, const std::string& body = "") {
    std::string text = method + " " + target + " HTTP/1.1\r\n";
    for (const std::string& h : headers) {
        text += h + "\r\n";
    }
    if (!body.empty() || method == "POST") {
        text += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    return text + "Connection: close\r\n\r\n" + body;
}

// The "attacker": a web server of another origin (127.0.0.1:port, also reachable as
// localhost:port) that serves one page.
class PageServer {
public:
    explicit PageServer(std::string html) : html_(std::move(html)) {
        server_.Get("/", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(html_, "text/html; charset=utf-8");
        });
        port_ = server_.bind_to_any_port("127.0.0.1");
        if (port_ <= 0) {
            throw std::runtime_error("the page server cannot listen on 127.0.0.1");
        }
        thread_ = std::thread([this] { server_.listen_after_bind(); });
    }
    ~PageServer() {
        server_.stop();
        thread_.join();
    }
    PageServer(const PageServer&) = delete;
    PageServer& operator=(const PageServer&) = delete;
    int port() const { return port_; }

private:
    std::string html_;
    httplib::Server server_;
    int port_ = 0;
    std::thread thread_;
};

// The attacker's page: against `?target=` (one of the tunnel's origins) it tries every
// way a page of another origin has to make a browser send a request that changes something,
// and one that reads. Each task it tries to submit writes `id` into a marker file of its own
// under `config.markers` and is named after what sent it. When all attempts have settled it
// sets document.title to "done" and window.__results to what the page saw of each.
std::string attack_page(const json& config) {
    return R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>attacking</title></head>
<body><h1>Nothing to see here</h1>
<script>
const CFG = )HTML" + config.dump() + R"HTML(;
const results = {};
const here = location.host.replace(/[^A-Za-z0-9]+/g, "-");
function tag(target, kind) {
  return here + "-to-" + target.replace(/^http:\/\//, "").replace(/[^A-Za-z0-9]+/g, "-") + "-" + kind;
}
function taskObject(target, kind) {
  const t = tag(target, kind);
  return { name: "csrf-" + t, command: ["/bin/sh", "-c", "id > " + CFG.markers + "/" + t],
           workdir: "/tmp" };
}
function seen(r) { return "sent; the page saw a response of type " + r.type + ", status " + r.status; }
async function attempt(kind, target, f) {
  const key = tag(target, kind);
  try { results[key] = String(await f()); }
  catch (e) { results[key] = "refused by the browser: " + e; }
}
// A form posted into a hidden frame: the browser sends it as a navigation, without CORS.
function formPost(url, name, value) {
  return new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.name = "sink" + Math.random().toString(36).slice(2);
    frame.style.display = "none";
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST";
    form.action = url;
    form.enctype = "text/plain";
    form.target = frame.name;
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
    document.body.appendChild(form);
    const timer = setTimeout(() => resolve("form sent; no load event in its frame within 5 s"), 5000);
    frame.addEventListener("load", () => { clearTimeout(timer); resolve("form sent; its frame loaded"); });
    form.submit();
  });
}
async function attack(target) {
  const tasks = target + "/v1/tasks";
  const queued = target + "/v1/tasks/" + CFG.queued;
  const queued2 = target + "/v1/tasks/" + CFG.queued2;
  const running = target + "/v1/tasks/" + CFG.running;
  await attempt("beacon", target, () => navigator.sendBeacon(
      tasks, new Blob([JSON.stringify(taskObject(target, "beacon"))], { type: "text/plain" }))
      ? "beacon queued" : "beacon refused");
  await attempt("no-cors", target, async () => seen(await fetch(tasks, {
      method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" },
      body: JSON.stringify(taskObject(target, "no-cors")) })));
  await attempt("no-cors-credentials", target, async () => seen(await fetch(tasks, {
      method: "POST", mode: "no-cors", credentials: "include",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify(taskObject(target, "no-cors-credentials")) })));
  // enctype text/plain sends "name=value\r\n": a name ending in an open string and the value
  // closing it make a JSON body (the '=' lands in an environment variable's value).
  await attempt("form", target, () => {
    const o = taskObject(target, "form");
    o.env = { CSRF_PAD: "" };
    const text = JSON.stringify(o);  // ...,"env":{"CSRF_PAD":""}}
    return formPost(tasks, text.slice(0, -3), text.slice(-3));
  });
  await attempt("json", target, async () => seen(await fetch(tasks, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(taskObject(target, "json")) })));
  await attempt("hold-no-cors", target, async () => seen(await fetch(queued + "/hold", {
      method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: "{}" })));
  await attempt("hold-form", target, () => formPost(queued2 + "/hold", "{}", ""));
  await attempt("delete-queued", target, async () => seen(await fetch(queued, { method: "DELETE" })));
  await attempt("delete-running", target, async () => seen(await fetch(running, { method: "DELETE" })));
  await attempt("read-task", target, async () => "read: " + await (await fetch(queued)).text());
  await attempt("read-list", target, async () => "read: " + await (await fetch(tasks)).text());
}
(async () => {
  await attack(new URLSearchParams(location.search).get("target"));
  window.__results = results;
  document.title = "done";
})();
</script></body></html>
)HTML";
}

const char* kEnvSecret = "tunnel-env-secret-3c9e41d0";

class WebCsrfTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-csrf-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        socket_ = dir_ + "/carma.sock";
    }

    void TearDown() override {
        if (daemon_ > 0) {
            // Running tasks are stopped first, so that no sleeper outlives the test.
            std::vector<int> live;
            for (const json& t : tasks()) {
                if (t["state"] == "running" || t["state"] == "queued" || t["state"] == "held") {
                    over_socket(socket_, "DELETE", "/v1/tasks/" + std::to_string(t["id"].get<int>()));
                    live.push_back(t["id"]);
                }
            }
            eventually([&] {
                for (int id : live) {
                    if (state(id) == "running") {
                        return false;
                    }
                }
                return true;
            }, 30s);
            ::kill(daemon_, SIGTERM);
            int status = 0;
            ::waitpid(daemon_, &status, 0);
            daemon_ = 0;
        }
        (void)std::system(("pkill -KILL -f -- '--socket " + socket_ + "' 2>/dev/null").c_str());
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    // Starts `carma serve` on four emulated GPUs; fails the test when it does not answer.
    void start() {
        std::vector<std::string> args = {CARMA_BIN, "serve", "--gpus", "emulated:4xA100-40GB",
                                         "--state-dir", dir_ + "/state", "--socket", socket_,
                                         "--time-scale", "60", "--kill-grace", "2"};
        daemon_ = test_support::spawn_logged(args, dir_ + "/daemon.log");
        ASSERT_GT(daemon_, 0) << "cannot start " << CARMA_BIN;
        ASSERT_TRUE(eventually([&] {
            int status = 0;
            if (::waitpid(daemon_, &status, WNOHANG) == daemon_) {
                daemon_ = 0;
                return true;
            }
            return over_socket(socket_, "GET", "/healthz").status == 200;
        }, 30s)) << log_text();
        ASSERT_GT(daemon_, 0) << "the daemon exited: " << log_text();
    }

    std::string log_text() const { return read_text(dir_ + "/daemon.log"); }

    // Submitted over the socket, as the test's user (root).
    int submit(const json& body) {
        const Reply r = over_socket(socket_, "POST", "/v1/tasks", body.dump());
        EXPECT_EQ(r.status, 201) << r.body;
        return r.status == 201 ? json::parse(r.body)["id"].get<int>() : -1;
    }

    json tasks() {
        const Reply r = over_socket(socket_, "GET", "/v1/tasks?all=1");
        if (r.status != 200) {
            ADD_FAILURE() << "GET /v1/tasks?all=1 on the socket: " << r.status << " " << r.body;
            return json::array();
        }
        return json::parse(r.body)["tasks"];
    }

    std::string state(int id) {
        const Reply r = over_socket(socket_, "GET", "/v1/tasks/" + std::to_string(id));
        return r.status == 200 ? json::parse(r.body)["state"].get<std::string>() : r.body;
    }

    std::string dir_, socket_;
    pid_t daemon_ = 0;
};

std::string chromium_or_fail() {
    const std::string chromium = test_support::find_chromium();
    EXPECT_FALSE(chromium.empty())
        << "no chromium on PATH (nor $CARMA_CHROMIUM): scripts/setup installs Debian's chromium";
    return chromium;
}

// This test verifies that while a user's tunnel to the socket is open, a page of another origin
// (127.0.0.1 or localhost with another port: same-site or cross-site to the tunnel's address)
// in the user's browser cannot act as the user: no fetch (no-cors with a text/plain JSON body, with credentials, or
// application/json needing a preflight), beacon or auto-submitted text/plain form submits a
// task, holds a queued task or cancels one, nothing it tried runs, and it reads nothing.
TEST_F(WebCsrfTest, CrossOriginPageCannotSubmitThroughATunnel) {
    const std::string chromium = chromium_or_fail();
    ASSERT_FALSE(chromium.empty());
    ASSERT_NO_FATAL_FAILURE(start());
    const std::string markers = dir_ + "/markers";
    fs::create_directories(markers);

    // The user's own tasks: one running, two queued behind it (one with a secret in its
    // environment).
    const int running = submit({{"name", "mine-running"}, {"command", {"sleep", "600"}},
                                {"workdir", "/tmp"}});
    ASSERT_GT(running, 0);
    ASSERT_TRUE(eventually([&] { return state(running) == "running"; })) << state(running);
    const int queued = submit({{"name", "mine-queued"}, {"command", {"/bin/true"}},
                               {"workdir", "/tmp"}, {"after", {running}},
                               {"env", {{"CARMA_TUNNEL_TOKEN", kEnvSecret}}}});
    ASSERT_GT(queued, 0);
    ASSERT_EQ(state(queued), "queued");
    const int queued2 = submit({{"name", "mine-queued-too"}, {"command", {"/bin/true"}},
                                {"workdir", "/tmp"}, {"after", {running}}});
    ASSERT_GT(queued2, 0);

    UnixSocketRelay tunnel(socket_);
    const std::string relay_port = std::to_string(tunnel.port());
    ASSERT_EQ(raw_http(tunnel.port(), request_text("GET", "/healthz", {"Host: localhost:" + relay_port}))
                  .status,
              200)
        << "the relay does not reach the daemon";

    const json config = {{"queued", queued},
                         {"queued2", queued2},
                         {"running", running},
                         {"markers", markers}};
    PageServer attacker(attack_page(config));
    const std::string attacker_port = std::to_string(attacker.port());

    Browser browser(chromium, dir_ + "/profile", dir_ + "/chromium.log");
    const std::string page = browser.open_page();
    json seen = json::object();
    const int before = tunnel.connections();
    // From 127.0.0.1:other-port to 127.0.0.1:tunnel-port is same-site, to localhost:tunnel-port
    // cross-site; and the other way round.
    for (const std::string& origin :
         std::vector<std::string>{"http://127.0.0.1:" + attacker_port, "http://localhost:" + attacker_port}) {
        for (const std::string& target :
             std::vector<std::string>{"http://127.0.0.1:" + relay_port, "http://localhost:" + relay_port}) {
            tunnel.close_connections();  // the browser's idle ones, see close_connections()
            const std::string url = origin + "/?target=" + target;
            browser.call("Page.navigate", {{"url", url}}, page);
            ASSERT_TRUE(eventually([&] {
                return browser.evaluate(page, "location.href + ' ' + document.title") == url + " done";
            }, 120s)) << url << ": " << browser.evaluate(page, "document.title") << "\n"
                      << read_text(dir_ + "/chromium.log");
            seen[origin + " -> " + target] = browser.evaluate(page, "window.__results");
        }
    }
    browser.call("Page.navigate", {{"url", "about:blank"}}, page);
    tunnel.close_connections();
    // The browser did send requests into the tunnel (else this test would prove nothing).
    EXPECT_GT(tunnel.connections(), before) << seen.dump(2);

    // Nothing was submitted: the daemon knows only the user's own three tasks, as they were.
    std::string submitted;
    for (const json& t : tasks()) {
        if (t["id"] != running && t["id"] != queued && t["id"] != queued2) {
            submitted += "  task " + t["id"].dump() + " " + t["name"].get<std::string>() + " (" +
                         t["state"].get<std::string>() + ")\n";
        }
    }
    EXPECT_TRUE(submitted.empty()) << "tasks submitted by the other origin's page:\n"
                                   << submitted << "what the page saw: " << seen.dump(2);
    EXPECT_EQ(state(queued), "queued") << "a no-cors POST held (or a DELETE cancelled) the task";
    EXPECT_EQ(state(queued2), "queued") << "a form held the task";
    EXPECT_EQ(state(running), "running") << "the page cancelled the user's running task";
    EXPECT_EQ(seen.dump().find(kEnvSecret), std::string::npos)
        << "the page read the user's task: " << seen.dump(2);

    // Nothing it tried ran: a task of the user's, submitted now, runs to the end, and by then
    // anything submitted before it (4 GPUs, one busy) has ended too; no marker file exists.
    const int control = submit({{"name", "control"},
                                {"command", {"/bin/sh", "-c", "id > " + dir_ + "/control"}},
                                {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return state(control) == "succeeded"; })) << state(control);
    EXPECT_TRUE(fs::exists(dir_ + "/control"));
    eventually([&] {
        for (const json& t : tasks()) {
            if (t["id"] != running && t["id"] != queued && t["id"] != queued2 &&
                (t["state"] == "queued" || t["state"] == "running")) {
                return false;
            }
        }
        return true;
    }, 30s);
    std::string ran;
    for (const fs::directory_entry& e : fs::directory_iterator(markers)) {
        ran += "  " + e.path().filename().string() + ": " + read_text(e.path().string());
    }
    EXPECT_TRUE(ran.empty()) << "commands of the other origin's page ran as the user:\n" << ran;
}

// This test verifies the tunnel's rules on raw requests: a Host that is not localhost or a
// loopback address (DNS rebinding: `Host: attacker.example`) gets 403 naming the host and
// allowed_hosts, and no task or secret; no Host gets 400; a foreign or `null` Origin, a
// cross-site or same-site browser request other than a GET navigation, a browser request to
// /v1/* without `X-Carma-Page: 1`, and a body that is not application/json are refused; while
// the user's own requests through the tunnel (localhost or 127.0.0.1 with the tunnel's port,
// as curl or `carma` would send them) read and change as before.
TEST_F(WebCsrfTest, TunnelRefusesForeignHostsAndCrossOriginRequests) {
    ASSERT_NO_FATAL_FAILURE(start());
    const int secret = submit({{"name", "tunnel-secret"}, {"command", {"/bin/true"}},
                               {"workdir", "/tmp"}, {"hold", true},
                               {"env", {{"CARMA_TUNNEL_TOKEN", kEnvSecret}}}});
    ASSERT_GT(secret, 0);
    UnixSocketRelay tunnel(socket_);
    const int port = tunnel.port();
    const std::string p = std::to_string(port);
    const std::string one = "/v1/tasks/" + std::to_string(secret);
    auto get = [&](const std::string& target, const std::vector<std::string>& headers) {
        return raw_http(port, request_text("GET", target, headers));
    };

    // DNS rebinding: the attacker's name resolves to 127.0.0.1; the browser sends its Host.
    for (const std::string& host :
         std::vector<std::string>{"attacker.example", "attacker.example:" + p,
                                  "127.0.0.1.attacker.example:" + p, "localhost.attacker.example"}) {
        for (const std::string& target : std::vector<std::string>{"/v1/tasks", one, "/v1/view"}) {
            const Reply r = get(target, {"Host: " + host});
            EXPECT_EQ(r.status, 403) << "Host: " << host << " GET " << target << "\n" << brief(r.body);
            EXPECT_EQ(r.body.find(kEnvSecret), std::string::npos) << "Host: " << host << " " << target;
            if (target == "/v1/tasks" && r.status == 403) {
                const json error = json::parse(r.body, nullptr, false);
                const std::string message = error.is_object() ? error.value("error", "") : r.body;
                EXPECT_NE(message.find(host), std::string::npos) << brief(r.body);
                EXPECT_NE(message.find("allowed_hosts"), std::string::npos) << brief(r.body);
            }
        }
    }
    const std::string task = R"({"name":"tunnel-posted","command":["/bin/true"],"workdir":"/tmp","hold":true})";
    EXPECT_EQ(raw_http(port, request_text("POST", "/v1/tasks",
                                          {"Host: attacker.example:" + p,
                                           "Content-Type: application/json"},
                                          task)).status,
              403);
    EXPECT_EQ(get("/v1/tasks", {}).status, 400) << "a request without Host";

    // The user's own requests through the tunnel: the page's addresses, any loopback address.
    for (const std::string& host : std::vector<std::string>{"localhost:" + p, "127.0.0.1:" + p,
                                                            "localhost", "127.0.0.1", "[::1]:" + p,
                                                            "127.0.0.2:" + p}) {
        for (const std::string& target : std::vector<std::string>{"/v1/tasks", one}) {
            const Reply r = get(target, {"Host: " + host});
            EXPECT_EQ(r.status, 200) << "Host: " << host << " GET " << target << "\n" << brief(r.body);
            EXPECT_NE(r.body.find(kEnvSecret), std::string::npos)
                << "Host: " << host << " GET " << target << "\n" << brief(r.body);
        }
    }
    const std::string own = "Host: localhost:" + p;
    const Reply posted = raw_http(port, request_text("POST", "/v1/tasks",
                                                     {own, "Content-Type: application/json"}, task));
    EXPECT_EQ(posted.status, 201) << posted.body;

    // A body that is not JSON by its type (what a form or a no-cors fetch can send).
    for (const char* type : {"text/plain", "text/plain;charset=UTF-8",
                                   "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x"}) {
        const Reply r = raw_http(port, request_text("POST", "/v1/tasks",
                                                    {own, std::string("Content-Type: ") + type}, task));
        EXPECT_EQ(r.status, 415) << type << ": " << brief(r.body);
    }
    EXPECT_EQ(raw_http(port, request_text("POST", "/v1/tasks", {own}, task)).status, 415)
        << "a body without Content-Type";

    // Origin: only the request's own. Its https form too: only this listener answers on that
    // host and port, and a proxy that terminates TLS in front of it sends it so.
    EXPECT_EQ(get("/v1/view", {own, "Origin: http://localhost:" + p}).status, 200);
    EXPECT_EQ(get("/v1/view", {own, "Origin: https://localhost:" + p}).status, 200);
    for (const std::string& origin :
         std::vector<std::string>{"http://attacker.example", "null", "http://localhost:1",
                                  "http://127.0.0.1:" + p}) {
        EXPECT_EQ(get("/v1/view", {own, "Origin: " + origin}).status, 403) << "Origin: " << origin;
        EXPECT_EQ(raw_http(port, request_text("POST", "/v1/tasks",
                                              {own, "Origin: " + origin,
                                               "Content-Type: application/json"},
                                              task)).status,
                  403)
            << "Origin: " << origin;
    }

    // Fetch metadata: another site's request only as a top-level GET navigation.
    for (const char* site : {"cross-site", "same-site"}) {
        const std::string from = std::string("Sec-Fetch-Site: ") + site;
        EXPECT_EQ(get("/v1/view", {own, from, "Sec-Fetch-Mode: cors", "X-Carma-Page: 1"}).status, 403)
            << site;
        EXPECT_EQ(get(one, {own, from, "Sec-Fetch-Mode: no-cors", "X-Carma-Page: 1"}).status, 403)
            << site;
        EXPECT_EQ(raw_http(port, request_text("POST", one + "/release",
                                              {own, from, "Sec-Fetch-Mode: navigate",
                                               "Sec-Fetch-Dest: iframe"})).status,
                  403)
            << site;
        EXPECT_EQ(get("/", {own, from, "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"}).status,
                  200)
            << site << ": a link to the page from elsewhere still opens it";
    }
    EXPECT_EQ(state(secret), "held");

    // The page's own reads: a browser request (Sec-Fetch-Mode other than navigate) to /v1/*
    // carries X-Carma-Page: 1.
    for (const std::string& target : std::vector<std::string>{"/v1/view", one}) {
        EXPECT_EQ(get(target, {own, "Sec-Fetch-Site: same-origin", "Sec-Fetch-Mode: cors"}).status, 403)
            << target << " without X-Carma-Page";
        EXPECT_EQ(get(target, {own, "Sec-Fetch-Site: same-origin", "Sec-Fetch-Mode: cors",
                               "X-Carma-Page: 1"}).status,
                  200)
            << target;
    }
    EXPECT_EQ(get("/", {own, "Sec-Fetch-Site: none", "Sec-Fetch-Mode: navigate",
                        "Sec-Fetch-Dest: document"}).status,
              200);

    // Exactly the two tasks the user submitted exist.
    int submitted = 0;
    for (const json& t : tasks()) {
        submitted += t["name"] == "tunnel-posted" ? 1 : 0;
    }
    EXPECT_EQ(submitted, 1) << "tasks named tunnel-posted: only the one posted as the user";
}

// This test verifies that the daemon's page, opened through the tunnel as
// http://localhost:PORT/ and http://127.0.0.1:PORT/, still works: GPU cards, the timeline, the
// user's running task with its log link (the connection is the user's), the log itself, and no
// error in the browser's console.
TEST_F(WebCsrfTest, PageWorksThroughATunnel) {
    const std::string chromium = chromium_or_fail();
    ASSERT_FALSE(chromium.empty());
    ASSERT_NO_FATAL_FAILURE(start());
    const int mine = submit({{"name", "tunnel-logged"},
                             {"command", {"/bin/sh", "-c", "echo tunnel-log-line; sleep 600"}},
                             {"workdir", "/tmp"}});
    ASSERT_GT(mine, 0);
    ASSERT_TRUE(eventually([&] { return state(mine) == "running"; })) << state(mine);
    UnixSocketRelay tunnel(socket_);
    const std::string p = std::to_string(tunnel.port());

    Browser browser(chromium, dir_ + "/profile", dir_ + "/chromium.log");
    const std::string page = browser.open_page();
    auto eval = [&](const std::string& js) { return browser.evaluate(page, js); };
    auto page_true = [&](const std::string& js) {
        return eventually([&] { return eval("Boolean(" + js + ")") == true; });
    };
    const std::string link =
        "document.querySelector('#running tr[data-task=\"" + std::to_string(mine) + "\"] a')";
    for (const std::string& origin :
         std::vector<std::string>{"http://127.0.0.1:" + p, "http://localhost:" + p}) {
        browser.call("Page.navigate", {{"url", origin + "/"}}, page);
        ASSERT_TRUE(page_true("document.querySelectorAll('#gpus [data-gpu]').length === 4"))
            << origin << ": " << eval("document.body.innerText");
        EXPECT_TRUE(page_true("document.querySelectorAll('#timeline svg[data-timeline-gpu]').length === 4"))
            << origin << ": " << eval("document.getElementById('timeline').innerText");
        EXPECT_TRUE(page_true(link)) << origin << ": " << eval("document.body.innerText");
    }
    ASSERT_TRUE(page_true(link));
    browser.drain();
    std::string errors;
    for (const std::string& e : browser.errors()) {
        errors += e + "\n";
    }
    EXPECT_TRUE(errors.empty()) << errors;

    // The log opens as a link from the page does (a navigation; Chromium then asks for a
    // favicon the daemon does not have, which is no error of the page's).
    const std::string log_url = eval(link + ".href");
    EXPECT_EQ(log_url, "http://localhost:" + p + "/v1/tasks/" + std::to_string(mine) + "/logs");
    browser.call("Page.navigate", {{"url", log_url}}, page);
    EXPECT_TRUE(page_true("document.body && document.body.innerText.includes('tunnel-log-line')"))
        << eval("document.documentElement.outerHTML.slice(0, 2000)");
}

}  // namespace
}  // namespace carma
