// End-to-end tests of `carma serve`: a real daemon process on emulated GPUs in a temporary
// directory, real supervisors and real (fake) training jobs, driven through the API client.

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "http_support.h"
#include "support.h"
#include "users.h"
#include "api/client.h"
#include "daemon/daemon_fixture.h"
#include "daemon/daemon_programs.h"

#ifndef CARMA_FAKE_MPS_CONTROL
#error "CARMA_FAKE_MPS_CONTROL must name the fake nvidia-cuda-mps-control"
#endif

extern char** environ;

namespace carma {
namespace {

using daemon_test::as_user;
using daemon_test::DaemonTest;
using daemon_test::is_final;
using daemon_test::write_config;
using test_support::eventually;
using test_support::read_text;
using test_support::ensure_user;
using test_support::root_and_user;

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

using RawReply = test_support::HttpReply;
using test_support::socket_request;

// This test verifies submit, queue, show, logs and cancel (of a running and of a queued task).
TEST_F(DaemonTest, SubmitQueueShowLogsCancel) {
    start("exclusive");
    const TaskId echo = submit({{"name", "echo"},
                                {"command", {"/bin/sh", "-c", "echo out-line; echo err-line >&2"}},
                                {"workdir", "/tmp"}});
    json done = wait_final(echo);
    EXPECT_EQ(done["state"], "succeeded");
    ASSERT_EQ(done["attempt_list"].size(), 1u);
    EXPECT_EQ(done["attempt_list"][0]["outcome"], "succeeded");
    auto out = client().logs(echo, {});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->text, "out-line\n");
    auto err = client().logs(echo, api::LogRequest{api::LogStream::Stderr, std::nullopt, 0});
    ASSERT_TRUE(err);
    EXPECT_EQ(err->text, "err-line\n");

    // Four long tasks take the four GPUs; a fifth waits and is cancelled before it starts.
    const auto sleepers = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return all_running(sleepers); }));
    const TaskId waiting = submit({{"command", {"/bin/sleep", "1"}}, {"workdir", "/tmp"}});
    std::this_thread::sleep_for(300ms);  // several scheduler rounds (time scale 60)
    EXPECT_EQ(state(waiting), "queued");
    auto listed = client().list_tasks(false);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 5u);  // 4 running + 1 queued; the finished echo is hidden
    // started_at: the current attempt's start for running tasks, as the attempt records it;
    // null for one never started.
    for (const json& t : (*listed)["tasks"]) {
        if (t["id"] == waiting) {
            EXPECT_TRUE(t["started_at"].is_null()) << t.dump();
            continue;
        }
        auto shown = client().task(t["id"].get<TaskId>());
        ASSERT_TRUE(shown);
        EXPECT_EQ(t["started_at"], (*shown)["attempt_list"].back()["started_at"]) << t.dump();
        EXPECT_EQ((*shown)["started_at"], t["started_at"]);
    }
    ASSERT_TRUE(client().cancel(waiting));
    EXPECT_EQ(state(waiting), "cancelled");

    ASSERT_TRUE(client().cancel(sleepers[0]));
    json cancelled = wait_final(sleepers[0]);
    EXPECT_EQ(cancelled["state"], "cancelled");
    EXPECT_EQ(cancelled["attempt_list"][0]["outcome"], "cancelled");
    auto again = client().cancel(sleepers[0]);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("already ended"), std::string::npos);
}

// This test verifies --time-limit: the attempt is stopped at the limit and the task ends
// `timeout` (not retried, not "cancelled"), with the event that says why.
TEST_F(DaemonTest, TimeLimitEndsTheTaskAsTimeout) {
    start("exclusive");
    json body = {{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}, {"time_limit_s", 1}};
    const TaskId id = submit(body);
    EXPECT_EQ(task(id)["time_limit_s"], 1);
    const json done = wait_final(id, 60s);
    EXPECT_EQ(done["state"], "timeout") << done.dump();
    ASSERT_EQ(done["attempt_list"].size(), 1u);
    EXPECT_EQ(done["attempt_list"][0]["outcome"], "timeout");
    EXPECT_NE(done["message"].get<std::string>().find("time limit"), std::string::npos);
    bool said = false;
    for (const json& e : events()) {
        said = said || (e["task"] == id && e["kind"] == "timeout");
    }
    EXPECT_TRUE(said);
    // A task that finishes within its limit is not touched.
    body["command"] = {"/bin/true"};
    body["time_limit_s"] = 3600;
    EXPECT_EQ(wait_final(submit(body))["state"], "succeeded");
}

// This test verifies --after: a dependent starts only once its dependency succeeded, and fails
// (with the reason, never starting) when one ended otherwise, transitively; an unknown
// dependency is refused at submission.
TEST_F(DaemonTest, DependenciesRunInOrderAndFailTogether) {
    start("exclusive");
    const std::string marker = dir_ + "/first-done";
    const TaskId first = submit({{"command", {"/bin/sh", "-c", "sleep 1; touch " + marker}},
                                 {"workdir", "/tmp"}});
    // Fails unless the first task has finished when it starts.
    const TaskId second = submit({{"command", {"/bin/test", "-f", marker}},
                                  {"workdir", "/tmp"},
                                  {"after", {first}}});
    EXPECT_EQ(state(second), "queued");
    EXPECT_NE(task(second)["message"].get<std::string>().find("waits for"), std::string::npos);
    EXPECT_EQ(wait_final(second)["state"], "succeeded");

    const TaskId failing = submit({{"command", {"/bin/false"}}, {"workdir", "/tmp"}});
    const TaskId dependent = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                     {"after", {failing}}});
    const TaskId transitive = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                      {"after", {first, dependent}}});
    const json d = wait_final(dependent);
    EXPECT_EQ(d["state"], "failed");
    EXPECT_EQ(d["attempts"], 0);
    EXPECT_NE(d["message"].get<std::string>().find(
                  fmt::format("dependency task {} ended failed", failing)),
              std::string::npos)
        << d.dump();
    const json t = wait_final(transitive);
    EXPECT_EQ(t["state"], "failed");
    EXPECT_NE(t["message"].get<std::string>().find(std::to_string(dependent)), std::string::npos);

    auto unknown = client().submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                    {"after", {999999}}});
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("999999 does not exist"), std::string::npos);
}

// This test verifies hold and release: a held task never starts on idle GPUs until released;
// only queued tasks can be held and only held ones released. With --after, release leaves the
// dependency in force.
TEST_F(DaemonTest, HoldAndRelease) {
    start("exclusive");
    const TaskId held = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"hold", true}});
    EXPECT_EQ(state(held), "held");
    std::this_thread::sleep_for(500ms);  // many rounds with four idle GPUs
    EXPECT_EQ(state(held), "held");
    auto again = client().hold(held, true);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("already held"), std::string::npos);
    ASSERT_TRUE(client().hold(held, false));
    EXPECT_EQ(wait_final(held)["state"], "succeeded");
    auto late = client().hold(held, false);
    ASSERT_FALSE(late);
    EXPECT_NE(late.error().message.find("not held"), std::string::npos);

    const TaskId sleeper = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return state(sleeper) == "running"; }));
    auto running = client().hold(sleeper, true);
    ASSERT_FALSE(running);
    EXPECT_NE(running.error().message.find("only a queued task"), std::string::npos);
    const TaskId waiting = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                   {"after", {sleeper}}});
    ASSERT_TRUE(client().hold(waiting, true));
    ASSERT_TRUE(client().hold(waiting, false));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(state(waiting), "queued");  // still waits for the sleeper
    ASSERT_TRUE(client().cancel(sleeper));
    EXPECT_EQ(wait_final(waiting)["state"], "failed");  // the sleeper was cancelled
}

// This test verifies that /metrics adds up and is valid Prometheus text (issue 22, item 4): a
// series for every state, summing to every task the daemon holds (held and timed-out ones
// included), the queues' lengths, the GPUs each user holds, wait and run times as histograms,
// SMOCC and DRAMA per GPU; and that Prometheus' own checker, promtool, accepts it.
TEST_F(DaemonTest, MetricsAddUpAndPassPromtool) {
    start("exclusive");
    const TaskId done = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}});
    ASSERT_EQ(wait_final(done)["state"], "succeeded");
    const TaskId late = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"},
                                {"time_limit_s", 1}});
    ASSERT_EQ(wait_final(late)["state"], "timeout");
    const auto sleepers = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    const TaskId waiting = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}});
    ASSERT_EQ(state(waiting), "queued");
    const TaskId held = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"hold", true}});
    ASSERT_EQ(state(held), "held");
    // A task shows running as soon as its attempt is recorded; it counts once it has started.
    RawReply m;
    ASSERT_TRUE(eventually([&] {
        m = socket_request(socket_, "GET", "/metrics");
        return m.status == 200 &&
               m.body.find(fmt::format("\ncarma_attempts_total {}\n", 2 + sleepers.size())) !=
                   std::string::npos;
    })) << m.body;
    auto value = [&](const std::string& series) -> std::optional<double> {
        const std::size_t at = m.body.find("\n" + series + " ");
        if (at == std::string::npos) {
            return std::nullopt;
        }
        return std::stod(m.body.substr(at + series.size() + 2));
    };
    double tasks = 0;
    for (const char* s : {"queued", "recovering", "running", "succeeded", "failed", "cancelled",
                          "lost", "rejected", "held", "timeout"}) {
        const auto n = value(fmt::format("carma_tasks{{state=\"{}\"}}", s));
        ASSERT_TRUE(n) << "no carma_tasks series for state " << s << "\n" << m.body;
        tasks += *n;
    }
    EXPECT_EQ(tasks, static_cast<double>(held)) << "every task, ids 1.." << held;
    EXPECT_EQ(value("carma_tasks{state=\"held\"}"), 1);
    EXPECT_EQ(value("carma_tasks{state=\"timeout\"}"), 1);
    EXPECT_EQ(value("carma_queue_length{queue=\"main\"}"), 1) << m.body;
    EXPECT_EQ(value("carma_queue_length{queue=\"recovery\"}"), 0);
    EXPECT_EQ(value(fmt::format("carma_user_running_gpus{{user=\"{}\"}}", task(done)["user"]
                                                                              .get<std::string>())),
              static_cast<double>(sleepers.size()))
        << m.body;
    EXPECT_EQ(value("carma_task_wait_seconds_count"), 2 + static_cast<double>(sleepers.size()));
    EXPECT_EQ(value("carma_attempt_run_seconds_count"), 2);
    EXPECT_EQ(value("carma_attempt_run_seconds_bucket{le=\"+Inf\"}"), 2);
    EXPECT_TRUE(value("carma_gpu_smocc{gpu=\"0\"}")) << m.body;
    EXPECT_TRUE(value("carma_gpu_drama{gpu=\"0\"}")) << m.body;

    const std::string file = dir_ + "/metrics.txt";
    std::ofstream(file) << m.body;
    const int rc = std::system(("command -v promtool >/dev/null 2>&1 || exit 127; promtool check "
                                "metrics < " + file + " > " + dir_ + "/promtool.out 2>&1")
                                   .c_str());
    ASSERT_NE(WEXITSTATUS(rc), 127)
        << "promtool is not installed (Debian's prometheus package; scripts/setup installs it)";
    EXPECT_EQ(rc, 0) << "promtool check metrics: " << test_support::read_text(dir_ + "/promtool.out")
                     << "\n" << m.body;
}

// This test verifies --array through the CLI: one member per index, each told its index, all
// recorded with the array's id; `carma cancel ID_*` cancels the rest of an array, and
// `carma cancel --me --state queued` every queued task of the caller's, leaving running ones.
TEST_F(DaemonTest, ArraysAndCancellingMany) {
    start("exclusive");
    const std::string out = dir_ + "/array";
    fs::create_directories(out);
    // Exit status and stdout; stderr, which may carry notes (a CARMA_* variable of the test's
    // environment not passed on), is appended to stdout only when the command failed.
    auto carma = [&](const std::string& command, const std::string& args) {
        const std::string cmd = std::string(CARMA_BIN) + " " + command + " --socket " + socket_ +
                                " " + args + " > " + dir_ + "/cli.out 2> " + dir_ + "/cli.err";
        const int rc = std::system(cmd.c_str());
        return std::pair{rc, read_text(dir_ + "/cli.out") +
                                 (rc != 0 ? read_text(dir_ + "/cli.err") : std::string())};
    };
    auto [rc, text] = carma("submit", "--json --array 0-3 --workdir " + out +
                            " -- /bin/sh -c 'echo $CARMA_ARRAY_ID > idx.$CARMA_ARRAY_INDEX'");
    ASSERT_EQ(rc, 0) << text;
    const json answer = json::parse(text);
    ASSERT_EQ(answer["array_tasks"].size(), 4u);
    const TaskId array_id = answer["id"];
    for (std::size_t i = 0; i < 4; ++i) {
        const TaskId id = answer["array_tasks"][i];
        const json done = wait_final(id);
        EXPECT_EQ(done["state"], "succeeded");
        EXPECT_EQ(done["array"]["id"], array_id);
        EXPECT_EQ(done["array"]["index"], i);
        EXPECT_EQ(read_text(out + "/idx." + std::to_string(i)), std::to_string(array_id) + "\n");
    }

    const auto sleepers = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return all_running(sleepers); }));
    auto [rc2, text2] = carma("submit", "--json --array 0-2 -- /bin/true");
    ASSERT_EQ(rc2, 0) << text2;
    const json waiting = json::parse(text2);
    auto [rc3, text3] = carma("cancel", "'" + std::to_string(waiting["id"].get<TaskId>()) + "_*'");
    EXPECT_EQ(rc3, 0) << text3;
    for (const json& id : waiting["array_tasks"]) {
        EXPECT_EQ(state(id.get<TaskId>()), "cancelled");
    }
    const TaskId one = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}});
    const TaskId two = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"hold", true}});
    auto [rc4, text4] = carma("cancel", "--me --state queued,held");
    EXPECT_EQ(rc4, 0) << text4;
    EXPECT_EQ(state(one), "cancelled");
    EXPECT_EQ(state(two), "cancelled");
    for (TaskId id : sleepers) {
        EXPECT_EQ(state(id), "running");
    }
    auto [rc5, text5] = carma("cancel", "--state qeued");
    EXPECT_NE(rc5, 0);
    EXPECT_NE(text5.find("did you mean 'queued'"), std::string::npos) << text5;
}

// ---- docs/api.md against the daemon -----------------------------------------------------------

// One row of docs/api.md's endpoint table.
struct DocEndpoint {
    std::string method, path, query, answer;
};

// Cells split at '|' that is not escaped as "\|" (the table escapes pipes inside cells).
std::vector<std::string> table_cells(const std::string& row) {
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < row.size(); ++i) {
        if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|') {
            cell += '|';
            ++i;
        } else if (row[i] == '|') {
            cells.push_back(cell);
            cell.clear();
        } else {
            cell += row[i];
        }
    }
    return cells;
}

std::vector<DocEndpoint> doc_endpoints(const std::string& markdown) {
    std::vector<DocEndpoint> out;
    std::istringstream in(markdown);
    const std::regex head(R"(^ *`(GET|POST|DELETE) ([^`]+)` *$)");
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with("| `")) {
            continue;
        }
        const std::vector<std::string> cells = table_cells(line);
        std::smatch m;
        if (cells.size() >= 3 && std::regex_match(cells[0], m, head)) {
            out.push_back({m[1], m[2], cells[1], cells[2]});
        }
    }
    return out;
}

// Every "name" token in a piece of the docs: the field names a JSON answer may have.
std::set<std::string> quoted_words(const std::string& text) {
    std::set<std::string> out;
    const std::regex word("\"([A-Za-z_][A-Za-z0-9_]*)\"");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), word);
         it != std::sregex_iterator(); ++it) {
        out.insert((*it)[1]);
    }
    return out;
}

// Every object key anywhere in `j`, as "key" (numeric keys, e.g. GPU indices, left out).
void collect_keys(const json& j, std::set<std::string>& out) {
    if (j.is_object()) {
        for (const auto& [k, v] : j.items()) {
            if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0])) == 0) {
                out.insert(k);
            }
            collect_keys(v, out);
        }
    } else if (j.is_array()) {
        for (const json& e : j) {
            collect_keys(e, out);
        }
    }
}

