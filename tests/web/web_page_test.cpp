// The daemon's web page in a real browser: a daemon on emulated GPUs with a replay under way, the
// page loaded once in headless Chromium (tests/web/browser.h) and read through its DOM. Also the
// web listener's rules (loopback free, elsewhere the token; read-only; no secrets).

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
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "http_support.h"
#include "support.h"
#include "browser.h"
#include "users.h"

#ifndef CARMA_BIN
#error "CARMA_BIN must name the carma executable"
#endif
#ifndef CARMA_ARTIFACT_DIR
#error "CARMA_ARTIFACT_DIR must name where screenshots are kept"
#endif

namespace carma {
namespace {

using test_support::eventually;
using test_support::read_text;
using test_support::free_port;

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test_support::Browser;

using Reply = test_support::HttpReply;

Reply over_socket(const std::string& socket, const std::string& method, const std::string& target,
                  const std::string& body = "") {
    return test_support::socket_request(socket, method, target, body);
}

using test_support::tcp_request;

class WebTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-web-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        socket_ = dir_ + "/carma.sock";
        port_ = free_port();
    }

    void TearDown() override {
        stop();
        (void)std::system(("pkill -KILL -f -- '--socket " + socket_ + "' 2>/dev/null").c_str());
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    // Starts `carma serve` with `extra`; returns its exit status when it stopped by itself
    // before answering (a refused configuration), else -1 once it answers.
    int start(const std::vector<std::string>& extra) {
        std::vector<std::string> args = {CARMA_BIN, "serve", "--gpus", "emulated:4xA100-40GB",
                                         "--state-dir", dir_ + "/state", "--socket", socket_,
                                         "--time-scale", "60", "--kill-grace", "2"};
        args.insert(args.end(), extra.begin(), extra.end());
        daemon_ = test_support::spawn_logged(args, dir_ + "/daemon.log");
        EXPECT_GT(daemon_, 0) << "cannot start " << CARMA_BIN;
        int exit_status = -1;
        const bool up = eventually([&] {
            int status = 0;
            if (::waitpid(daemon_, &status, WNOHANG) == daemon_) {
                daemon_ = 0;
                exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
                return true;
            }
            return over_socket(socket_, "GET", "/healthz").status == 200;
        }, 30s);
        EXPECT_TRUE(up) << log_text();
        return exit_status;
    }

    void stop() {
        if (daemon_ > 0) {
            ::kill(daemon_, SIGTERM);
            int status = 0;
            ::waitpid(daemon_, &status, 0);
            daemon_ = 0;
        }
    }

    std::string log_text() const { return read_text(dir_ + "/daemon.log"); }

    json view() {
        const Reply r = over_socket(socket_, "GET", "/v1/view");
        return r.status == 200 ? json::parse(r.body) : json();
    }

    std::string dir_, socket_;
    int port_ = 0;
    pid_t daemon_ = 0;
};

const char* kEnvSecret = "env-secret-5f1d2c77";
const char* kArgvSecret = "argv-secret-91b2e0aa";

// This test verifies the page in Chromium against a daemon with a replay under way: it loads
// without console errors, shows the four GPUs and the running tasks with their owners, follows
// a task from running to finished without being reloaded, marks an out-of-memory crash on the
// timeline, never shows a task's environment or command line, and fits a phone's width; then
// `carma top --once` and the `carma report` page (in the same browser) against the same daemon.
// Screenshots are kept in the build's test-artifacts/ directory.
TEST_F(WebTest, PageInAHeadlessBrowser) {
    const std::string chromium = test_support::find_chromium();
    ASSERT_FALSE(chromium.empty())
        << "no chromium on PATH (nor $CARMA_CHROMIUM): scripts/setup installs Debian's chromium";
    // OR-MAGM places without memory information, as `carma demo` does: the demo trace's
    // Mask R-CNN lands beside a running job and runs out of memory.
    ASSERT_EQ(start({"--web", "127.0.0.1:" + std::to_string(port_), "--policy", "OR-MAGM"}), -1)
        << log_text();
    ASSERT_TRUE(eventually([&] {
        const json v = view();
        return v.is_object() && v["gpus"].size() == 4 && v["gpus"][0]["window"]["smact"].size() == 30;
    })) << log_text();

    // A task whose environment and command line carry secrets; held, so it stays on the page
    // (in the queue) without changing where the demo's tasks go.
    const json secret_task = {
        {"name", "secretive"},
        {"command", {"/bin/sh", "-c", std::string("sleep 600; : ") + kArgvSecret}},
        {"workdir", "/tmp"},
        {"hold", true},
        {"env", {{"CARMA_WEB_TEST_TOKEN", kEnvSecret}}}};
    const Reply submitted = over_socket(socket_, "POST", "/v1/tasks", secret_task.dump());
    ASSERT_EQ(submitted.status, 201) << submitted.body;
    const int secret_id = json::parse(submitted.body)["id"];

    const std::string replay = std::string(CARMA_BIN) + " replay demo --socket " + socket_ +
                               " --time-scale 60 >" + dir_ + "/replay.log 2>&1 &";
    ASSERT_EQ(std::system(replay.c_str()), 0);

    Browser browser(chromium, dir_ + "/profile", dir_ + "/chromium.log");
    const std::string page = browser.open_page();
    browser.call("Page.navigate", {{"url", "http://127.0.0.1:" + std::to_string(port_) + "/"}},
                 page);
    auto eval = [&](const std::string& js) { return browser.evaluate(page, js); };
    auto page_true = [&](const std::string& js) {
        return eventually([&] { return eval("Boolean(" + js + ")") == true; }, 120s);
    };
    ASSERT_TRUE(page_true("document.querySelectorAll('#gpus [data-gpu]').length === 4"))
        << eval("document.body.innerText");
    eval("window.__carmaLoadedOnce = 42");  // gone if the page were ever reloaded

    // Running tasks with their owners, as the daemon has them.
    ASSERT_TRUE(page_true("document.querySelectorAll('#running tr[data-task]').length >= 2"))
        << eval("document.body.innerText");
    const json rows = eval(
        "[...document.querySelectorAll('#running tr[data-task]')].map(r => ({id: "
        "Number(r.dataset.task), user: r.cells[1].textContent, name: r.cells[2].textContent}))");
    ASSERT_FALSE(rows.empty());
    const json daemon_view = view();
    int matched = 0;
    for (const json& row : rows) {
        for (const json& t : daemon_view.value("running", json::array())) {
            if (t["id"] == row["id"]) {
                EXPECT_EQ(row["user"], t["user"]) << row.dump();
                EXPECT_EQ(row["name"], t["name"]) << row.dump();
                ++matched;
            }
        }
    }
    EXPECT_GT(matched, 0) << rows.dump() << daemon_view["running"].dump();
    // Each GPU card names the owners of the tasks on it.
    const json card_tasks = eval(
        "[...document.querySelectorAll('#gpus [data-gpu] li[data-task]')].map(li => "
        "li.dataset.user)");
    EXPECT_FALSE(card_tasks.empty());

    // The demo's Mask R-CNN runs out of memory beside another job; the timeline marks it.
    ASSERT_TRUE(eventually([&] {
        const json v = view();  // one snapshot, kept alive while its parts are read
        for (const json& t : v.value("recent", json::array())) {
            if (t.value("ooms", 0) > 0) {
                return true;
            }
        }
        for (const json& t : v.value("queue", json::array())) {
            if (t["state"] == "recovering") {
                return true;
            }
        }
        return false;
    }, 180s)) << read_text(dir_ + "/replay.log") << view().dump();
    eval("document.getElementById('hours').dispatchEvent(new Event('change')), true");
    EXPECT_TRUE(page_true("document.querySelectorAll('#timeline svg[data-timeline-gpu]').length === 4"));
    EXPECT_TRUE(page_true("document.querySelector('#timeline g.oom')"))
        << eval("document.getElementById('timeline').innerHTML.slice(0, 2000)");
    // Minutes of history over the default six-hour window: the samples' buckets follow the span
    // drawn (at most ten minutes here: a second or so), not the six hours asked (43 s).
    EXPECT_TRUE(page_true("Number(document.getElementById('timeline').dataset.stepS) < 5"))
        << eval("document.getElementById('timeline').dataset.stepS");

    // A replayed task seen running on the page later shows as finished, without a reload.
    json followed;
    for (const json& row : rows) {
        if (row["id"] != secret_id) {
            followed = row["id"];
            break;
        }
    }
    ASSERT_FALSE(followed.is_null()) << rows.dump();
    const std::string finished_row =
        "document.querySelector('#recent tr[data-task=\"" + followed.dump() + "\"]')";
    EXPECT_TRUE(page_true(finished_row)) << eval("document.body.innerText");
    EXPECT_EQ(eval("window.__carmaLoadedOnce"), 42);

    // Mid-run, with tasks running, waiting and finished, for the user guide (docs/web-page.png is
    // such a screenshot).
    const std::string artifacts = CARMA_ARTIFACT_DIR;
    browser.screenshot(page, artifacts + "/web-page.png");
    EXPECT_TRUE(fs::file_size(artifacts + "/web-page.png") > 10000);

    // Never a task's environment or command line: not in the page, not in what it reads.
    const std::string html = eval("document.documentElement.outerHTML");
    EXPECT_EQ(html.find(kEnvSecret), std::string::npos);
    EXPECT_EQ(html.find(kArgvSecret), std::string::npos);
    EXPECT_NE(html.find("secretive"), std::string::npos) << "the secretive task is not shown";
    for (const char* target : {"/v1/view", "/v1/timeline?since=0"}) {
        const Reply r = tcp_request(port_, "GET", target);
        EXPECT_EQ(r.status, 200) << target << ": " << r.body;
        EXPECT_EQ(r.body.find(kEnvSecret), std::string::npos) << target;
        EXPECT_EQ(r.body.find(kArgvSecret), std::string::npos) << target;
    }

    // A phone: nothing wider than the screen (tables scroll inside their own box).
    browser.call("Emulation.setDeviceMetricsOverride",
                 {{"width", 390}, {"height", 844}, {"deviceScaleFactor", 2}, {"mobile", true}},
                 page);
    EXPECT_TRUE(page_true("document.documentElement.scrollWidth <= window.innerWidth + 1"))
        << eval("document.documentElement.scrollWidth") << " > " << eval("window.innerWidth");
    browser.screenshot(page, artifacts + "/web-page-phone.png");

    // `carma top` and `carma report` read the same daemon: the top's frame names the GPUs and
    // the finished tasks' owners; the report page loads in the same browser with its time
    // charts and the out-of-memory mark.
    const std::string top_out = dir_ + "/top.txt";
    ASSERT_EQ(std::system((std::string(CARMA_BIN) + " top --once --socket " + socket_ + " >" +
                           top_out + " 2>&1").c_str()),
              0)
        << read_text(top_out);
    const std::string frame = read_text(top_out);
    EXPECT_NE(frame.find("GPU 3"), std::string::npos) << frame;
    EXPECT_NE(frame.find("secretive"), std::string::npos) << frame;
    EXPECT_EQ(frame.find(kEnvSecret), std::string::npos) << frame;
    const std::string report_dir = dir_ + "/report";
    const std::string report_log = dir_ + "/report.log";
    ASSERT_EQ(std::system((std::string(CARMA_BIN) + " report --socket " + socket_ + " --since 1h " +
                           report_dir + " >" + report_log + " 2>&1").c_str()),
              0)
        << read_text(report_log);
    browser.call("Emulation.clearDeviceMetricsOverride", json::object(), page);
    browser.call("Page.navigate", {{"url", "file://" + report_dir + "/index.html"}}, page);
    EXPECT_TRUE(page_true("document.readyState === 'complete' && "
                          "document.querySelectorAll('svg.timechart').length > 0"))
        << eval("document.body.innerText.slice(0, 2000)");
    EXPECT_TRUE(page_true("document.querySelector('.oom-mark')"));
    EXPECT_NE(eval("document.documentElement.outerHTML").get<std::string>().find("maskrcnn"),
              std::string::npos);
    EXPECT_EQ(eval("document.documentElement.outerHTML").get<std::string>().find(kEnvSecret),
              std::string::npos);
    browser.screenshot(page, artifacts + "/report-page.png");

    browser.drain();
    const std::vector<std::string> errors = browser.errors();
    EXPECT_TRUE(errors.empty()) << [&] {
        std::string all;
        for (const std::string& e : errors) {
            all += e + "\n";
        }
        return all;
    }();
    over_socket(socket_, "DELETE", "/v1/tasks/" + std::to_string(secret_id));
}

// This test verifies the share bars of fair share (issue 23) in Chromium, with two users: root's
// --exclusive task has run and been charged the whole GPU, and a held task of each of root and a
// useradd user keeps both on the page; each user's row shows, as its bar and mark, the same
// normalised usage and shares as GET /v1/share, the one over its share marked so.
TEST_F(WebTest, ShareBarsOfTwoUsers) {
    const std::string chromium = test_support::find_chromium();
    ASSERT_FALSE(chromium.empty())
        << "no chromium on PATH (nor $CARMA_CHROMIUM): scripts/setup installs Debian's chromium";
    std::optional<passwd> bob;
    ASSERT_NO_FATAL_FAILURE(
        test_support::root_and_user("carma-test-bob", bob, "for a second user's share bar"));
    ASSERT_EQ(::chmod(dir_.c_str(), 0711), 0);  // bob reaches the socket, lists nothing
    ASSERT_EQ(start({"--web", "127.0.0.1:" + std::to_string(port_)}), -1) << log_text();

    const json charged = {{"name", "charged"},
                          {"command", {"/bin/sleep", "2"}},
                          {"workdir", "/tmp"},
                          {"exclusive", true}};
    Reply r = over_socket(socket_, "POST", "/v1/tasks", charged.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    const int charged_id = json::parse(r.body)["id"];
    const json held = {{"name", "held"},
                       {"command", {"/bin/sleep", "600"}},
                       {"workdir", "/tmp"},
                       {"hold", true}};
    r = over_socket(socket_, "POST", "/v1/tasks", held.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    // bob's, from a child process of his (before the browser: no threads yet to fork beside).
    ASSERT_EQ(test_support::as_user(*bob, [&] {
                  return over_socket(socket_, "POST", "/v1/tasks", held.dump()).status == 201
                             ? 0
                             : 1;
              }),
              0)
        << "bob's submission failed";
    ASSERT_TRUE(eventually([&] {
        const Reply t = over_socket(socket_, "GET", "/v1/tasks/" + std::to_string(charged_id));
        return t.status == 200 && json::parse(t.body)["state"] == "succeeded";
    }, 60s)) << log_text();

    const Reply share_reply = over_socket(socket_, "GET", "/v1/share");
    ASSERT_EQ(share_reply.status, 200) << share_reply.body;
    std::map<std::string, json> share;
    const json standings = json::parse(share_reply.body);
    for (const json& u : standings["users"]) {
        share[u["user"].get<std::string>()] = u;
    }
    ASSERT_TRUE(share.contains("root") && share.contains("carma-test-bob")) << share_reply.body;
    EXPECT_GT(share["root"]["usage_norm"].get<double>(), 0.99) << share_reply.body;
    EXPECT_EQ(share["carma-test-bob"]["usage_norm"].get<double>(), 0) << share_reply.body;

    Browser browser(chromium, dir_ + "/profile", dir_ + "/chromium.log");
    const std::string page = browser.open_page();
    browser.call("Page.navigate", {{"url", "http://127.0.0.1:" + std::to_string(port_) + "/"}},
                 page);
    auto eval = [&](const std::string& js) { return browser.evaluate(page, js); };
    ASSERT_TRUE(eventually([&] {
        return eval("document.querySelectorAll('#queue-summary tr[data-user] svg.share-bar')"
                    ".length >= 2") == true;
    }, 60s)) << eval("document.body.innerText");
    const json bars = eval(
        "Object.fromEntries([...document.querySelectorAll('#queue-summary tr[data-user]')].map("
        "r => [r.dataset.user, {usage: Number(r.querySelector('rect[data-usage]').dataset.usage),"
        " share: Number(r.querySelector('line[data-share]').dataset.share),"
        " over: r.querySelector('rect[data-usage]').classList.contains('share-over')}]))");
    for (const char* user : {"root", "carma-test-bob"}) {
        ASSERT_TRUE(bars.contains(user)) << bars.dump();
        EXPECT_NEAR(bars[user]["usage"].get<double>(), share[user]["usage_norm"].get<double>(),
                    1e-3)
            << user;
        EXPECT_NEAR(bars[user]["share"].get<double>(), share[user]["shares_norm"].get<double>(),
                    1e-3)
            << user;
    }
    EXPECT_EQ(bars["root"]["over"], true) << bars.dump();
    EXPECT_EQ(bars["carma-test-bob"]["over"], false) << bars.dump();
    browser.drain();
    EXPECT_TRUE(browser.errors().empty()) << browser.errors().front();
}

// This test verifies the web listener's rules: on loopback it needs nothing; it serves the page
// and what the page reads but nothing that changes anything or shows a log; an address that is
// not loopback is refused without a token file, and with one every request needs the token
// (header, or the cookie that /?token= sets).
TEST_F(WebTest, WebListenerIsReadOnlyAndGuardedOffLoopback) {
    ASSERT_EQ(start({"--web", "127.0.0.1:" + std::to_string(port_)}), -1) << log_text();
    EXPECT_EQ(tcp_request(port_, "GET", "/").status, 200);
    EXPECT_EQ(tcp_request(port_, "GET", "/app.js").status, 200);
    EXPECT_EQ(tcp_request(port_, "GET", "/style.css").status, 200);
    const Reply v = tcp_request(port_, "GET", "/v1/view");
    ASSERT_EQ(v.status, 200) << v.body;
    EXPECT_TRUE(json::parse(v.body)["viewer"].is_null()) << "the web listener names no viewer";
    EXPECT_EQ(json::parse(over_socket(socket_, "GET", "/v1/view").body)["viewer"], "root");
    EXPECT_EQ(over_socket(socket_, "GET", "/").status, 200) << "the page is on the socket too";
    const std::string body = R"({"command":["/bin/true"],"workdir":"/tmp"})";
    EXPECT_EQ(tcp_request(port_, "POST", "/v1/tasks", {}, body).status, 404);
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/tasks").status, 404);
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/tasks/1/logs").status, 404);
    EXPECT_EQ(tcp_request(port_, "DELETE", "/v1/tasks/1").status, 404);
    const Reply metrics = tcp_request(port_, "GET", "/metrics");
    EXPECT_EQ(metrics.status, 200) << "a Prometheus server scrapes the web listener too";
    EXPECT_NE(metrics.body.find("carma_tasks{state=\"queued\"}"), std::string::npos)
        << metrics.body;
    const Reply bad_points = tcp_request(port_, "GET", "/v1/timeline?points=3");
    EXPECT_EQ(bad_points.status, 400);
    EXPECT_NE(bad_points.body.find("points"), std::string::npos) << bad_points.body;
    stop();

    // Not loopback: refused without the page's own token file, naming what to do.
    ASSERT_NE(start({"--web", "0.0.0.0:" + std::to_string(port_)}), -1);
    EXPECT_NE(log_text().find("--web-token-file"), std::string::npos) << log_text();

    const std::string token_file = dir_ + "/web-token";
    const std::string token = "0123456789abcdef0123456789abcdef";
    std::ofstream(token_file) << token << "\n";
    ::chmod(token_file.c_str(), 0600);
    ASSERT_EQ(start({"--web", "0.0.0.0:" + std::to_string(port_), "--web-token-file",
                     token_file}),
              -1)
        << log_text();
    const Reply anonymous = tcp_request(port_, "GET", "/");
    EXPECT_EQ(anonymous.status, 401);
    EXPECT_NE(anonymous.body.find("token"), std::string::npos) << anonymous.body;
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/view").status, 401);
    EXPECT_EQ(tcp_request(port_, "GET", "/?token=wrong-token-wrong-token").status, 401);
    const Reply entered = tcp_request(port_, "GET", "/?token=" + token);
    EXPECT_EQ(entered.status, 303);
    const std::string cookie = entered.headers.count("Set-Cookie")
                                   ? entered.headers.find("Set-Cookie")->second
                                   : std::string();
    EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
    EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos) << cookie;
    EXPECT_EQ(cookie.find(token), std::string::npos) << "a session stands for the token";
    const std::string pair = cookie.substr(0, cookie.find(';'));
    EXPECT_EQ(tcp_request(port_, "GET", "/", {{"Cookie", pair}}).status, 200);
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/view", {{"Cookie", pair}}).status, 200);
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/view", {{"Authorization", "Bearer " + token}}).status,
              200);
    EXPECT_EQ(tcp_request(port_, "GET", "/metrics").status, 401);
    EXPECT_EQ(tcp_request(port_, "GET", "/metrics", {{"Authorization", "Bearer " + token}}).status,
              200)
        << "a Prometheus server scrapes with the page's token";
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/view", {{"Cookie", "carma_token=" + token}}).status,
              401)
        << "the raw token is no cookie";
    EXPECT_EQ(tcp_request(port_, "GET", "/v1/view", {{"Cookie", "carma_session=v1.9999999999.00"}})
                  .status,
              401);
}

}  // namespace
}  // namespace carma