// This test verifies that docs/api.md says what the daemon does: every documented endpoint
// answers its method (no 404/405); every documented query parameter takes a valid value and
// refuses a bad one naming itself; the task object has exactly the documented fields; every
// field of every JSON answer is documented; every documented metric is exported and every
// exported metric documented.
TEST_F(DaemonTest, ApiDocsMatchTheDaemon) {
    std::ifstream doc_file(std::string(CARMA_SOURCE_DIR) + "/docs/api.md");
    const std::string doc((std::istreambuf_iterator<char>(doc_file)), {});
    ASSERT_FALSE(doc.empty()) << "cannot read docs/api.md";
    const std::vector<DocEndpoint> endpoints = doc_endpoints(doc);
    ASSERT_GE(endpoints.size(), 10u) << "the endpoint table of docs/api.md was not found";

    start("exclusive");
    const json minimal = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}};
    const TaskId done = submit(minimal);
    ASSERT_EQ(wait_final(done)["state"], "succeeded");

    // The task object: the documented example's fields, exactly (as its owner sees it).
    const std::size_t block = doc.find("```json", doc.find("## Task object"));
    ASSERT_NE(block, std::string::npos);
    const json example = json::parse(doc.substr(block + 7, doc.find("```", block + 7) - block - 7));
    const json shown = task(done);
    std::set<std::string> documented, actual;
    for (const auto& [k, v] : example.items()) {
        documented.insert(k);
    }
    for (const auto& [k, v] : shown.items()) {
        actual.insert(k);
    }
    EXPECT_EQ(actual, documented) << "task object fields differ from docs/api.md";
    documented.clear();
    actual.clear();
    for (const auto& [k, v] : example["attempt_list"][0].items()) {
        documented.insert(k);
    }
    for (const auto& [k, v] : shown["attempt_list"][0].items()) {
        actual.insert(k);
    }
    EXPECT_EQ(actual, documented) << "attempt fields differ from docs/api.md";
    // Fields the docs show in any JSON example (the task object, accounting rows, ...).
    std::set<std::string> task_fields;
    for (std::size_t at = doc.find("```json"); at != std::string::npos;
         at = doc.find("```json", at + 7)) {
        const json shown_example = json::parse(
            doc.substr(at + 7, doc.find("```", at + 7) - at - 7), nullptr, false);
        if (!shown_example.is_discarded()) {
            collect_keys(shown_example, task_fields);
        }
    }

    // A valid and an invalid value for every query parameter the docs name.
    const std::map<std::string, std::pair<std::string, std::string>> samples = {
        {"all", {"1", "maybe"}},         {"stream", {"stderr", "bogus"}},
        {"attempt", {"1", "-1"}},        {"offset", {"0", "-5"}},
        {"after", {"0", "x"}},           {"task", {std::to_string(done), "-2"}},
        {"limit", {"5", "0"}},           {"user", {"root", ""}},
        {"state", {"succeeded", "bogus"}}, {"since", {"0", "yesterday-ish"}},
        {"until", {"9999999999", "-1"}},  {"points", {"20", "5"}},
        {"ran", {"1", "maybe"}}};
    const std::regex param(R"(\?([a-z_]+)=)");
    for (const DocEndpoint& e : endpoints) {
        SCOPED_TRACE(e.method + " " + e.path);
        std::string target = e.path;
        if (const std::size_t at = target.find("{id}"); at != std::string::npos) {
            TaskId id = done;
            if (e.method != "GET") {
                // Held, or queued for as long as the test needs (it waits for a held task).
                const TaskId blocker = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                               {"hold", true}});
                id = e.path.ends_with("/release")
                         ? blocker
                         : submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                   {"after", {blocker}}});
            }
            target.replace(at, 4, std::to_string(id));
        }
        const std::string body = e.method == "POST" && !e.path.starts_with("/v1/tasks/")
                                     ? minimal.dump()
                                     : std::string();
        if (e.path == "/v1/nodes/drain") {
            // This daemon schedules no nodes: the documented 409 (tests/cluster has the rest).
            const RawReply r = socket_request(socket_, e.method, target, R"({"node": "n1"})");
            EXPECT_EQ(r.status, 409) << r.body;
            continue;
        }
        const RawReply r = socket_request(socket_, e.method, target, body);
        EXPECT_GE(r.status, 200) << r.body;
        EXPECT_LT(r.status, 300) << r.body;
        if (e.path.starts_with("/v1/") && r.status >= 200 && r.status < 300 &&
            !e.path.ends_with("/logs")) {
            const json answer = json::parse(r.body, nullptr, false);
            ASSERT_FALSE(answer.is_discarded()) << r.body;
            std::set<std::string> keys;
            collect_keys(answer, keys);
            std::set<std::string> allowed = quoted_words(e.answer);
            allowed.insert(task_fields.begin(), task_fields.end());
            for (const std::string& k : keys) {
                EXPECT_TRUE(allowed.contains(k)) << "field '" << k << "' is not documented";
            }
        }
        for (auto it = std::sregex_iterator(e.query.begin(), e.query.end(), param);
             it != std::sregex_iterator(); ++it) {
            const std::string name = (*it)[1];
            ASSERT_TRUE(samples.contains(name)) << "no sample value for documented ?" << name;
            const auto& [good, bad] = samples.at(name);
            const std::string sep = target.find('?') == std::string::npos ? "?" : "&";
            const RawReply ok = socket_request(socket_, "GET", target + sep + name + "=" + good);
            EXPECT_EQ(ok.status, 200) << "?" << name << "=" << good << ": " << ok.body;
            if (!bad.empty()) {
                const RawReply no = socket_request(socket_, "GET", target + sep + name + "=" + bad);
                EXPECT_EQ(no.status, 400) << "?" << name << "=" << bad << ": " << no.body;
                EXPECT_NE(no.body.find(name), std::string::npos) << no.body;
            }
        }
    }

    // Metrics, both ways.
    const RawReply metrics = socket_request(socket_, "GET", "/metrics");
    ASSERT_EQ(metrics.status, 200);
    std::set<std::string> exported;
    const std::regex type_line(R"(# TYPE (carma_[a-z_]+))");
    for (auto it = std::sregex_iterator(metrics.body.begin(), metrics.body.end(), type_line);
         it != std::sregex_iterator(); ++it) {
        exported.insert((*it)[1]);
    }
    std::set<std::string> named;
    for (const DocEndpoint& e : endpoints) {
        if (e.path == "/metrics") {
            const std::regex metric(R"((carma_[a-z_]+))");
            for (auto it = std::sregex_iterator(e.answer.begin(), e.answer.end(), metric);
                 it != std::sregex_iterator(); ++it) {
                named.insert((*it)[1]);
            }
        }
    }
    EXPECT_EQ(exported, named) << "metrics differ from docs/api.md";
}

// This test verifies that a task's environment is what its submitter declared plus the
// allow-list and CARMA's own variables, never the daemon's.
TEST_F(DaemonTest, TaskEnvironmentIsDeclaredOnly) {
    start("exclusive");
    const TaskId id = submit({{"command", {"/usr/bin/env"}},
                              {"workdir", "/tmp"},
                              {"env", {{"EPOCHS", "3"}}}});
    ASSERT_EQ(wait_final(id)["state"], "succeeded");
    auto out = client().logs(id, {});
    ASSERT_TRUE(out);
    EXPECT_NE(out->text.find("EPOCHS=3\n"), std::string::npos) << out->text;
    EXPECT_NE(out->text.find("CUDA_VISIBLE_DEVICES=GPU-"), std::string::npos) << out->text;
    EXPECT_NE(out->text.find("CARMA_TASK_ID=" + std::to_string(id)), std::string::npos);
    EXPECT_NE(out->text.find("PATH="), std::string::npos);
    EXPECT_EQ(out->text.find("CARMA_DAEMON_ONLY_SECRET"), std::string::npos) << out->text;
}

// This test verifies that a second daemon on the same state directory refuses to start (it would
// launch the same queued tasks again), and the first keeps serving.
TEST_F(DaemonTest, SecondDaemonOnSameStateDirRefused) {
    start("exclusive");
    const std::string cmd = std::string(CARMA_BIN) + " serve --gpus emulated:4xA100-40GB " +
                            "--state-dir " + dir_ + "/state --socket " + dir_ +
                            "/other.sock 2>" + dir_ + "/second.err";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    std::ifstream in(dir_ + "/second.err");
    const std::string err(std::istreambuf_iterator<char>(in), {});
    EXPECT_NE(err.find("already uses the state directory"), std::string::npos) << err;
    EXPECT_TRUE(client().healthz());
}

// This test verifies a full disk: nothing accepted is lost. Submissions that cannot be stored
// are refused with 507 (not accepted and then forgotten); a task whose attempt cannot be
// prepared keeps its place in the queue (not failed, not shown queued while the scheduler lost
// it); once space returns every accepted task runs exactly once.
TEST_F(DaemonTest, FullDiskLosesNothingAccepted) {
    ASSERT_NO_FATAL_FAILURE(mount_small_state());
    // Submissions large enough to need new pages whatever slack the WAL has: above the default
    // per-task limit, which is not what this test is about.
    start("exclusive",
          {"--config", write_config(dir_, "limits:\n  max_submit_bytes_per_task: 0\n")});
    // One per GPU: what comes next waits.
    const auto sleepers = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    // Started, not only recorded as running: each attempt is recorded before it starts.
    ASSERT_TRUE(eventually([&] {
        int placed = 0;
        for (const json& e : events()) {
            placed += e["kind"] == "placed" ? 1 : 0;
        }
        return placed == 4;
    }));
    const std::string marks = dir_ + "/marks";
    fs::create_directories(marks);
    std::vector<TaskId> waiting;
    for (int i = 0; i < 5; ++i) {
        waiting.push_back(submit({{"command", {"/bin/sh", "-c", "echo x >> " + marks + "/" +
                                                                  std::to_string(i)}},
                                  {"workdir", "/tmp"}}));
    }
    // Fill the disk to the last byte.
    (void)std::system(("dd if=/dev/zero of=" + dir_ + "/state/filler bs=64k 2>/dev/null").c_str());
    int refused = 0;
    const std::string big(200000, 'x');  // needs new pages whatever slack the WAL has
    for (int i = 0; i < 10; ++i) {
        json body = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"env", {{"BIG", big}}}};
        const RawReply r = socket_request(socket_, "POST", "/v1/tasks", body.dump());
        ASSERT_TRUE(r.status == 201 || r.status == 507) << r.status << " " << r.body;
        if (r.status == 507) {
            ++refused;
            EXPECT_NE(r.body.find("free space"), std::string::npos) << r.body;
        }
    }
    EXPECT_GT(refused, 0);
    for (TaskId id : sleepers) {
        auto cancelled = client().cancel(id);
        ASSERT_TRUE(cancelled) << cancelled.error().message << daemon_log();
    }
    // Either the sleepers' ends cannot be stored (they keep their GPUs until they can: the
    // scheduler never drops what the store still calls running), or they can but no attempt can
    // be prepared. Both ways the waiting tasks wait, they do not fail.
    std::this_thread::sleep_for(3s);
    for (TaskId id : waiting) {
        EXPECT_TRUE(state(id) == "queued" || state(id) == "running" || state(id) == "succeeded")
            << id << " is " << state(id) << ": " << task(id).dump(2);
    }
    const std::string log = daemon_log();
    EXPECT_TRUE(log.find("could not start an attempt") != std::string::npos ||
                log.find("cannot record that attempt") != std::string::npos)
        << log;
    fs::remove(dir_ + "/state/filler");
    for (std::size_t i = 0; i < waiting.size(); ++i) {
        EXPECT_EQ(wait_final(waiting[i])["state"], "succeeded") << task(waiting[i]).dump(2);
        EXPECT_EQ(read_text(marks + "/" + std::to_string(i)), "x\n");  // ran exactly once
    }
    // Stopped while the disk was full: their supervisors recorded the ends all the same.
    for (TaskId id : sleepers) {
        EXPECT_EQ(wait_final(id)["state"], "cancelled") << task(id).dump(2);
    }
}

// This test verifies that tasks that end while the state directory's file system is full end
// `succeeded` once space returns, having run once: not `lost` because their supervisors could
// not write exit.json. One supervisor writes the end into the room it reserved before the task
// started; the other's room is taken away, so it keeps the end and writes it once there is space,
// and meanwhile the attempt stays running.
TEST_F(DaemonTest, TaskEndingOnAFullDiskSucceeds) {
    ASSERT_NO_FATAL_FAILURE(mount_small_state());
    start("exclusive");
    const std::string go = dir_ + "/go";
    const std::string marks = dir_ + "/marks";
    fs::create_directories(marks);
    std::vector<TaskId> ids;
    for (int i = 0; i < 2; ++i) {
        ids.push_back(submit({{"command",
                               {"/bin/sh", "-c",
                                "while [ ! -e " + go + " ]; do sleep 0.05; done; echo x >> " +
                                    marks + "/" + std::to_string(i)}},
                              {"workdir", "/tmp"}}));
    }
    auto attempt_dir = [&](TaskId id) {
        return dir_ + "/state/attempts/" + std::to_string(id) + "/1";
    };
    ASSERT_TRUE(eventually([&] {
        return all_running(ids) && fs::exists(attempt_dir(ids[0]) + "/task.pid") &&
               fs::exists(attempt_dir(ids[1]) + "/task.pid");
    })) << daemon_log();
    fs::remove(attempt_dir(ids[1]) + "/exit.json.reserve");
    (void)std::system(("dd if=/dev/zero of=" + dir_ + "/state/filler bs=64k 2>/dev/null").c_str());
    std::ofstream(go) << "go\n";
    // Both tasks have ended (their marks are written and their process groups gone).
    auto group_gone = [&](TaskId id) {
        pid_t pgid = 0;
        std::ifstream(attempt_dir(id) + "/task.pid") >> pgid;
        return pgid > 1 && ::kill(-pgid, 0) != 0 && errno == ESRCH;
    };
    ASSERT_TRUE(eventually([&] { return group_gone(ids[0]) && group_gone(ids[1]); }));
    EXPECT_TRUE(eventually([&] { return fs::exists(attempt_dir(ids[0]) + "/exit.json"); }));
    // The second supervisor holds the end; the daemon keeps the attempt running meanwhile.
    pid_t shim = 0;
    std::ifstream(attempt_dir(ids[1]) + "/shim.pid") >> shim;
    // A live shim names its request on its command line; an exited one (a zombie) names nothing.
    EXPECT_NE(read_text("/proc/" + std::to_string(shim) + "/cmdline").find(attempt_dir(ids[1])),
              std::string::npos)
        << "the supervisor exited without recording the end";
    EXPECT_FALSE(fs::exists(attempt_dir(ids[1]) + "/exit.json"));
    EXPECT_EQ(state(ids[1]), "running");

    fs::remove(dir_ + "/state/filler");
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const json done = wait_final(ids[i]);
        EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
        ASSERT_EQ(done["attempt_list"].size(), 1u) << done.dump(2);
        EXPECT_EQ(done["attempt_list"][0]["outcome"], "succeeded");
        EXPECT_EQ(done["attempt_list"][0]["exit_code"], 0);
        EXPECT_EQ(read_text(marks + "/" + std::to_string(i)), "x\n");  // ran exactly once
    }
}

// This test verifies that `carma logs -f` ends with the task's outcome and, for a failed task,
// the last lines of its stderr, with a non-zero exit status; a succeeded one exits 0.
TEST_F(DaemonTest, FollowedLogsEndWithTheOutcome) {
    start("exclusive");
    const TaskId bad = submit({{"command", {"/bin/sh", "-c", "echo working; echo 'boom: no "
                                                             "such file' >&2; exit 3"}},
                               {"workdir", "/tmp"},
                               {"max_attempts", 1}});
    const TaskId good = submit({{"command", {"/bin/echo", "fine"}}, {"workdir", "/tmp"}});
    wait_final(bad);
    wait_final(good);
    auto follow = [&](TaskId id) {
        const std::string cmd = std::string(CARMA_BIN) + " logs -f " + std::to_string(id) +
                                " --socket " + socket_ + " >" + dir_ + "/f.out 2>" + dir_ +
                                "/f.err";
        return std::system(cmd.c_str());
    };
    EXPECT_NE(follow(bad), 0);
    EXPECT_EQ(read_text(dir_ + "/f.out"), "working\n");
    const std::string err = read_text(dir_ + "/f.err");
    EXPECT_NE(err.find("failed"), std::string::npos) << err;
    EXPECT_NE(err.find("exit code 3"), std::string::npos) << err;
    EXPECT_NE(err.find("boom: no such file"), std::string::npos) << err;
    EXPECT_EQ(follow(good), 0);
    EXPECT_EQ(read_text(dir_ + "/f.out"), "fine\n");
    EXPECT_NE(read_text(dir_ + "/f.err").find("succeeded"), std::string::npos);
    // What docs/api.md says: attempts are counted, daemon-level events name no task.
    auto metrics = client().metrics();
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->find("\ncarma_attempts_total 2\n"), std::string::npos) << *metrics;
    const json all = events();
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all[0]["kind"], "daemon-started");
    EXPECT_TRUE(all[0]["task"].is_null()) << all[0].dump();
}

// This test verifies that starting an attempt does not hold the lock the API needs: with the
// supervisor's start held back (a wrapper around carma-shim that waits for a go file), status,
// GPU and submit calls are answered, and a cancel of the task being started is honoured once the
// start completes. Order, not time: every answer must come while the start is still held.
TEST_F(DaemonTest, ApiAnswersWhileAnAttemptStarts) {
    const std::string held = dir_ + "/shim-held";
    const std::string go = dir_ + "/go";
    const std::string wrapper = dir_ + "/slow-shim";
    std::ofstream(wrapper) << "#!/bin/sh\ntouch " << held << "\nwhile [ ! -e " << go
                           << " ]; do sleep 0.05; done\nexec " << CARMA_SHIM_PATH << " \"$@\"\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    start("exclusive", {"--shim", wrapper});
    // Lets a hung daemon fail the test instead of hanging it.
    std::thread watchdog([&] {
        for (int i = 0; i < 150 && !fs::exists(go); ++i) {  // 15 s, under the 30 s start limit
            std::this_thread::sleep_for(100ms);
        }
        std::ofstream(go) << "watchdog\n";
    });
    const TaskId first = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return fs::exists(held); }));
    api::ApiClient c = client();
    auto status = c.status();
    auto gpus = c.gpus();
    auto second = c.submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}});
    auto cancelled = c.cancel(first);
    const bool answered_while_held = !fs::exists(go);
    std::ofstream(go) << "test\n";
    watchdog.join();
    ASSERT_TRUE(status && gpus && second && cancelled);
    EXPECT_TRUE(answered_while_held) << "the API waited for the attempt's start";
    EXPECT_EQ((*status)["running"], 1) << status->dump();
    EXPECT_EQ(wait_final(first)["state"], "cancelled") << task(first).dump(2);
    EXPECT_EQ(wait_final((*second)["id"].get<TaskId>())["state"], "succeeded");
}

// This test verifies that GET /v1/status says how the daemon's loop keeps up with its period
// (1 / time_scale s), the figures `carma replay` compares to warn of a replay losing fidelity.
TEST_F(DaemonTest, StatusSaysHowTheLoopKeepsUpWithItsPeriod) {
    start("exclusive");  // at time scale 60
    json loop;
    ASSERT_TRUE(eventually([&] {
        auto status = client().status();
        loop = status ? (*status)["loop"] : json();
        return loop.is_object() && loop["periods"].get<double>() >= 20;
    })) << loop.dump();
    EXPECT_DOUBLE_EQ(loop["period_s"].get<double>(), 1.0 / 60);
    EXPECT_LE(loop["late_periods"].get<double>(), loop["periods"].get<double>());
    EXPECT_GE(loop["recent_late_share"].get<double>(), 0.0);
    EXPECT_LE(loop["recent_late_share"].get<double>(), 1.0);
    EXPECT_GE(loop["worst_late_periods"].get<double>(), 0.0);
    EXPECT_TRUE(loop["behind"].is_boolean());
}

// This test verifies that `carma replay` survives a daemon that is not there yet (restarting):
// it retries refused connections with backoff instead of dropping the rest of the trace.
TEST_F(DaemonTest, ReplayRetriesUntilTheDaemonAnswers) {
    const std::string out = dir_ + "/replay.out";
    const std::string cmd = std::string(CARMA_BIN) + " replay demo --socket " +
                            socket_ + " --time-scale 60 >" + out + " 2>&1; echo rc=$? >>" + out;
    std::thread replay([&] { (void)std::system(cmd.c_str()); });
    std::this_thread::sleep_for(2s);  // the replay meets a refused connection first
    start("exclusive");
    replay.join();
    const std::string text = read_text(out);
    EXPECT_NE(text.find("retrying in"), std::string::npos) << text;
    EXPECT_NE(text.find("submitted 9 of 9 tasks"), std::string::npos) << text;
    EXPECT_NE(text.find("rc=0"), std::string::npos) << text;
}

// This test verifies `carma admin backup`: a copy of the live database, taken while the daemon
// runs, that a daemon started on it serves with the same tasks.
TEST_F(DaemonTest, AdminBackupWhileRunning) {
    start("exclusive");
    const TaskId id = submit({{"name", "kept"}, {"command", {"/bin/true"}}, {"workdir", "/tmp"}});
    ASSERT_GT(id, 0);
    const std::string copy = dir_ + "/backup.db";
    const std::string cmd = std::string(CARMA_BIN) + " admin backup " + copy + " --state-dir " +
                            dir_ + "/state >" + dir_ + "/backup.out 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    stop(SIGTERM);
    fs::create_directories(dir_ + "/restored");
    fs::copy_file(copy, dir_ + "/restored/carma.db");
    const std::string restored = std::string(CARMA_BIN) + " serve --gpus emulated:1xA100-40GB " +
                                 "--state-dir " + dir_ + "/restored --socket " + dir_ +
                                 "/restored.sock >" + dir_ + "/restored.log 2>&1 &";
    ASSERT_EQ(std::system(restored.c_str()), 0);
    api::ApiClient c(dir_ + "/restored.sock");
    ASSERT_TRUE(eventually([&] { return c.healthz().has_value(); }, 30s));
    auto t = c.task(id);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ((*t)["name"], "kept");
    std::system(("pkill -TERM -f -- '--socket " + dir_ + "/restored.sock'").c_str());
}

std::string write_token(const std::string& path, mode_t mode = 0600) {
    std::ofstream(path) << "0123456789abcdef0123456789abcdef\n";
    ::chmod(path.c_str(), mode);
    return path;
}

int tcp_port() { return 20000 + static_cast<int>(::getpid() % 20000); }

// This test verifies the optional loopback TCP listener: requests need the bearer token, and a
// root daemon without tcp_run_as lets TCP clients look but never act (as root or anyone).
TEST_F(DaemonTest, TcpNeedsBearerToken) {
    const std::string token_file = write_token(dir_ + "/token");
    const int port = tcp_port();
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file", token_file});
    httplib::Client tcp("127.0.0.1", port);
    auto anonymous = tcp.Get("/v1/tasks");
    ASSERT_TRUE(anonymous);
    EXPECT_EQ(anonymous->status, 401);
    EXPECT_NE(anonymous->body.find("bearer token"), std::string::npos);
    httplib::Headers wrong = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdeX"}};
    auto guessed = tcp.Get("/v1/tasks", wrong);
    ASSERT_TRUE(guessed);
    EXPECT_EQ(guessed->status, 401);
    httplib::Headers auth = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdef"}};
    auto listed = tcp.Get("/v1/tasks", auth);
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->status, 200);
    EXPECT_TRUE(json::parse(listed->body).contains("tasks"));
    if (::geteuid() == 0) {
        const TaskId mine = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
        auto submitted = tcp.Post("/v1/tasks", auth,
                                  json{{"command", {"/bin/true"}}, {"workdir", "/tmp"}}.dump(),
                                  "application/json");
        ASSERT_TRUE(submitted);
        EXPECT_EQ(submitted->status, 403);
        EXPECT_NE(submitted->body.find("tcp_run_as"), std::string::npos) << submitted->body;
        auto cancelled = tcp.Delete("/v1/tasks/" + std::to_string(mine), auth);
        ASSERT_TRUE(cancelled);
        EXPECT_EQ(cancelled->status, 403);
        EXPECT_NE(cancelled->body.find("tcp_run_as"), std::string::npos) << cancelled->body;
        EXPECT_FALSE(is_final(state(mine)));
        ASSERT_TRUE(client().cancel(mine));
    }
}

// Runs `carma serve` with `args` in this test's directory and returns what it wrote to stderr
// when it refused to start ("" if it started, which fails the calling test).
std::string refused_start(const std::string& dir, const std::string& args) {
    const std::string cmd = std::string(CARMA_BIN) + " serve --gpus emulated:4xA100-40GB " +
                            "--state-dir " + dir + "/refused-state --socket " + dir +
                            "/refused.sock " + args + " 2>" + dir + "/refused.err";
    if (std::system(cmd.c_str()) == 0) {
        return "";
    }
    std::ifstream in(dir + "/refused.err");
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// This test verifies that a token file others may read, or a tcp_run_as of root, stops the
// daemon at start with a message that names the file or the key and the fix.
TEST_F(DaemonTest, TcpStartRefusals) {
    const std::string port = std::to_string(tcp_port());
    const std::string open_token = write_token(dir_ + "/open-token", 0644);
    const std::string err = refused_start(dir_, "--tcp 127.0.0.1:" + port + " --token-file " +
                                                    open_token);
    EXPECT_NE(err.find(open_token), std::string::npos) << err;
    EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
    if (::geteuid() == 0) {
        const std::string token = write_token(dir_ + "/token");
        const std::string as_root = refused_start(
            dir_, "--tcp 127.0.0.1:" + port + " --token-file " + token + " --tcp-run-as root");
        EXPECT_NE(as_root.find("tcp_run_as root is root"), std::string::npos) << as_root;
    }
}

// This test verifies that under oracle-MAGM a fifth task shares a busy GPU once the warm-up lock
// of the first four has passed, and that everything completes.
TEST_F(DaemonTest, CollocationUnderMagm) {
    start("oracle-MAGM");
    std::vector<TaskId> ids;
    for (int i = 0; i < 6; ++i) {
        ids.push_back(submit(fake_job("resnet18_cifar100_20e_3", 240, 858)));
    }
    for (TaskId id : ids) {
        EXPECT_EQ(wait_final(id)["state"], "succeeded");
    }
    int collocated = 0;
    for (const json& e : events()) {
        if (e["kind"] == "placed" &&
            e["message"].get<std::string>().find("(collocated)") != std::string::npos) {
            ++collocated;
        }
    }
    EXPECT_GE(collocated, 2);
}

// A GPU's cumulative energy at `t`, linearly between the daemon's stored samples around it.
std::optional<double> stored_energy_at(const std::vector<std::pair<double, double>>& samples,
                                       double t) {
    for (std::size_t i = 1; i < samples.size(); ++i) {
        const auto& [t0, e0] = samples[i - 1];
        const auto& [t1, e1] = samples[i];
        if (t0 <= t && t <= t1) {
            return t1 > t0 ? e0 + (e1 - e0) * (t - t0) / (t1 - t0) : e0;
        }
    }
    return std::nullopt;
}

// This test verifies accounting end to end on emulated GPUs: on two GPUs, two tasks share one
// while a third runs alone; once they finish, GET /v1/acct lists each with its state, wait, run
// time, GPU-hours, peak memory, attempts and energy, filters by user, state and time, and the
// energies of the tasks on each GPU add up to what that GPU measured over the same time (its
// stored samples, interpolated at the first start and the last end) within 5 %.
TEST_F(DaemonTest, AccountingSharesEachGpusEnergy) {
    start("oracle-MAGM", {"--exclude-gpus", "2,3"});
    std::vector<TaskId> ids;
    for (int i = 0; i < 3; ++i) {
        ids.push_back(submit(fake_job("resnet18_cifar100_20e_3", 600, 858)));  // 10 s wall
    }
    for (TaskId id : ids) {
        ASSERT_EQ(wait_final(id)["state"], "succeeded");
    }
    auto answer = client().acct({});
    ASSERT_TRUE(answer) << answer.error().message;
    const json& rows = (*answer)["tasks"];
    ASSERT_EQ(rows.size(), 3u) << answer->dump(2);
    std::map<int, std::vector<json>> by_gpu;  // attempts by the GPU they ran on
    double energy_sum = 0;
    for (const json& row : rows) {
        SCOPED_TRACE(row.dump());
        EXPECT_EQ(row["state"], "succeeded");
        EXPECT_EQ(row["gpus"], 1);
        EXPECT_GE(row["wait_s"].get<double>(), 0);
        EXPECT_GT(row["run_s"].get<double>(), 0);
        EXPECT_NEAR(row["gpu_hours"].get<double>(), row["run_s"].get<double>() / 3600, 1e-9);
        EXPECT_GE(row["peak_mib"].get<MiB>(), 800);  // 858 MiB at its peak, the ledger's view
        ASSERT_TRUE(row["energy_j"].is_number());
        EXPECT_GT(row["energy_j"].get<double>(), 0);
        energy_sum += row["energy_j"].get<double>();
        ASSERT_EQ(row["attempts"].size(), 1u);
        const json& attempt = row["attempts"][0];
        EXPECT_EQ(attempt["outcome"], "succeeded");
        EXPECT_EQ(attempt["energy_j"], row["energy_j"]);
        ASSERT_EQ(attempt["gpus"].size(), 1u);
        by_gpu[attempt["gpus"][0].get<int>()].push_back(attempt);
    }
    ASSERT_EQ(by_gpu.size(), 2u) << "expected the three tasks on GPUs 0 and 1";
    EXPECT_EQ(by_gpu.begin()->second.size() * by_gpu.rbegin()->second.size(), 2u)
        << "expected two tasks sharing one GPU and one alone";
    const json& totals = (*answer)["totals"];
    ASSERT_EQ(totals.size(), 1u);
    EXPECT_EQ(totals[0]["tasks"], 3);
    EXPECT_NEAR(totals[0]["energy_j"].get<double>(), energy_sum, 1e-6 * energy_sum);

    // Filters: the user, the final state, the time it finished; bad values name the parameter.
    const std::string user = rows[0]["user"];
    EXPECT_EQ((*client().acct({user, std::nullopt, std::nullopt}))["tasks"].size(), 3u);
    EXPECT_EQ((*client().acct({"nobody-here", std::nullopt, std::nullopt}))["tasks"].size(), 0u);
    EXPECT_EQ((*client().acct({std::nullopt, "failed,cancelled", std::nullopt}))["tasks"].size(),
              0u);
    EXPECT_EQ((*client().acct({std::nullopt, "succeeded", std::nullopt}))["tasks"].size(), 3u);
    EXPECT_EQ((*client().acct({std::nullopt, std::nullopt, 4e9}))["tasks"].size(), 0u);
    const RawReply bad_state = socket_request(socket_, "GET", "/v1/acct?state=succeded");
    EXPECT_EQ(bad_state.status, 400);
    EXPECT_NE(bad_state.body.find("state='succeded' is not a final state (did you mean "
                                  "'succeeded'?)"),
              std::string::npos)
        << bad_state.body;
    EXPECT_EQ(socket_request(socket_, "GET", "/v1/acct?state=running").status, 400);
    const RawReply bad_since = socket_request(socket_, "GET", "/v1/acct?since=yesterday");
    EXPECT_EQ(bad_since.status, 400);
    EXPECT_NE(bad_since.body.find("since"), std::string::npos) << bad_since.body;
    EXPECT_EQ(socket_request(socket_, "POST", "/v1/acct").status, 405);

    // The energy balance, from the GPU samples the daemon stored (one every 10 ticks, 60 ticks
    // a second): a second more stores some past the last end; they are read with the daemon
    // stopped.
    std::this_thread::sleep_for(1s);
    stop(SIGTERM);
    SQLite::Database db(dir_ + "/state/carma.db", SQLite::OPEN_READONLY);
    for (const auto& [gpu, attempts] : by_gpu) {
        double first_start = 1e300;
        double end = 0;
        double attributed = 0;
        for (const json& a : attempts) {
            first_start = std::min(first_start, a["started_at"].get<double>());
            end = std::max(end, a["ended_at"].get<double>());
            attributed += a["energy_j"].get<double>();
        }
        std::vector<std::pair<double, double>> samples;
        SQLite::Statement st(db,
                             "SELECT time, energy_j FROM gpu_samples WHERE gpu = ? ORDER BY time");
        st.bind(1, gpu);
        while (st.executeStep()) {
            samples.emplace_back(st.getColumn(0).getDouble(), st.getColumn(1).getDouble());
        }
        const std::optional<double> e0 = stored_energy_at(samples, first_start);
        const std::optional<double> e1 = stored_energy_at(samples, end);
        ASSERT_TRUE(e0 && e1) << "no stored samples around GPU " << gpu << "'s tasks";
        const double measured = *e1 - *e0;
        EXPECT_GT(measured, 0);
        EXPECT_NEAR(attributed, measured, 0.05 * measured)
            << "GPU " << gpu << ": " << attempts.size() << " task(s) from " << first_start
            << " to " << end;
    }
}

// This test verifies that a daemon killed while an attempt runs goes on accumulating its energy
// after the restart, from what it had stored: the attempt ends with more than it had then.
TEST_F(DaemonTest, AccountingEnergySurvivesARestart) {
    start("exclusive");
    const TaskId id = submit(fake_job("resnet3", 600));  // 10 s wall
    double stored = 0;
    ASSERT_TRUE(eventually([&] {
        const json t = task(id);
        if (!t.contains("attempt_list") || t["attempt_list"].empty()) {
            return false;
        }
        const json& e = t["attempt_list"][0]["energy_j"];
        stored = e.is_number() ? e.get<double>() : 0;
        return stored > 0;
    })) << daemon_log();
    stop(SIGKILL);
    start("exclusive");
    const json done = wait_final(id);
    EXPECT_EQ(done["state"], "succeeded");
    EXPECT_EQ(done["attempts"], 1);
    auto answer = client().acct({});
    ASSERT_TRUE(answer) << answer.error().message;
    ASSERT_EQ((*answer)["tasks"].size(), 1u);
    EXPECT_GT((*answer)["tasks"][0]["energy_j"].get<double>(), stored) << answer->dump(2);
}

// This test verifies MPS end to end on emulated GPUs: `--mps` starts the control daemon (a fake
// that records its commands), every task gets the pipe directory and, where its need is known,
// a per-GPU memory limit of need + margin. A task that declared too little crashes out of memory
// at its limit alone (its co-runner keeps running), is recovered on an idle GPU without a limit,
// and succeeds; the daemon's stop quits MPS. Also the peak GPU memory of each attempt is stored.
TEST_F(DaemonTest, MpsLimitsFailTheTaskAloneAndRecoveryRunsWithout) {
    const std::string record = dir_ + "/mps-record";
    ::setenv("FAKE_MPS_RECORD", record.c_str(), 1);
    start("oracle-MAGM", {"--mps", "--mps-control", CARMA_FAKE_MPS_CONTROL});
    ::unsetenv("FAKE_MPS_RECORD");
    const TaskId honest = submit(fake_job("resnet3", 600, 13236));  // 13,236 MiB, 10 s wall
    ASSERT_TRUE(eventually([&] { return state(honest) == "running"; }));
    // resnet3 really needs 13,236 MiB; declaring 4,000 MiB gives it a 6,048 MiB limit.
    json liar_body = fake_job("resnet3", 60, 4000);
    liar_body["name"] = "liar";
    const TaskId liar = submit(liar_body);
    json t = wait_final(liar, 180s);
    EXPECT_EQ(t["state"], "succeeded");
    ASSERT_EQ(t["attempt_list"].size(), 2u) << t.dump(2);
    EXPECT_EQ(t["attempt_list"][0]["outcome"], "out-of-memory");
    EXPECT_TRUE(t["attempt_list"][1]["recovered"].get<bool>());
    // The recovered attempt ran with no limit and reached the profile's full memory.
    const json& peak = t["attempt_list"][1]["peak_mib"];
    ASSERT_EQ(peak.size(), 1u) << t.dump(2);
    EXPECT_GE(peak.begin()->get<MiB>(), 13000);
    EXPECT_LE(t["attempt_list"][0]["peak_mib"].begin()->get<MiB>(), 6048);
    json h = wait_final(honest, 180s);
    EXPECT_EQ(h["state"], "succeeded");
    EXPECT_EQ(h["attempts"], 1);  // the liar's crash did not take it down
    stop(SIGTERM);
    std::ifstream in(record);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("-d"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("quit"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find(dir_ + "/state/mps/GPU-emu00000-0000-4000-8000-000000000000/pipe"),
              std::string::npos)
        << text.str();
}

// This test verifies out-of-memory recovery: with no memory information (OR-MAGM) a big task
// lands beside a co-runner, crashes with PyTorch's out-of-memory error, goes to the recovery
// queue and succeeds when relaunched alone.
TEST_F(DaemonTest, OutOfMemoryIsRecovered) {
    start("OR-MAGM");
    // 13,236 MiB each, 10 s wall.
    const std::vector<TaskId> fillers = one_per_gpu(fake_job("resnet3", 600));
    ASSERT_TRUE(eventually([&] { return all_running(fillers); }));
    const TaskId big = submit(fake_job("maskrcnn", 60));  // 28,606 MiB: does not fit beside one
    json t = wait_final(big, 180s);
    EXPECT_EQ(t["state"], "succeeded");
    ASSERT_EQ(t["attempt_list"].size(), 2u) << t.dump(2);
    EXPECT_EQ(t["attempt_list"][0]["outcome"], "out-of-memory");
    EXPECT_FALSE(t["attempt_list"][0]["recovered"].get<bool>());
    EXPECT_EQ(t["attempt_list"][1]["outcome"], "succeeded");
    EXPECT_TRUE(t["attempt_list"][1]["recovered"].get<bool>());
    auto err = client().logs(big, api::LogRequest{api::LogStream::Stderr, 1, 0});
    ASSERT_TRUE(err);
    EXPECT_NE(err->text.find("CUDA out of memory"), std::string::npos);
    for (TaskId id : fillers) {
        EXPECT_EQ(wait_final(id)["state"], "succeeded");
        EXPECT_EQ(task(id)["attempts"], 1);
    }
}

// The most an attempt held on any one GPU, from its peak_mib object.
MiB attempt_peak(const json& attempt) {
    MiB most = 0;
    for (const auto& [gpu, mib] : attempt["peak_mib"].items()) {
        most = std::max(most, mib.get<MiB>());
    }
    return most;
}

// This test verifies the daemon's `carma` policy (the default) plans with what it learned: a
// command of unknown memory never shares a GPU (it could crash a co-runner), so a fifth copy
// waits for an idle GPU with its reason; once the command has run, a fifth copy is placed
// beside a running one, with the memory its first run used.
TEST_F(DaemonTest, CarmaPolicySharesOnlyWhatItHasLearned) {
    start("carma");
    const json body = fake_job("resnet3", 360);  // 13,236 MiB, 6 s wall
    auto placed_shared = [&](TaskId id) {
        for (const json& e : events()) {
            if (e["task"] == id && e["kind"] == "placed") {
                return e["message"].get<std::string>().find("(collocated)") != std::string::npos;
            }
        }
        return false;
    };
    std::vector<TaskId> cold;
    for (int i = 0; i < 5; ++i) {
        cold.push_back(submit(body));
    }
    ASSERT_TRUE(eventually([&] { return state(cold[3]) == "running"; }));
    std::this_thread::sleep_for(2s);  // a few rounds with four GPUs busy
    EXPECT_EQ(state(cold[4]), "queued") << task(cold[4]).dump(2);
    EXPECT_NE(task(cold[4])["message"].get<std::string>().find("idle"), std::string::npos)
        << task(cold[4]).dump(2);
    for (TaskId id : cold) {
        EXPECT_EQ(wait_final(id)["state"], "succeeded");
        EXPECT_FALSE(placed_shared(id)) << id;
    }
    std::vector<TaskId> warm;
    for (int i = 0; i < 5; ++i) {
        warm.push_back(submit(body));
    }
    EXPECT_TRUE(task(warm[4])["learned"]["need_mib"].is_number()) << task(warm[4]).dump(2);
    int shared = 0;
    for (TaskId id : warm) {
        EXPECT_EQ(wait_final(id)["state"], "succeeded") << task(id).dump(2);
        shared += placed_shared(id) ? 1 : 0;
        EXPECT_EQ(task(id)["attempts"], 1) << "no out-of-memory crash: " << task(id).dump(2);
    }
    EXPECT_GE(shared, 1) << daemon_log();
}

// This test verifies that the live view lists the queue in the order the policy takes it: under
// `carma`, shortest first (the time limit is the run time it plans with), not arrival order.
TEST_F(DaemonTest, ViewListsTheQueueInThePolicysOrder) {
    start("carma");
    const auto busy = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return all_running(busy); }));
    auto waiting = [&](double limit_s) {
        return submit({{"command", {"/bin/sleep", "1"}}, {"workdir", "/tmp"},
                       {"time_limit_s", limit_s}});
    };
    const TaskId middle = waiting(3000);
    const TaskId longest = waiting(6000);
    const TaskId shortest = waiting(600);
    std::vector<TaskId> shown;
    ASSERT_TRUE(eventually([&] {
        auto v = client().view();
        shown.clear();
        if (v) {
            for (const json& t : (*v)["queue"]) {
                shown.push_back(t["id"].get<TaskId>());
            }
        }
        return shown.size() == 3;
    }));
    EXPECT_EQ(shown, (std::vector<TaskId>{shortest, middle, longest}))
        << client().view()->dump(2);
}

// This test verifies that tasks waiting while the same command runs learn from its end, not
// only tasks submitted after it: a held copy knows its memory once it has finished. A four-GPU
// copy (same script, other GPU count: another family) learns nothing from a one-GPU run, so it
// goes on waiting for four idle GPUs while the three tasks that hold GPUs 0-2 run.
TEST_F(DaemonTest, WaitingTasksLearnFromARunThatEnds) {
    start("carma");
    std::vector<TaskId> sleepers;
    for (int i = 0; i < 3; ++i) {
        sleepers.push_back(submit({{"command", {"/bin/sleep", "600"}},
                                   {"workdir", "/tmp"},
                                   {"memory_mib", 1000}}));
    }
    ASSERT_TRUE(eventually([&] { return all_running(sleepers); }));
    json body = fake_job("resnet3", 240);  // 13,236 MiB, 4 s wall
    const TaskId first = submit(body);
    ASSERT_TRUE(eventually([&] { return state(first) == "running"; })) << task(first).dump(2);
    json held = body;
    held["hold"] = true;
    const TaskId later = submit(held);
    json wide = body;
    wide["gpus"] = 4;
    const TaskId four = submit(wide);
    for (TaskId id : {later, four}) {
        EXPECT_TRUE(task(id)["learned"]["need_mib"].is_null()) << task(id).dump(2);
    }
    EXPECT_EQ(state(four), "queued");

    ASSERT_EQ(wait_final(first)["state"], "succeeded");
    ASSERT_TRUE(eventually([&] { return task(later)["learned"]["need_mib"].is_number(); }))
        << task(later).dump(2) << daemon_log();
    EXPECT_EQ(state(later), "held");
    EXPECT_EQ(task(later)["learned"]["basis"].get<std::string>().find("history: 1 run(s)"), 0u)
        << task(later).dump(2);
    // The four-GPU copy: the same pass left it unknown, and it waits for four idle GPUs.
    std::this_thread::sleep_for(2s);
    EXPECT_TRUE(task(four)["learned"]["need_mib"].is_null()) << task(four).dump(2);
    EXPECT_EQ(state(four), "queued") << task(four).dump(2);
    for (TaskId id : sleepers) {
        EXPECT_EQ(state(id), "running") << id;
    }
}

// This test verifies history end to end: a fake job that declares nothing is queued knowing
// nothing; the same command submitted again after it finished is planned with the memory its
// first run used (the basis says history), and `carma estimate -- CMD` explains it.
TEST_F(DaemonTest, SecondRunIsPlannedFromTheFirst) {
    start("exclusive");
    const json body = fake_job("resnet3", 60);  // 13,236 MiB, 1 s wall
    const TaskId first = submit(body);
    const json before = task(first);
    EXPECT_TRUE(before["learned"]["need_mib"].is_null()) << before.dump(2);
    EXPECT_EQ(before["learned"]["runs"], 0);
    EXPECT_NE(before["learned"]["basis"].get<std::string>().find("memory unknown"),
              std::string::npos);
    const json done = wait_final(first);
    ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
    const MiB used = attempt_peak(done["attempt_list"][0]);
    ASSERT_GT(used, 13000) << done.dump(2);  // the emulated ledger's figure

    const TaskId second = submit(body);
    const json again = task(second);
    EXPECT_EQ(again["learned"]["need_mib"], used) << again.dump(2);
    EXPECT_EQ(again["learned"]["runs"], 1);
    EXPECT_TRUE(again["learned"]["duration_s"].is_number());
    EXPECT_TRUE(again["learned"]["activity"].is_number());
    const std::string basis = again["learned"]["basis"].get<std::string>();
    EXPECT_EQ(basis.find("history: 1 run(s)"), 0u) << basis;
    EXPECT_NE(basis.find("activity: history"), std::string::npos) << basis;
    const json second_done = wait_final(second);
    ASSERT_EQ(second_done["state"], "succeeded");
    const MiB most = std::max(used, attempt_peak(second_done["attempt_list"][0]));

    const auto [rc, table] = cli_estimate(body);
    ASSERT_EQ(rc, 0) << table;
    EXPECT_NE(table.find("history     " + format_mib(most) + "  2 run(s): 2 succeeded"),
              std::string::npos)
        << table;
    EXPECT_NE(table.find("CARMA plans " + format_mib(most) + " + "), std::string::npos) << table;
    EXPECT_NE(table.find("why         history: 2 run(s)"), std::string::npos) << table;

    // Another argument of the same program: its family's history.
    json other = body;
    other["command"][4] = "30";
    auto estimate = client().estimate(other);
    ASSERT_TRUE(estimate) << estimate.error().message;
    EXPECT_EQ((*estimate)["history"]["runs"], 0) << estimate->dump(2);
    EXPECT_EQ((*estimate)["family_history"]["runs"], 2);
    EXPECT_EQ((*estimate)["learned"]["need_mib"], most);
    EXPECT_EQ((*estimate)["learned"]["basis"].get<std::string>().find("family history"), 0u);

    // Validated like a submission.
    const RawReply bad = socket_request(socket_, "POST", "/v1/estimate", R"({"command": []})");
    EXPECT_EQ(bad.status, 400) << bad.body;
}

// This test verifies that a run CARMA never sees on its GPU teaches nothing (issue 19, item 4):
// a fake job hidden from the emulated GPU's process list (what a task in another PID namespace
// looks like to the driver: its memory is used, no process of it is listed) succeeds, its attempt
// and its history row say `unobserved`, and the next run of the same command is not planned
// at ~0 MiB: it knows no memory need, as before the first run. `carma show` and `carma estimate`
// say why.
TEST_F(DaemonTest, AnUnseenRunTeachesNoMemoryNeed) {
    start("exclusive");
    json body = fake_job("resnet3", 240);  // 13,236 MiB, 4 s wall
    body["command"].push_back("--invisible");
    const TaskId first = submit(body);
    // Its memory counts on the GPU though no process of it is listed.
    ASSERT_TRUE(eventually([&] {
        auto g = client().gpus();
        if (!g) {
            return false;
        }
        for (const json& gpu : (*g)["gpus"]) {
            if (gpu.value("used_mib", 0) > 10000) {
                // ... and no process of it is listed there.
                return gpu["processes"].empty();
            }
        }
        return false;
    })) << client().gpus()->dump(2);
    const json done = wait_final(first);
    ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
    const json& attempt = done["attempt_list"][0];
    EXPECT_EQ(attempt["unobserved"], "not-seen") << done.dump(2);

    const TaskId second = submit(body);
    const json again = task(second);
    EXPECT_TRUE(again["learned"]["need_mib"].is_null())
        << "planned from a run it never saw: " << again.dump(2);
    const std::string basis = again["learned"]["basis"].get<std::string>();
    EXPECT_NE(basis.find("unobserved"), std::string::npos) << basis;
    EXPECT_NE(basis.find("activity: class default"), std::string::npos) << basis;
    ASSERT_TRUE(client().cancel(second));

    auto estimate = client().estimate(body);
    ASSERT_TRUE(estimate) << estimate.error().message;
    EXPECT_EQ((*estimate)["history"]["runs"], 1) << estimate->dump(2);
    EXPECT_EQ((*estimate)["history"]["unobserved"], 1) << estimate->dump(2);
    EXPECT_TRUE((*estimate)["history"]["peak_mib"].is_null()) << estimate->dump(2);

    const auto [rc, table] = cli_estimate(body);
    ASSERT_EQ(rc, 0) << table;
    EXPECT_NE(table.find("unobserved"), std::string::npos) << table;
    EXPECT_NE(table.find("PID namespace"), std::string::npos) << table;

    const std::string shown = dir_ + "/show.out";
    ASSERT_EQ(std::system((std::string(CARMA_BIN) + " show --socket " + socket_ + " " +
                           std::to_string(first) + " >" + shown + " 2>&1")
                              .c_str()),
              0)
        << read_text(shown);
    const std::string text = read_text(shown);
    EXPECT_NE(text.find("unobserved"), std::string::npos) << text;
    EXPECT_NE(text.find("PID namespace"), std::string::npos) << text;
}

// This test verifies that the variables a run was given on purpose are part of its history key
// (issue 22: `EPOCHS=90` was predicted from runs with `EPOCHS=1`), while those exported from the
// submitter's shell are not; that the task keeps which ones were chosen; and that naming one the
// environment does not set is refused.
TEST_F(DaemonTest, ExplicitEnvironmentIsPartOfTheHistoryKey) {
    start("exclusive");
    json body = fake_job("resnet3", 60);
    body["env"] = {{"EPOCHS", "1"}, {"HOME", "/home/a"}};
    body["explicit_env"] = {"EPOCHS"};
    const TaskId first = submit(body);
    const json done = wait_final(first);
    ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
    EXPECT_EQ(done["explicit_env"], json::array({"EPOCHS"}));

    auto same = client().estimate(body);
    ASSERT_TRUE(same) << same.error().message;
    EXPECT_EQ((*same)["history"]["runs"], 1) << same->dump(2);
    json other_shell = body;
    other_shell["env"]["HOME"] = "/home/b";
    auto shell = client().estimate(other_shell);
    ASSERT_TRUE(shell) << shell.error().message;
    EXPECT_EQ((*shell)["fingerprint"], (*same)["fingerprint"]) << "an exported variable";
    json longer = body;
    longer["env"]["EPOCHS"] = "90";
    auto other = client().estimate(longer);
    ASSERT_TRUE(other) << other.error().message;
    EXPECT_NE((*other)["fingerprint"], (*same)["fingerprint"]);
    EXPECT_EQ((*other)["history"]["runs"], 0) << other->dump(2);
    EXPECT_EQ((*other)["family"]["id"], (*same)["family"]["id"]) << "the same code";

    json unknown = body;
    unknown["explicit_env"] = {"EPOCHS", "SEED"};
    auto refused = client().submit(unknown);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("SEED"), std::string::npos) << refused.error().message;
}

// This test verifies that a task's activity is learned from its own readings, not from its
// GPU's (issue 19, item 7): a light job (dlrm, SM activity 0.12 alone) runs beside a busier one
// (efficientNet, 0.46: below the risk filter's threshold, so the two share) on the one GPU the
// daemon may use; the activity its history keeps is its own per-process share, where today's
// daemon kept the GPU's, co-runner included.
TEST_F(DaemonTest, ActivityIsLearnedWithoutTheCoRunners) {
    start("oracle-MAGM", {"--exclude-gpus", "1,2,3"});
    const TaskId busy = submit(fake_job("efficientNet", 1800));  // 3,752 MiB, 30 s wall
    ASSERT_TRUE(eventually([&] { return state(busy) == "running"; })) << task(busy).dump(2);
    const json light_body = fake_job("dlrm", 240);      // 1,468 MiB, 4 s wall
    const TaskId light = submit(light_body);
    const json done = wait_final(light);
    ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
    // It shared the GPU with the busy job all along.
    ASSERT_EQ(state(busy), "running") << task(busy).dump(2) << daemon_log();
    bool collocated = false;
    for (const json& e : events()) {
        collocated = collocated || (e["task"] == light && e["kind"] == "placed" &&
                                    e["message"].get<std::string>().find("(collocated)") !=
                                        std::string::npos);
    }
    ASSERT_TRUE(collocated) << events().dump(2);
    auto estimate = client().estimate(light_body);
    ASSERT_TRUE(estimate) << estimate.error().message;
    const json& h = (*estimate)["history"];
    ASSERT_EQ(h["runs"], 1) << estimate->dump(2);
    ASSERT_TRUE(h["activity"].is_number()) << estimate->dump(2);
    EXPECT_LT(h["activity"].get<double>(), 0.2)
        << "its co-runner's activity was counted as its own: " << estimate->dump(2);
    ASSERT_TRUE(client().cancel(busy));
}

// This test verifies that the daemon learns the predictor's error (issue 19, item 2): under a
// world where every collocation is 50 % slower than the device model says (world_bias 0.5), two
// rounds of two collocated fake jobs of a command that ran alone before each teach a factor
// k > 1 against that solo run; `carma estimate` and POST /v1/estimate show the family's
// correction K > 1 with its basis and observations, and a restarted daemon still has it.
TEST_F(DaemonTest, CollocatedRunsTeachTheSpeedCorrection) {
    const std::vector<std::string> flags = {
        "--exclude-gpus", "1,2,3", "--config",
        write_config(dir_, "world: model\nworld_bias: 0.5\n")};
    start("oracle-MAGM", flags);
    const json body = fake_job("dlrm", 240);  // 1,468 MiB, 4 s wall alone
    const json solo = wait_final(submit(body));
    ASSERT_EQ(solo["state"], "succeeded") << solo.dump(2);
    for (int round = 0; round < 2; ++round) {
        const TaskId a = submit(body);
        const TaskId b = submit(body);
        EXPECT_EQ(wait_final(a)["state"], "succeeded") << task(a).dump(2);
        EXPECT_EQ(wait_final(b)["state"], "succeeded") << task(b).dump(2);
    }
    auto correction = [&](const std::string& when) {
        auto estimate = client().estimate(body);
        EXPECT_TRUE(estimate) << estimate.error().message;
        if (!estimate) {
            return json();
        }
        const json sc = (*estimate)["speed_correction"];
        EXPECT_EQ(sc["mode"], "mps") << when;
        EXPECT_EQ(sc["observations"], 4) << when << ": " << estimate->dump(2) << daemon_log();
        for (const json& c : sc["classes"]) {
            if (c["observations"].get<int>() > 0) {
                return c;
            }
        }
        ADD_FAILURE() << when << ": no class with observations: " << sc.dump(2) << daemon_log();
        return json();
    };
    const json learned = correction("after the runs");
    ASSERT_TRUE(learned.is_object());
    EXPECT_EQ(learned["basis"], "family") << learned.dump(2);
    EXPECT_EQ(learned["observations"], 4) << learned.dump(2);
    EXPECT_GT(learned["k"].get<double>(), 1.1) << learned.dump(2) << daemon_log();

    const auto [rc, table] = cli_estimate(body);
    ASSERT_EQ(rc, 0) << table;
    EXPECT_NE(table.find(fmt::format("correction  K {:.2f} {} (family, 4 observation(s))",
                                     learned["k"].get<double>(),
                                     learned["sharing_class"].get<std::string>())),
              std::string::npos)
        << table;

    stop(SIGTERM);
    start("oracle-MAGM", flags);
    const json restarted = correction("after a restart");
    ASSERT_TRUE(restarted.is_object());
    EXPECT_EQ(restarted["basis"], "family");
    EXPECT_DOUBLE_EQ(restarted["k"].get<double>(), learned["k"].get<double>());
}

// This test verifies that an out-of-memory crash teaches a lower bound: a big fake job that
// lands beside a co-runner (OR-MAGM knows nothing) crashes, and its recovery is queued with the
// memory it held at the crash as a lower bound.
TEST_F(DaemonTest, OutOfMemoryRaisesTheLowerBound) {
    start("OR-MAGM");
    // 13,236 MiB each, 10 s wall.
    const std::vector<TaskId> fillers = one_per_gpu(fake_job("resnet3", 600));
    ASSERT_TRUE(eventually([&] { return all_running(fillers); }));
    const TaskId big = submit(fake_job("maskrcnn", 60));  // 28,606 MiB: does not fit beside one
    const json t = wait_final(big, 180s);
    ASSERT_EQ(t["state"], "succeeded");
    ASSERT_EQ(t["attempt_list"].size(), 2u) << t.dump(2);
    ASSERT_EQ(t["attempt_list"][0]["outcome"], "out-of-memory");
    const MiB held = attempt_peak(t["attempt_list"][0]);
    ASSERT_GT(held, 0) << t.dump(2);
    EXPECT_EQ(t["learned"]["lower_bound_mib"], held) << t.dump(2);
    const std::string basis = t["learned"]["basis"].get<std::string>();
    EXPECT_NE(basis.find("crashed out of memory holding " + format_mib(held)), std::string::npos)
        << basis;

    // Its history now holds the crash and the success: the need is what the success used, the
    // bound what the crash held.
    auto estimate = client().estimate(fake_job("maskrcnn", 60));
    ASSERT_TRUE(estimate) << estimate.error().message;
    EXPECT_EQ((*estimate)["history"]["runs"], 2) << estimate->dump(2);
    EXPECT_EQ((*estimate)["history"]["out_of_memory"], 1);
    EXPECT_EQ((*estimate)["history"]["oom_held_mib"], held);
    EXPECT_EQ((*estimate)["learned"]["need_mib"], attempt_peak(t["attempt_list"][1]));
    EXPECT_EQ((*estimate)["learned"]["lower_bound_mib"], held);
    for (TaskId id : fillers) {
        EXPECT_EQ(wait_final(id)["state"], "succeeded");
    }
}

// Submits 6 tasks (4 run, 2 wait; one of the running ends while the daemon is away), stops the
// daemon with `sig`, checks the jobs go on, restarts it and checks that everything completes
// exactly once.
class RestartTest : public DaemonTest {
public:
    void run(int sig) {
        start("exclusive");
        std::vector<TaskId> ids;
        ids.push_back(submit(fake_job("resnet3", 90)));  // ends while the daemon is away
        for (int i = 0; i < 5; ++i) {
            ids.push_back(submit(fake_job("resnet3", 600)));
        }
        ASSERT_TRUE(eventually([&] {
            int running = 0;
            for (TaskId id : ids) {
                running += state(id) == "running" ? 1 : 0;
            }
            return running == 4;
        }));
        // "running" is recorded just before the launch; wait for the four task groups too.
        ASSERT_TRUE(eventually([&] { return task_groups().size() == 4; }));
        const std::set<pid_t> groups = task_groups();
        // Scheduling controls outlive the daemon too: held stays held, a dependency holds.
        const TaskId held = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                    {"hold", true}});
        const TaskId dependent = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"},
                                         {"after", {ids[1]}}});
        stop(sig);
        for (pid_t g : groups) {
            EXPECT_EQ(::kill(-g, 0), 0) << "task group " << g << " died with the daemon";
        }
        std::this_thread::sleep_for(3s);  // task 1 (1.5 s of wall time) ends meanwhile
        start("exclusive");
        for (TaskId id : ids) {
            json done = wait_final(id);
            EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
            EXPECT_EQ(done["attempts"], 1) << "task " << id << " ran more than once";
        }
        const json after = wait_final(dependent);
        // Every task ran in its own attempt directory exactly once (the dependent too).
        EXPECT_EQ(task_groups().size(), ids.size() + 1);
        EXPECT_EQ(after["state"], "succeeded");
        EXPECT_GE(after["attempt_list"][0]["started_at"].get<double>(),
                  task(ids[1])["finished_at"].get<double>());
        EXPECT_EQ(state(held), "held");
        ASSERT_TRUE(client().hold(held, false));
        EXPECT_EQ(wait_final(held)["state"], "succeeded");
    }
};

// This test verifies restart safety after SIGTERM: nothing lost, nothing run twice.
TEST_F(RestartTest, AfterSigterm) { run(SIGTERM); }

// This test verifies restart safety after SIGKILL of the daemon.
TEST_F(RestartTest, AfterSigkill) { run(SIGKILL); }

// This test verifies that a root daemon checks a submission's working directory and command with
// the submitter's rights: inside a directory they cannot read, what exists and what does not get
// the same answer, so submitting does not reveal the directory's contents.
TEST_F(DaemonTest, PathsAreCheckedAsTheSubmitter) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to create a user and check paths as them"));
    const std::string hidden = dir_ + "/hidden";
    fs::create_directories(hidden + "/exists");
    std::ofstream(hidden + "/tool") << "#!/bin/sh\ntrue\n";
    fs::permissions(hidden + "/tool", fs::perms::owner_all);
    fs::permissions(hidden, fs::perms::owner_all);  // 0700, root's
    start("exclusive");
    const std::string out = dir_ + "/out";
    fs::create_directories(out);
    fs::permissions(out, fs::perms::all);
    auto body = [](const std::string& workdir, const std::string& command) {
        return json{{"command", {command}}, {"workdir", workdir}}.dump();
    };
    const std::vector<std::pair<std::string, std::string>> probes = {
        {hidden + "/exists", "/bin/true"}, {hidden + "/missing", "/bin/true"},
        {"/tmp", hidden + "/tool"},        {"/tmp", hidden + "/missing-tool"}};
    const int rc = as_user(*alice, [&] {
        for (std::size_t i = 0; i < probes.size(); ++i) {
            RawReply r = socket_request(socket_, "POST", "/v1/tasks",
                                     body(probes[i].first, probes[i].second));
            std::ofstream(out + "/" + std::to_string(i)) << r.status << " " << r.body;
        }
        return 0;
    });
    ASSERT_EQ(rc, 0);
    auto answer = [&](std::size_t i) {
        std::string text = read_text(out + "/" + std::to_string(i));
        // The same answer but for the path it names.
        const std::string& named = i < 2 ? probes[i].first : probes[i].second;
        if (auto at = text.find(named); at != std::string::npos) {
            text.replace(at, named.size(), "PATH");
        }
        return text;
    };
    EXPECT_EQ(answer(0), answer(1));
    EXPECT_NE(answer(0).find("400 "), std::string::npos) << answer(0);
    EXPECT_NE(answer(0).find("or you may not enter it"), std::string::npos) << answer(0);
    EXPECT_EQ(answer(2), answer(3));
    EXPECT_NE(answer(2).find("not found or not executable by you"), std::string::npos)
        << answer(2);
    // Root, who can reach them, is told they are fine.
    EXPECT_EQ(socket_request(socket_, "POST", "/v1/tasks", body(hidden + "/exists", "/bin/true")).status,
              201);
    EXPECT_EQ(socket_request(socket_, "POST", "/v1/tasks", body("/tmp", hidden + "/tool")).status, 201);
}

// This test verifies what `carma submit` brings from the submitter's side, run as an
// unprivileged user: their exported variables reach the task by default and not with
// --export=NONE; a .rad file's `conda activate tf` runs the task in that conda environment (a
// fake conda install in the conda layout), and a missing environment fails at submit; --venv runs
// it in a real `python3 -m venv`.
TEST_F(DaemonTest, SubmitterEnvironmentCondaAndVenv) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to create a user and submit as them"));
    const std::string conda = dir_ + "/conda";
    fs::create_directories(conda + "/bin");
    fs::create_directories(conda + "/envs/tf/bin");
    std::ofstream(conda + "/bin/conda") << "#!/bin/sh\nexit 1\n";
    std::ofstream(conda + "/envs/tf/bin/python")
        << "#!/bin/sh\necho \"python of $CONDA_DEFAULT_ENV at $CONDA_PREFIX: $*\"\n";
    for (const char* f : {"/bin/conda", "/envs/tf/bin/python"}) {
        fs::permissions(conda + f, fs::perms::owner_all | fs::perms::group_read |
                                       fs::perms::group_exec | fs::perms::others_read |
                                       fs::perms::others_exec);
    }
    auto rad = [](const std::string& env) {
        return "# c\nconda activate " + env +
               "\npython train.py --batch_size 32\nm\nd\n32\nexclusive\n1\n13236\n";
    };
    std::ofstream(dir_ + "/tf.rad") << rad("tf");
    std::ofstream(dir_ + "/nope.rad") << rad("nope");
    const std::string venv = dir_ + "/venv";
    ASSERT_EQ(std::system(("/usr/bin/python3 -m venv --without-pip " + venv).c_str()), 0)
        << "python3 -m venv failed; scripts/setup installs python3-venv";
    start("exclusive");
    const std::string out = dir_ + "/out";
    fs::create_directories(out);
    fs::permissions(out, fs::perms::all);
    const std::string submit = reachable_copy(CARMA_BIN) + " submit --socket " + socket_ + " --json ";
    const int rc = as_user(*alice, [&] {
        if (::chdir(out.c_str()) != 0) {
            return 1;
        }
        ::setenv("CONDA_EXE", (conda + "/bin/conda").c_str(), 1);
        ::setenv("MY_VAR", "from-alice", 1);
        // The .rad file's script: submit checks that it is there (the fake python only echoes).
        std::ofstream("train.py") << "\n";
        const std::string echo = " -- /bin/sh -c 'echo MY_VAR=$MY_VAR'";
        const std::vector<std::string> cmds = {
            submit + echo + " >a.json",
            submit + "--export=NONE" + echo + " >b.json",
            submit + dir_ + "/tf.rad >rad.json",
            submit + "--venv " + venv + " -- python -c 'import sys; print(sys.prefix)' >venv.json",
            submit + dir_ + "/nope.rad >nope.json 2>nope.err",
        };
        for (const std::string& c : cmds) {
            std::ofstream(out + "/rc", std::ios::app) << std::system(c.c_str()) << "\n";
        }
        return 0;
    });
    ASSERT_EQ(rc, 0);
    EXPECT_EQ(read_text(out + "/rc"), "0\n0\n0\n0\n256\n") << read_text(out + "/nope.err");
    EXPECT_NE(read_text(out + "/nope.err").find("conda environment 'nope' not found"),
              std::string::npos)
        << read_text(out + "/nope.err");
    auto output_of = [&](const char* file) {
        const TaskId id = json::parse(read_text(out + "/" + file))["id"].get<TaskId>();
        EXPECT_EQ(wait_final(id)["state"], "succeeded") << task(id).dump(2);
        auto log = client().logs(id, {});
        return log ? log->text : std::string("<no log>");
    };
    EXPECT_EQ(output_of("a.json"), "MY_VAR=from-alice\n");
    EXPECT_EQ(output_of("b.json"), "MY_VAR=\n");
    EXPECT_EQ(output_of("rad.json"),
              "python of tf at " + conda + "/envs/tf: train.py --batch_size 32\n");
    EXPECT_EQ(output_of("venv.json"), venv + "\n");
    const json rad_task = json::parse(read_text(out + "/rad.json"));
    EXPECT_EQ(rad_task["conda"], conda + "/envs/tf");
    EXPECT_EQ(rad_task["command"][0], conda + "/envs/tf/bin/python");
}

// This test verifies multi-user rules: tasks run as their submitter; another user may list but
// not cancel them, read their logs or see their environment (nor read the database file); the
// owner and root may.
TEST_F(DaemonTest, TwoUsers) {
    if (::geteuid() != 0) {
        FAIL() << "needs root to create users and run tasks as them";
    }
    auto alice = ensure_user("carma-test-alice");
    auto bob = ensure_user("carma-test-bob");
    if (!alice || !bob) {
        FAIL() << "useradd is not available";
    }
    start("exclusive");
    const std::string ids_file = dir_ + "/alice-ids";
    ::chmod(dir_.c_str(), 0777);
    const int rc = as_user(*alice, [&] {
        api::ApiClient c(socket_);
        auto whoami = c.submit({{"command", {"/bin/sh", "-c", "id -u; id -G"}}, {"workdir", "/tmp"}});
        auto sleeper = c.submit({{"command", {"/bin/sleep", "600"}},
                                 {"workdir", "/tmp"},
                                 {"env", {{"WANDB_API_KEY", "alice-secret"}}}});
        if (!whoami || !sleeper) {
            return 1;
        }
        auto own = c.task((*sleeper)["id"].get<TaskId>());  // the owner sees her environment
        if (!own || (*own)["env"].value("WANDB_API_KEY", "") != "alice-secret") {
            return 1;
        }
        std::ofstream out(ids_file);
        out << (*whoami)["id"] << " " << (*sleeper)["id"] << "\n";
        return 0;
    });
    ASSERT_EQ(rc, 0);
    TaskId whoami = 0, sleeper = 0;
    std::ifstream(ids_file) >> whoami >> sleeper;
    ASSERT_GT(sleeper, 0);

    json done = wait_final(whoami);
    EXPECT_EQ(done["user"], "carma-test-alice");
    EXPECT_EQ(done["uid"], alice->pw_uid);
    auto out = client().logs(whoami, {});  // root may read anyone's logs
    ASSERT_TRUE(out);
    EXPECT_EQ(out->text.substr(0, out->text.find('\n')), std::to_string(alice->pw_uid));
    EXPECT_EQ(out->text.find(" 0 "), std::string::npos) << "root's group leaked: " << out->text;

    ASSERT_TRUE(eventually([&] { return state(sleeper) == "running"; }));
    const int bob_rc = as_user(*bob, [&] {
        api::ApiClient c(socket_);
        auto list = c.list_tasks(true);
        auto cancel = c.cancel(sleeper);
        auto logs = c.logs(sleeper, {});
        auto shown = c.task(sleeper);
        bool env_hidden = list && shown && !shown->contains("env");
        if (list) {
            for (const json& t : (*list)["tasks"]) {
                env_hidden = env_hidden && !t.contains("env");
            }
        }
        // Nor can the database be read behind the daemon's back.
        const bool db_closed = ::access((dir_ + "/state/carma.db").c_str(), R_OK) != 0;
        const bool ok = list && (*list)["tasks"].size() == 2 && !cancel &&
                        cancel.error().message.find("only its owner or root") != std::string::npos &&
                        !logs && env_hidden && db_closed;
        return ok ? 0 : 1;
    });
    EXPECT_EQ(bob_rc, 0);
    EXPECT_EQ(state(sleeper), "running");
    EXPECT_EQ(task(sleeper)["env"].value("WANDB_API_KEY", ""), "alice-secret");  // root sees it
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + "/state/carma.db").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((dir_ + "/state").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0711u);
    ASSERT_TRUE(client().cancel(sleeper));  // root may
    EXPECT_EQ(wait_final(sleeper)["state"], "cancelled");
}

int file_mode(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

// This test verifies that the emulated-GPU file is the daemon's alone (0600; another user cannot
// open it by name, so cannot write false readings) while that user's task still runs on the
// emulated GPU through the descriptor its supervisor passes.
TEST_F(DaemonTest, EmulatorFileIsClosedToUsersButReachesTheirTasks) {
    ASSERT_EQ(::geteuid(), 0u) << "this test needs root, to run a task as another user";
    auto alice = ensure_user("carma-test-alice");
    ASSERT_TRUE(alice) << "useradd could not create carma-test-alice";
    start("exclusive");
    const std::string file = dir_ + "/state/emulated-gpus";
    EXPECT_EQ(file_mode(file), 0600);
    int id_pipe[2];
    ASSERT_EQ(::pipe(id_pipe), 0);
    const std::string fakejob = reachable_copy(CARMA_FAKEJOB_PATH);
    const int rc = as_user(*alice, [&] {
        if (::open(file.c_str(), O_RDWR) >= 0 || errno != EACCES) {
            return 2;  // the file must not open by name for her
        }
        json body = fake_job("resnet3", 300);
        body["command"][0] = fakejob;
        auto r = api::ApiClient(socket_).submit(body);
        if (!r) {
            return 3;
        }
        const TaskId id = (*r)["id"].get<TaskId>();
        return ::write(id_pipe[1], &id, sizeof id) == static_cast<ssize_t>(sizeof id) ? 0 : 4;
    });
    ::close(id_pipe[1]);
    ASSERT_EQ(rc, 0);
    TaskId id = 0;
    ASSERT_EQ(::read(id_pipe[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
    ::close(id_pipe[0]);
    json done = wait_final(id);
    auto err = client().logs(id, api::LogRequest{api::LogStream::Stderr, 1, 0});
    EXPECT_EQ(done["state"], "succeeded") << done.dump(2) << (err ? err->text : "");
    EXPECT_EQ(done["user"], "carma-test-alice");
    // The daemon saw her job's memory on the emulated GPU.
    ASSERT_EQ(done["attempt_list"].size(), 1u);
    EXPECT_FALSE(done["attempt_list"][0]["peak_mib"].empty()) << done.dump(2);
    EXPECT_EQ(file_mode(file), 0600);
}

// This test verifies that a damaged emulated-GPU file is not wiped while an attempt still runs:
// the daemon refuses to start and says why and what to do, leaving the file as it was; once
// nothing runs, the daemon re-initialises it and logs why.
TEST_F(DaemonTest, DamagedEmulatorFileWithALiveAttemptStopsTheStart) {
    start("exclusive");
    const TaskId id = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return task_groups().size() == 1; }));
    const pid_t group = *task_groups().begin();
    stop(SIGTERM);
    const std::string file = dir_ + "/state/emulated-gpus";
    const std::uintmax_t truncated = fs::file_size(file) / 2;
    fs::resize_file(file, truncated);

    const std::string cmd = std::string(CARMA_BIN) + " serve --gpus emulated:4xA100-40GB " +
                            "--state-dir " + dir_ + "/state --socket " + socket_ + " >" + dir_ +
                            "/refused.log 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    const std::string refused = read_text(dir_ + "/refused.log");
    EXPECT_NE(refused.find("emulator file " + file), std::string::npos) << refused;
    EXPECT_NE(refused.find("1 attempt(s) recorded running"), std::string::npos) << refused;
    EXPECT_NE(refused.find("lose their GPU state"), std::string::npos) << refused;
    EXPECT_NE(refused.find("move the file away"), std::string::npos) << refused;
    EXPECT_EQ(fs::file_size(file), truncated);
    EXPECT_EQ(::kill(-group, 0), 0) << "the task died with the refused start";

    // The task ends while no daemon runs; its supervisor records it and leaves.
    ::kill(-group, SIGKILL);
    const std::string attempt = dir_ + "/state/attempts/" + std::to_string(id) + "/1";
    ASSERT_TRUE(eventually([&] { return fs::exists(attempt + "/exit.json"); }));
    pid_t shim = 0;
    std::ifstream(attempt + "/shim.pid") >> shim;
    ASSERT_GT(shim, 1);
    // Gone, or a zombie (an empty command line) nobody has reaped yet.
    ASSERT_TRUE(eventually(
        [&] { return read_text("/proc/" + std::to_string(shim) + "/cmdline").empty(); }));
    start("exclusive");
    EXPECT_NE(daemon_log().find("re-initialising it"), std::string::npos) << daemon_log();
    EXPECT_EQ(file_mode(file), 0600);
    auto gpus = client().gpus();
    ASSERT_TRUE(gpus);
    EXPECT_EQ((*gpus)["gpus"].size(), 4u);
    EXPECT_NE(wait_final(id)["state"], "running");
}

// This test verifies that bad input gets clear errors and leaves the daemon serving with its
// queue intact.
TEST_F(DaemonTest, BadInputIsRefusedAndQueueSurvives) {
    start("exclusive");
    std::vector<TaskId> sleepers;
    for (int i = 0; i < 5; ++i) {  // 4 run, 1 waits
        sleepers.push_back(submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}}));
    }
    api::ApiClient c = client();
    struct Case {
        std::string body;
        int status;
        std::string says;
    };
    const json ok = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}};
    auto with = [&](const char* key, json value) {
        json b = ok;
        b[key] = value;
        return b.dump();
    };
    const std::vector<Case> cases = {
        {with("colour", "blue"), 400, "unknown field 'colour'"},
        {with("gpus", -1), 400, "ask for 0 (a CPU-only task) or more"},
        {with("cpus", 0), 400, "'cpus' must be a whole number of cores from 1"},
        {with("host_mem_mib", -5), 400, "'host_mem_mib' must be a whole number of MiB"},
        {with("gpus", 5), 422, "asks for 5 GPUs but this server has 4"},
        {with("memory_mib", 50000), 422, "largest GPU here has 40,441 MiB"},
        // Found by the fuzz tests (tests/fuzz): an estimate of INT64_MAX overflowed need + margin
        // in the scheduler, and a NUL cut the workdir short at chdir().
        {with("memory", {{"horus_mib", std::numeric_limits<std::int64_t>::max()}}), 400,
         "'horus_mib' is 9223372036854775807 MiB; memory per GPU must be at most 16 TiB"},
        {with("memory_mib", 16777217), 400, "at most 16 TiB"},
        {with("workdir", std::string("/tmp\0/x", 7)), 400, "without NUL"},
        {with("name", std::string("a\0b", 3)), 400, "without NUL"},
        {with("command", json::array({"/no/such/program"})), 400, "not found"},
        {with("command", json::array()), 400, "non-empty list"},
        {with("workdir", "/no/such/dir"), 400, "does not exist"},
        {"{not json", 400, "not valid JSON"},
        {"{\"command\": [\"/bin/true\"], \"workdir\": \"/tmp\", \"name\": \"\xff\xfe\"}", 400,
         "not valid JSON"},
        {std::string(10 << 20, ' '), 413, "too large"},
    };
    for (const Case& k : cases) {
        RawReply r = socket_request(socket_, "POST", "/v1/tasks", k.body);
        EXPECT_EQ(r.status, k.status) << k.body.substr(0, 80) << " -> " << r.body;
        EXPECT_NE(r.body.find(k.says), std::string::npos) << r.body;
        EXPECT_TRUE(json::accept(r.body)) << "errors are JSON: " << r.body;
    }
    for (const char* target : {"/v1/tasks/999999", "/v1/tasks/999999/logs"}) {
        RawReply r = socket_request(socket_, "GET", target);
        EXPECT_EQ(r.status, 404) << target;
        EXPECT_NE(r.body.find("no task with id 999999"), std::string::npos);
    }
    EXPECT_EQ(socket_request(socket_, "DELETE", "/v1/tasks/999999").status, 404);
    EXPECT_EQ(socket_request(socket_, "GET", "/v1/nothing-here").status, 404);
    // Query parameters are checked, not wrapped (offset=-5 was 2^64-5), clamped or ignored.
    const std::string logs = "/v1/tasks/" + std::to_string(sleepers[0]) + "/logs";
    const std::vector<std::pair<std::string, std::string>> queries = {
        {logs + "?offset=-5", "offset=-5 is out of range"},
        {logs + "?offset=18446744073709551611", "out of range"},
        {logs + "?offset=12abc", "not a whole number"},
        {logs + "?stream=bogus", "stream='bogus' is not one of: stdout, stderr"},
        {logs + "?attempt=-1", "attempt=-1 is out of range"},
        {"/v1/events?limit=0", "limit=0 is out of range; give one from 1 to 10000"},
        {"/v1/events?limit=-1", "out of range"},
        {"/v1/events?after=x", "not a whole number"},
        {"/v1/tasks?all=maybe", "not a yes/no switch"},
    };
    for (const auto& [target, says] : queries) {
        RawReply r = socket_request(socket_, "GET", target);
        EXPECT_EQ(r.status, 400) << target << " -> " << r.body;
        EXPECT_NE(r.body.find(says), std::string::npos) << target << " -> " << r.body;
    }
    EXPECT_EQ(socket_request(socket_, "GET", logs + "?stream=stderr&attempt=0&offset=0").status, 200);
    EXPECT_EQ(socket_request(socket_, "GET", "/v1/events?limit=10000&after=0").status, 200);
    // A known endpoint asked with the wrong method: 405 naming what it takes.
    for (const auto& [method, target, allowed] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"PUT", "/v1/tasks", "GET, POST"},
             {"POST", "/v1/tasks/1", "GET, DELETE"},
             {"DELETE", "/v1/status", "GET"},
             {"PATCH", "/v1/tasks/1/logs", "GET"}}) {
        RawReply r = socket_request(socket_, method, target);
        EXPECT_EQ(r.status, 405) << method << " " << target << " -> " << r.body;
        EXPECT_NE(r.body.find("method " + method + " is not allowed on " + target + "; it takes " +
                              allowed),
                  std::string::npos)
            << r.body;
    }

    // Still serving, with the same five tasks.
    ASSERT_TRUE(c.healthz());
    auto listed = c.list_tasks(false);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 5u);
    EXPECT_EQ(state(sleepers[4]), "queued");
    // The CLI reports a malformed task file with its line, and the daemon is untouched.
    const std::string yaml = dir_ + "/bad.yaml";
    std::ofstream(yaml) << "command: [/bin/true\nworkdir: /tmp\n";
    const std::string cmd = std::string(CARMA_BIN) + " submit --socket " + socket_ + " " + yaml +
                            " 2>" + dir_ + "/cli.err";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    std::ifstream err_in(dir_ + "/cli.err");
    const std::string cli_err(std::istreambuf_iterator<char>(err_in), {});
    EXPECT_NE(cli_err.find("bad.yaml"), std::string::npos) << cli_err;
    EXPECT_TRUE(c.healthz());
    for (TaskId id : sleepers) {
        ASSERT_TRUE(c.cancel(id));
    }
}

// A message of one byte with room for one descriptor (SCM_RIGHTS), for send_fd and receive_fd.
struct FdMessage {
    char byte = 'f';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};

    FdMessage() {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
    }
    FdMessage(const FdMessage&) = delete;  // msg points into this object
    FdMessage& operator=(const FdMessage&) = delete;
};

// Sends `fd` over the Unix socket `via` (SCM_RIGHTS).
bool send_fd(int via, int fd) {
    FdMessage m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return ::sendmsg(via, &m.msg, 0) == 1;
}

int receive_fd(int via) {
    FdMessage m;
    if (::recvmsg(via, &m.msg, 0) != 1) {
        return -1;
    }
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
        return -1;
    }
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

int connect_unix(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        return -1;
    }
    return fd;
}

// One HTTP/1.1 request on an already connected socket, which it closes; the reply read to EOF.
RawReply raw_on_fd(int fd, const std::string& method, const std::string& target,
                   const std::string& body = "") {
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string request = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
                                "Connection: close\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                                body;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
        ::close(fd);
        return {-1, "send failed", {}};
    }
    std::string in;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
        in.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    const auto head_end = in.find("\r\n\r\n");
    if (in.size() < 12 || head_end == std::string::npos) {
        return {-1, in, {}};
    }
    return {std::atoi(in.substr(9, 3).c_str()), in.substr(head_end + 4), {}};
}

// This test verifies that a request is identified as the process that connected, not as
// whatever holds the connecting process's pid now: alice connects, hands her connections to a
// root process and exits, a root process takes her pid, and requests on those connections
// still act as alice: her submission is hers, and cancelling root's task is refused.
TEST_F(DaemonTest, IdentityIsTakenAtConnect) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to connect as another user and reuse a pid"));
    const uid_t alice_uid = alice->pw_uid;
    const gid_t alice_gid = alice->pw_gid;
    start("exclusive");
    const TaskId roots = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});

    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const pid_t connector = ::fork();
    ASSERT_GE(connector, 0);
    if (connector == 0) {
        ::close(pair[0]);
        if (::setgroups(0, nullptr) != 0 || ::setgid(alice_gid) != 0 ||
            ::setuid(alice_uid) != 0) {
            ::_exit(90);
        }
        for (int i = 0; i < 2; ++i) {
            const int fd = connect_unix(socket_);
            if (fd < 0 || !send_fd(pair[1], fd)) {
                ::_exit(91);
            }
        }
        ::_exit(0);
    }
    ::close(pair[1]);
    const int submit_conn = receive_fd(pair[0]);
    const int cancel_conn = receive_fd(pair[0]);
    ::close(pair[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(connector, &status, 0), connector);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ASSERT_GE(submit_conn, 0);
    ASSERT_GE(cancel_conn, 0);

    // A root process takes the connector's pid: the kernel hands out ns_last_pid + 1 next.
    pid_t squatter = -1;
    for (int i = 0; i < 20 && squatter != connector; ++i) {
        if (squatter > 0) {
            ::kill(squatter, SIGKILL);
            ::waitpid(squatter, nullptr, 0);
        }
        std::ofstream("/proc/sys/kernel/ns_last_pid") << connector - 1;
        squatter = ::fork();
        if (squatter == 0) {
            ::pause();
            ::_exit(0);
        }
    }
    if (squatter != connector) {
        std::cout << "note: pid " << connector << " was not reused; identity still checked\n";
    }

    RawReply submitted = raw_on_fd(submit_conn, "POST", "/v1/tasks",
                                   json{{"command", {"/bin/true"}}, {"workdir", "/tmp"}}.dump());
    RawReply cancelled = raw_on_fd(cancel_conn, "DELETE", "/v1/tasks/" + std::to_string(roots));
    ::kill(squatter, SIGKILL);
    ::waitpid(squatter, nullptr, 0);

    ASSERT_EQ(submitted.status, 201) << submitted.body;
    const json task = json::parse(submitted.body);
    EXPECT_EQ(task["user"], "carma-test-alice");
    EXPECT_EQ(task["uid"], alice_uid);
    EXPECT_EQ(cancelled.status, 403) << cancelled.body;
    EXPECT_NE(cancelled.body.find("only its owner or root"), std::string::npos) << cancelled.body;
    EXPECT_FALSE(is_final(state(roots)));
    ASSERT_TRUE(client().cancel(roots));
    wait_final(task["id"].get<TaskId>());
}

// This test verifies that a root daemon runs TCP-submitted tasks as tcp_run_as, not as root.
TEST_F(DaemonTest, TcpRunsAsConfiguredUser) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to run tasks as another user"));
    const uid_t alice_uid = alice->pw_uid;
    const int port = tcp_port();
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file",
                        write_token(dir_ + "/token"), "--tcp-run-as", "carma-test-alice"});
    httplib::Client tcp("127.0.0.1", port);
    httplib::Headers auth = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdef"}};
    auto r = tcp.Post("/v1/tasks", auth,
                      json{{"command", {"/bin/sh", "-c", "id -u"}}, {"workdir", "/tmp"}}.dump(),
                      "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    const json task = json::parse(r->body);
    EXPECT_EQ(task["user"], "carma-test-alice");
    EXPECT_EQ(task["uid"], alice_uid);
    const TaskId id = task["id"].get<TaskId>();
    EXPECT_EQ(wait_final(id)["state"], "succeeded");
    auto out = client().logs(id, {});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->text, std::to_string(alice_uid) + "\n");
}

// This test verifies that the server keeps answering while one user holds 64 connections that
// send a header line per second or nothing at all; connections beyond the per-user cap are
// answered 429, and a head over the size limit 431.
TEST_F(DaemonTest, SlowClientsDoNotStopService) {
    if (::geteuid() != 0) {
        FAIL() << "needs root to run the slow clients as another user";
    }
    passwd* nobody = ::getpwnam("nobody");
    ASSERT_NE(nobody, nullptr);
    const uid_t slow_uid = nobody->pw_uid;
    const gid_t slow_gid = nobody->pw_gid;
    start("exclusive");

    {
        httplib::Client cli(socket_, 80);
        cli.set_address_family(AF_UNIX);
        cli.set_read_timeout(30);
        auto big = cli.Get("/healthz", {{"X-Filler", std::string(20000, 'a')}});
        ASSERT_TRUE(big) << httplib::to_string(big.error());
        EXPECT_EQ(big->status, 431);
        EXPECT_NE(big->body.find("larger than"), std::string::npos) << big->body;
    }

    int ready[2], result[2];
    ASSERT_EQ(::pipe(ready), 0);
    ASSERT_EQ(::pipe(result), 0);
    const pid_t slow = ::fork();
    ASSERT_GE(slow, 0);
    if (slow == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(slow_gid) != 0 || ::setuid(slow_uid) != 0) {
            ::_exit(90);
        }
        std::vector<int> fds;
        for (int i = 0; i < 64; ++i) {
            fds.push_back(connect_unix(socket_));
        }
        (void)!::write(ready[1], "r", 1);
        // Even connections send one header line a second and never finish; odd ones send nothing.
        for (int second = 0; second < 12; ++second) {
            for (std::size_t i = 0; i < fds.size(); i += 2) {
                const char* line = second == 0 ? "GET /healthz HTTP/1.1\r\n" : "X-Slow: 1\r\n";
                (void)::send(fds[i], line, std::strlen(line), MSG_NOSIGNAL);
            }
            std::this_thread::sleep_for(1s);
        }
        int refused = 0;
        for (int fd : fds) {
            char buf[64] = {};
            if (fd >= 0 && ::recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT) > 0 &&
                std::string(buf).rfind("HTTP/1.1 429", 0) == 0) {
                ++refused;
            }
        }
        (void)!::write(result[1], &refused, sizeof refused);
        ::_exit(0);
    }
    ::close(ready[1]);
    ::close(result[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the slow clients did not start";
    std::this_thread::sleep_for(2s);  // a couple of header lines in

    httplib::Client cli(socket_, 80);
    cli.set_address_family(AF_UNIX);
    cli.set_connection_timeout(10);
    cli.set_read_timeout(10);
    cli.set_write_timeout(10);
    auto health = cli.Get("/healthz");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    EXPECT_TRUE(client().status());

    int refused = 0;
    EXPECT_EQ(::read(result[0], &refused, sizeof refused),
              static_cast<ssize_t>(sizeof refused));
    int status = 0;
    ::waitpid(slow, &status, 0);
    ::close(ready[0]);
    ::close(result[0]);
    EXPECT_GT(refused, 0) << "connections beyond the per-user cap are answered 429";
    EXPECT_TRUE(client().healthz());
}

// ---- Issue 18: hardening, round two ----------------------------------------------------------

// This test verifies the per-user limits: an array, a task or a whole submission above its size
// limit is refused
// with 413, a submission past the waiting limit or the rate with 429 and Retry-After, each
// naming its limit; what was accepted before stays; another user is not held up by them.
TEST_F(DaemonTest, PerUserLimits) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-alice", alice, "to submit as a second user"));
    start("exclusive",
          {"--config", write_config(dir_, "limits:\n  max_waiting_per_user: 12\n"
                                          "  max_array_size: 8\n"
                                          "  max_submit_bytes_per_task: 4096\n"
                                          "  max_submit_bytes_per_request: 20000\n"
                                          "  submit_rate_per_user: 0.01\n"
                                          "  submit_burst_per_user: 9\n")});
    // One per GPU: what comes next waits.
    const auto sleepers = one_per_gpu({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    ASSERT_TRUE(eventually([&] { return all_running(sleepers); }));
    const json sleeper = {{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}};
    json array = sleeper;
    array["array"] = "0-8";  // 9 members
    RawReply r = socket_request(socket_, "POST", "/v1/tasks", array.dump());
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_NE(r.body.find("max_array_size"), std::string::npos) << r.body;
    json big = sleeper;
    big["command"] = {"/bin/echo", std::string(5000, 'x')};
    r = socket_request(socket_, "POST", "/v1/tasks", big.dump());
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_NE(r.body.find("max_submit_bytes_per_task"), std::string::npos) << r.body;
    json amplified = sleeper;  // 8 members of 3,000 bytes each: 24,000 stored
    amplified["command"] = {"/bin/echo", std::string(3000, 'x')};
    amplified["array"] = "0-7";
    r = socket_request(socket_, "POST", "/v1/tasks", amplified.dump());
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_NE(r.body.find("max_submit_bytes_per_request"), std::string::npos) << r.body;

    array["array"] = "0-7";  // 8 waiting
    r = socket_request(socket_, "POST", "/v1/tasks", array.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    array["array"] = "0-4";  // 8 + 5 > 12 waiting
    r = socket_request(socket_, "POST", "/v1/tasks", array.dump());
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_NE(r.body.find("max_waiting_per_user"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("8 task(s) waiting"), std::string::npos) << r.body;

    // The burst of 9 is spent (4 sleepers, 3 too large, 1 array, 1 past the waiting limit; one
    // more every 100 s): the rate refuses, and says when to come back.
    httplib::Client cli(socket_, 80);
    cli.set_address_family(AF_UNIX);
    auto limited = cli.Post("/v1/tasks", sleeper.dump(), "application/json");
    ASSERT_TRUE(limited);
    EXPECT_EQ(limited->status, 429) << limited->body;
    EXPECT_NE(limited->body.find("submit_rate_per_user"), std::string::npos) << limited->body;
    EXPECT_TRUE(limited->has_header("Retry-After"));

    // Another user submits at once, as if nothing happened.
    ::chmod(dir_.c_str(), 0777);
    const int rc = as_user(*alice, [&] {
        api::ApiClient c(socket_);
        auto mine = c.submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}});
        return mine ? 0 : 1;
    });
    EXPECT_EQ(rc, 0);
    auto listed = client().list_tasks(true);
    ASSERT_TRUE(listed) << listed.error().message;
    EXPECT_EQ((*listed)["tasks"].size(), 4u + 8u + 1u) << "what was accepted is all there";
}

// This test verifies that listings come in pages: GET /v1/tasks, /v1/acct and /v1/timeline
// answer at most `limit` tasks with the id to continue after, the pages together hold every task
// once, acct's totals (of the whole query) come with its last page, and the client joins pages.
TEST_F(DaemonTest, ListingsComeInPages) {
    start("exclusive");
    json quick = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"array", "0-24"}};
    auto submitted = client().submit(quick);
    ASSERT_TRUE(submitted) << submitted.error().message;
    const json ids = (*submitted)["array_tasks"];
    ASSERT_EQ(ids.size(), 25u);
    for (const json& id : ids) {
        wait_final(id.get<TaskId>());
    }
    for (const std::string base : {"/v1/tasks?all=1", "/v1/acct?since=0",
                                   "/v1/timeline?since=0&points=10"}) {
        std::set<TaskId> seen;
        std::int64_t after = 0;
        int pages = 0;
        json last;
        for (;;) {
            const RawReply r = socket_request(
                socket_, "GET", base + "&limit=10" + (after ? "&after=" + std::to_string(after) : ""));
            ASSERT_EQ(r.status, 200) << base << ": " << r.body;
            last = json::parse(r.body);
            ++pages;
            EXPECT_LE(last["tasks"].size(), 10u) << base;
            for (const json& t : last["tasks"]) {
                EXPECT_TRUE(seen.insert(t["id"].get<TaskId>()).second) << base << " twice";
            }
            if (base.starts_with("/v1/acct")) {
                EXPECT_EQ(last.contains("totals"), last["next"].is_null()) << base;
            }
            if (base.starts_with("/v1/timeline")) {
                EXPECT_EQ(last["gpus"].empty(), after != 0) << "samples with the first page only";
            }
            if (last["next"].is_null()) {
                break;
            }
            after = last["next"].get<std::int64_t>();
            ASSERT_LT(pages, 10) << base;
        }
        EXPECT_EQ(seen.size(), 25u) << base;
        EXPECT_EQ(pages, 3) << base;
    }
    auto acct = client().acct({});
    ASSERT_TRUE(acct) << acct.error().message;
    EXPECT_EQ((*acct)["tasks"].size(), 25u);
    ASSERT_EQ((*acct)["totals"].size(), 1u);
    EXPECT_EQ((*acct)["totals"][0]["tasks"], 25);
    const RawReply too_many = socket_request(socket_, "GET", "/v1/tasks?limit=10001");
    EXPECT_EQ(too_many.status, 400) << too_many.body;
    EXPECT_NE(too_many.body.find("limit"), std::string::npos);
}

// This test verifies that the live view sums a long queue up: the first tasks in serving order,
// the total, and counts per user and state, not every waiting task.
TEST_F(DaemonTest, ViewSummarisesALongQueue) {
    start("exclusive");
    for (int i = 0; i < 4; ++i) {
        submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
    }
    json many = {{"command", {"/bin/sleep", "1"}}, {"workdir", "/tmp"}, {"array", "0-119"}};
    ASSERT_TRUE(client().submit(many));
    json held = {{"command", {"/bin/sleep", "1"}}, {"workdir", "/tmp"}, {"hold", true}};
    const TaskId kept = submit(held);
    ASSERT_TRUE(eventually([&] {
        auto v = client().view();
        return v && (*v)["running"].size() == 4u;
    }));
    auto view = client().view();
    ASSERT_TRUE(view) << view.error().message;
    EXPECT_EQ((*view)["queue"].size(), 50u);
    EXPECT_EQ((*view)["queue_total"], 121);
    ASSERT_EQ((*view)["queue_users"].size(), 1u);
    const json& root = (*view)["queue_users"][0];
    EXPECT_EQ(root["user"], "root");
    EXPECT_EQ(root["queued"], 120);
    EXPECT_EQ(root["held"], 1);
    EXPECT_EQ(root["running"], 4);
    const std::string text = view->dump();
    EXPECT_LT(text.size(), 100000u) << "the view stays small however long the queue";
    ASSERT_TRUE(client().cancel(kept));
}

// This test verifies that a TCP client of a root daemon without tcp_run_as reads as nobody in
// particular (no environment of any task), and one with tcp_run_as sees only that user's.
TEST_F(DaemonTest, TcpReadersSeeOnlyWhatTheirUserMay) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-alice", alice,
                                          "(the daemon must run as root for tcp_run_as)"));
    const int port = tcp_port();
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file",
                        write_token(dir_ + "/token")});
    const TaskId mine = submit({{"command", {"/bin/sleep", "600"}},
                                {"workdir", "/tmp"},
                                {"env", {{"ROOT_SECRET", "root-only"}}}});
    httplib::Client tcp("127.0.0.1", port);
    httplib::Headers auth = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdef"}};
    auto shown = tcp.Get("/v1/tasks/" + std::to_string(mine), auth);
    ASSERT_TRUE(shown);
    ASSERT_EQ(shown->status, 200) << shown->body;
    EXPECT_EQ(shown->body.find("root-only"), std::string::npos) << shown->body;
    EXPECT_FALSE(json::parse(shown->body).contains("env"));
    auto listed = tcp.Get("/v1/tasks?all=1", auth);
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->body.find("root-only"), std::string::npos);
    ASSERT_TRUE(client().cancel(mine));
    stop(SIGTERM);

    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file",
                        write_token(dir_ + "/token"), "--tcp-run-as", "carma-test-alice"});
    auto made = tcp.Post("/v1/tasks", auth,
                         json{{"command", {"/bin/sleep", "600"}},
                              {"workdir", "/tmp"},
                              {"env", {{"ALICE_SECRET", "alice-only"}}}}
                             .dump(),
                         "application/json");
    ASSERT_TRUE(made);
    ASSERT_EQ(made->status, 201) << made->body;
    const TaskId hers = json::parse(made->body)["id"].get<TaskId>();
    const TaskId roots = submit({{"command", {"/bin/sleep", "600"}},
                                 {"workdir", "/tmp"},
                                 {"env", {{"ROOT_SECRET", "root-only"}}}});
    auto own = tcp.Get("/v1/tasks/" + std::to_string(hers), auth);
    ASSERT_TRUE(own);
    EXPECT_NE(own->body.find("alice-only"), std::string::npos) << own->body;
    auto other = tcp.Get("/v1/tasks/" + std::to_string(roots), auth);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->body.find("root-only"), std::string::npos) << other->body;
    ASSERT_TRUE(client().cancel(hers));
    ASSERT_TRUE(client().cancel(roots));
}

// Opens `n` TCP connections to 127.0.0.1:port that send half a request head and then nothing.
std::vector<int> stalled_tcp_connections(int port, int n) {
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
            const char* part = "GET /v1/view HTTP/1.1\r\nHost: 127.0.0.1\r\n";
            (void)::send(fd, part, std::strlen(part), MSG_NOSIGNAL);
            fds.push_back(fd);
        } else if (fd >= 0) {
            ::close(fd);
        }
    }
    return fds;
}

// This test verifies authentication before resources: 60 connections that never finish a
// request and carry no token cannot keep a viewer with the token out of the web listener or
// the TCP API (before, they took all 32 slots and the viewer got 429).
TEST_F(DaemonTest, UnauthenticatedConnectionsCannotLockOutAViewer) {
    const int tcp = tcp_port();
    const int web = tcp + 1;
    std::ofstream(dir_ + "/web-token") << "web-token-0123456789abcdef\n";
    ::chmod((dir_ + "/web-token").c_str(), 0600);
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(tcp), "--token-file",
                        write_token(dir_ + "/token"), "--web", "0.0.0.0:" + std::to_string(web),
                        "--web-token-file", dir_ + "/web-token"});
    std::vector<int> stalled = stalled_tcp_connections(web, 60);
    std::vector<int> stalled_api = stalled_tcp_connections(tcp, 60);
    EXPECT_EQ(stalled.size(), 60u);
    std::this_thread::sleep_for(500ms);  // every one of them accepted and waiting
    httplib::Client page("127.0.0.1", web);
    page.set_read_timeout(10);
    auto seen = page.Get("/v1/view", {{"Authorization", "Bearer web-token-0123456789abcdef"}});
    ASSERT_TRUE(seen) << httplib::to_string(seen.error());
    EXPECT_EQ(seen->status, 200) << seen->body;
    httplib::Client api("127.0.0.1", tcp);
    api.set_read_timeout(10);
    auto status = api.Get("/v1/status", {{"Authorization",
                                          "Bearer 0123456789abcdef0123456789abcdef"}});
    ASSERT_TRUE(status) << httplib::to_string(status.error());
    EXPECT_EQ(status->status, 200) << status->body;
    for (int fd : stalled) {
        ::close(fd);
    }
    for (int fd : stalled_api) {
        ::close(fd);
    }
}

// This test verifies the web page's own credentials: the TCP API's token opens neither the web
// listener nor a session, the web token opens no TCP API, a session cookie made from the web
// token is HttpOnly and SameSite=Strict and is not the token, and one token for both is refused
// at start. The log names each listener's address.
TEST_F(DaemonTest, WebPageHasItsOwnToken) {
    const int tcp = tcp_port();
    const int web = tcp + 1;
    const std::string web_token = "web-token-0123456789abcdef";
    std::ofstream(dir_ + "/web-token") << web_token << "\n";
    ::chmod((dir_ + "/web-token").c_str(), 0600);
    const std::string api_token = "0123456789abcdef0123456789abcdef";
    const std::string same = refused_start(
        dir_, "--tcp 127.0.0.1:" + std::to_string(tcp) + " --token-file " +
                  write_token(dir_ + "/token") + " --web 0.0.0.0:" + std::to_string(web) +
                  " --web-token-file " + dir_ + "/token");
    EXPECT_NE(same.find("token of its own"), std::string::npos) << same;
    const std::string none = refused_start(dir_, "--web 0.0.0.0:" + std::to_string(web) +
                                                     " --token-file " + dir_ + "/token");
    EXPECT_NE(none.find("--web-token-file"), std::string::npos) << none;

    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(tcp), "--token-file",
                        write_token(dir_ + "/token"), "--web", "0.0.0.0:" + std::to_string(web),
                        "--web-token-file", dir_ + "/web-token"});
    // The log names every listener, so an admin finds the page's address (issue 22, item 6).
    const std::string log = daemon_log();
    EXPECT_NE(log.find("listening: the API on socket " + socket_), std::string::npos) << log;
    EXPECT_NE(log.find(fmt::format("listening: the API on TCP 127.0.0.1:{} (", tcp)),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(fmt::format("listening: the web page on http://0.0.0.0:{}/ (sign in", web)),
              std::string::npos)
        << log;
    httplib::Client page("127.0.0.1", web);
    auto with_api_token = page.Get("/v1/view", {{"Authorization", "Bearer " + api_token}});
    ASSERT_TRUE(with_api_token);
    EXPECT_EQ(with_api_token->status, 401);
    auto sign_in_api = page.Get("/?token=" + api_token);
    ASSERT_TRUE(sign_in_api);
    EXPECT_EQ(sign_in_api->status, 401);
    auto sign_in = page.Get("/?token=" + web_token);
    ASSERT_TRUE(sign_in);
    EXPECT_EQ(sign_in->status, 303);
    const std::string cookie = sign_in->get_header_value("Set-Cookie");
    EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
    EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos) << cookie;
    EXPECT_EQ(cookie.find(web_token), std::string::npos) << "the cookie is not the token";
    EXPECT_EQ(cookie.find("Secure"), std::string::npos) << "plain HTTP";
    const std::string pair = cookie.substr(0, cookie.find(';'));
    auto with_session = page.Get("/v1/view", {{"Cookie", pair}});
    ASSERT_TRUE(with_session);
    EXPECT_EQ(with_session->status, 200) << with_session->body;
    auto behind_tls = page.Get("/?token=" + web_token, {{"X-Forwarded-Proto", "https"}});
    ASSERT_TRUE(behind_tls);
    EXPECT_NE(behind_tls->get_header_value("Set-Cookie").find("; Secure"), std::string::npos);
    httplib::Client api("127.0.0.1", tcp);
    auto with_web_token = api.Get("/v1/status", {{"Authorization", "Bearer " + web_token}});
    ASSERT_TRUE(with_web_token);
    EXPECT_EQ(with_web_token->status, 401);
}

// This test verifies that requests a browser may have sent on someone's behalf are refused on
// the socket before anything happens: another Host (DNS rebinding), another Origin, a body not
// declared JSON, fetch metadata of another site; and that none of them submitted anything.
TEST_F(DaemonTest, ForeignBrowserRequestsAreRefused) {
    start("exclusive");
    const TaskId secret = submit({{"command", {"/bin/sleep", "600"}},
                                  {"workdir", "/tmp"},
                                  {"env", {{"WANDB_API_KEY", "the-secret"}}}});
    ASSERT_TRUE(eventually([&] { return state(secret) == "running"; }));
    httplib::Client cli(socket_, 80);
    cli.set_address_family(AF_UNIX);
    auto rebound = cli.Get("/v1/tasks/" + std::to_string(secret), {{"Host", "attacker.example"}});
    ASSERT_TRUE(rebound);
    EXPECT_EQ(rebound->status, 403);
    EXPECT_EQ(rebound->body.find("the-secret"), std::string::npos);
    const std::string body = json{{"command", {"/bin/true"}}, {"workdir", "/tmp"}}.dump();
    auto plain = cli.Post("/v1/tasks", body, "text/plain");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->status, 415) << plain->body;
    auto foreign = cli.Post("/v1/tasks", {{"Origin", "http://attacker.example"}}, body,
                            "application/json");
    ASSERT_TRUE(foreign);
    EXPECT_EQ(foreign->status, 403) << foreign->body;
    auto same_site = cli.Post("/v1/tasks/" + std::to_string(secret) + "/hold",
                              {{"Host", "localhost:8080"}, {"Sec-Fetch-Site", "same-site"},
                               {"Sec-Fetch-Mode", "no-cors"}},
                              "", "");
    ASSERT_TRUE(same_site);
    EXPECT_EQ(same_site->status, 403) << same_site->body;
    auto own_page = cli.Get("/v1/view", {{"Host", "localhost:8080"},
                                         {"Sec-Fetch-Site", "same-origin"},
                                         {"Sec-Fetch-Mode", "cors"},
                                         {"X-Carma-Page", "1"}});
    ASSERT_TRUE(own_page);
    EXPECT_EQ(own_page->status, 200) << own_page->body;
    auto listed = client().list_tasks(true);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 1u) << "nothing was submitted";
    EXPECT_EQ(state(secret), "running") << "nor held";
    ASSERT_TRUE(client().cancel(secret));
}

// This test verifies the small answers: a query with a second '?' is a malformed request (400,
// not 405), and an id beyond any task's is named as written (not as -1).
TEST_F(DaemonTest, MalformedQueriesAndHugeIds) {
    start("exclusive");
    const RawReply second = socket_request(socket_, "GET", "/v1/tasks?all=1?x=2");
    EXPECT_EQ(second.status, 400) << second.body;
    EXPECT_NE(second.body.find("malformed"), std::string::npos) << second.body;
    const RawReply huge = socket_request(socket_, "GET", "/v1/tasks/9223372036854775808");
    EXPECT_EQ(huge.status, 404) << huge.body;
    EXPECT_NE(huge.body.find("9223372036854775808"), std::string::npos) << huge.body;
    EXPECT_EQ(huge.body.find("-1"), std::string::npos) << huge.body;
    const RawReply wrong_method = socket_request(socket_, "PUT", "/v1/tasks", "{}");
    EXPECT_EQ(wrong_method.status, 405) << wrong_method.body;
}

// This test verifies that idle keep-alive connections (a browser's, through a tunnel that
// reaches the socket as the user) make room for the user's next command instead of locking it
// out with 429, while connections in the middle of a request still count.
TEST_F(DaemonTest, IdleConnectionsMakeRoomForTheOwnersCommands) {
    start("exclusive");
    std::vector<int> idle;
    for (int i = 0; i < 8; ++i) {  // the per-uid cap, every one kept alive after one request
        const int fd = connect_unix(socket_);
        ASSERT_GE(fd, 0);
        const std::string request = "GET /healthz HTTP/1.1\r\nHost: localhost:8080\r\n\r\n";
        ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(request.size()));
        char buf[512] = {};
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ASSERT_GT(::recv(fd, buf, sizeof buf - 1, 0), 0);
        EXPECT_EQ(std::string(buf).rfind("HTTP/1.1 200", 0), 0u) << buf;
        idle.push_back(fd);
    }
    auto status = client().status();
    EXPECT_TRUE(status) << (status ? "" : status.error().message);
    auto listed = client().list_tasks(true);
    EXPECT_TRUE(listed) << (listed ? "" : listed.error().message);
    for (int fd : idle) {
        ::close(fd);
    }
}


// This test verifies a process CARMA did not start, made with `carma-fakejob --foreign` on an
// emulated GPU: GET /v1/gpus lists it under "foreign" with its pid and user, owner "foreign";
// `carma gpus` and the page's view show it; a task that fits only into the memory it holds waits,
// and starts once it is gone.
TEST_F(DaemonTest, ForeignFakejobIsShownAndNeverPlannedInto) {
    start("carma", {"--exclude-gpus", "1,2,3"});
    const pid_t foreign = test_support::spawn_logged(
        {CARMA_FAKEJOB_PATH, "--foreign", "--profile", "resnet18_cifar100_20e_3", "--memory",
         "30GiB"},
        dir_ + "/foreign.log",
        {"CARMA_EMULATOR_FILE=" + dir_ + "/state/emulated-gpus", "CUDA_VISIBLE_DEVICES=0"});
    ASSERT_GT(foreign, 0);
    json gpu0;
    ASSERT_TRUE(eventually([&] {
        auto g = client().gpus();
        if (!g) {
            return false;
        }
        gpu0 = (*g)["gpus"][0];
        return gpu0.contains("foreign") && gpu0["foreign"].size() == 1;
    })) << gpu0.dump(2) << read_text(dir_ + "/foreign.log");
    EXPECT_EQ(gpu0["foreign"][0]["pid"], foreign);
    const passwd* me = ::getpwuid(::geteuid());
    ASSERT_NE(me, nullptr);
    EXPECT_EQ(gpu0["foreign"][0]["user"], me->pw_name);
    EXPECT_EQ(gpu0["foreign"][0]["used_mib"], 30 * 1024);
    EXPECT_EQ(gpu0["processes"][0]["owner"], "foreign");

    auto view = client().view();
    ASSERT_TRUE(view) << view.error().message;
    EXPECT_EQ((*view)["gpus"][0]["foreign"][0]["pid"], foreign) << (*view)["gpus"][0].dump(2);

    const pid_t cli = test_support::spawn_logged({CARMA_BIN, "gpus", "--socket", socket_},
                                                 dir_ + "/gpus.txt");
    int status = 0;
    ::waitpid(cli, &status, 0);
    const std::string printed = read_text(dir_ + "/gpus.txt");
    EXPECT_NE(printed.find(fmt::format("foreign: pid {} user {}", foreign, me->pw_name)),
              std::string::npos)
        << printed;
    EXPECT_NE(printed.find("EMULATED"), std::string::npos) << printed;

    // 40 GB less 30 GiB foreign leaves under 10 GiB: a task declared at 9 GiB (+ margin) waits.
    const TaskId id = submit(fake_job("resnet18_cifar100_20e_3", 60, 9 * 1024));
    EXPECT_FALSE(eventually([&] { return state(id) == "running"; }, 3s)) << task(id).dump(2);
    ::kill(foreign, SIGTERM);
    ::waitpid(foreign, &status, 0);
    EXPECT_EQ(wait_final(id)["state"], "succeeded") << task(id).dump(2);
}

}  // namespace
}  // namespace carma
