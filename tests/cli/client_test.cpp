// The API client and the client commands against a small fake daemon: an httplib server on a
// temporary Unix socket that records every request and answers what each test scripts.

#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands.h"
#include "cli/fake_daemon.h"
#include "cli/run_command.h"
#include "core/csv.h"

namespace carma {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_support::FakeDaemon;
using test_support::make_temp_dir;
using test_support::Seen;
using test_support::run_command;
using test_support::command_error;


// ---- ApiClient ----------------------------------------------------------------------------

// This test verifies that a client pointed at a socket nobody listens on fails with the
// promised message: the path, why, and how to point it elsewhere.
TEST(ApiClientTest, MissingSocketSaysWhereAndWhat) {
    api::ApiClient client("/tmp/carma-no-such-dir/carma.sock");
    auto r = client.list_tasks(false);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Io);
    EXPECT_EQ(r.error().message,
              "cannot reach the CARMA daemon at /tmp/carma-no-such-dir/carma.sock: No such file "
              "or directory; is `carma serve` running? (set --socket or CARMA_SOCKET)");
}

// This test verifies that a socket left behind by a stopped daemon and a path that is not a
// socket are told apart.
TEST(ApiClientTest, StaleSocketAndNotASocket) {
    const fs::path dir = make_temp_dir();
    const std::string stale = (dir / "stale.sock").string();
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, stale.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);  // bound, never listening: connecting is refused

    auto r = api::ApiClient(stale).gpus();
    ASSERT_FALSE(r);
    EXPECT_THAT(r.error().message, HasSubstr("cannot reach the CARMA daemon at " + stale));
    EXPECT_THAT(r.error().message, HasSubstr("connection refused"));

    std::ofstream(dir / "plain") << "x";
    auto plain = api::ApiClient((dir / "plain").string()).status();
    ASSERT_FALSE(plain);
    EXPECT_THAT(plain.error().message, HasSubstr("that path is not a socket"));
    fs::remove_all(dir);
}

// This test verifies that each client method sends its endpoint's method, path and query.
TEST(ApiClientTest, EachMethodHitsItsRoute) {
    FakeDaemon daemon;
    api::ApiClient client(daemon.socket());
    ASSERT_TRUE(client.submit(json{{"command", {"true"}}, {"workdir", "/"}}));
    ASSERT_TRUE(client.list_tasks(false));
    ASSERT_TRUE(client.list_tasks(true));
    ASSERT_TRUE(client.task(12));
    ASSERT_TRUE(client.cancel(12));
    ASSERT_TRUE(client.logs(12, {}));
    ASSERT_TRUE(client.logs(12, {api::LogStream::Stderr, 2, 100}));
    ASSERT_TRUE(client.gpus());
    ASSERT_TRUE(client.events({}));
    ASSERT_TRUE(client.events({5, 12, 10}));
    ASSERT_TRUE(client.status());
    ASSERT_TRUE(client.metrics());
    ASSERT_TRUE(client.healthz());
    ASSERT_TRUE(client.estimate(json{{"command", {"true"}}, {"workdir", "/"}}));
    EXPECT_THAT(
        daemon.targets(),
        ElementsAre("POST /v1/tasks", "GET /v1/tasks?limit=10000",
                    "GET /v1/tasks?all=1&limit=10000", "GET /v1/tasks/12",
                    "DELETE /v1/tasks/12", "GET /v1/tasks/12/logs?stream=stdout",
                    "GET /v1/tasks/12/logs?attempt=2&offset=100&stream=stderr", "GET /v1/gpus",
                    "GET /v1/events", "GET /v1/events?after=5&limit=10&task=12", "GET /v1/status",
                    "GET /metrics", "GET /healthz", "POST /v1/estimate"));
    EXPECT_EQ(json::parse(daemon.seen().front().body),
              json::parse(R"({"command": ["true"], "workdir": "/"})"));

    auto latin1 = client.submit(json{{"command", {"echo", "caf\xe9"}}, {"workdir", "/"}});
    ASSERT_FALSE(latin1);
    EXPECT_THAT(latin1.error().message, HasSubstr("is not valid UTF-8"));
}

// This test verifies that a daemon's error answer reaches the user as its own message, with an
// error code matching the status, that answers without one still say what happened, and that
// exchange() hands back any status as it came.
TEST(ApiClientTest, ServerErrorsSurface) {
    FakeDaemon daemon;
    api::ApiClient client(daemon.socket());
    struct Case {
        int status;
        std::string body;
        ErrorCode code;
        std::string want;
    };
    const Case cases[] = {
        {404, R"({"error": "task 99 does not exist; see carma queue --all"})", ErrorCode::NotFound,
         "task 99 does not exist; see carma queue --all"},
        {422, R"({"error": "task needs 9 GPUs; this server has 4"})", ErrorCode::Infeasible,
         "task needs 9 GPUs; this server has 4"},
        {409, R"({"error": "task 3 has finished"})", ErrorCode::InvalidArgument,
         "task 3 has finished"},
        {502, "<html>bad gateway</html>", ErrorCode::Internal,
         "the CARMA daemon answered HTTP 502 to GET /v1/tasks/99 without an error message: "
         "'<html>bad gateway</html>'"},
    };
    for (const Case& c : cases) {
        daemon.respond([&](const httplib::Request&, httplib::Response& res) {
            res.status = c.status;
            res.set_content(c.body, "application/json");
        });
        auto r = client.task(99);
        ASSERT_FALSE(r) << c.status;
        EXPECT_EQ(r.error().code, c.code) << c.status;
        EXPECT_EQ(r.error().message, c.want);
        auto raw = client.exchange("GET", "/v1/tasks/99");  // raw: any status is an answer
        ASSERT_TRUE(raw) << raw.error().message;
        EXPECT_EQ(raw->status, c.status);
        EXPECT_EQ(raw->body, c.body);
    }
    daemon.respond([](const httplib::Request&, httplib::Response& res) {
        res.set_content("not json", "text/plain");
    });
    auto r = client.gpus();
    ASSERT_FALSE(r);
    EXPECT_THAT(r.error().message, HasSubstr("answer to GET /v1/gpus is not JSON"));
}

// This test verifies that a log answer carries the log's size and the task's state.
TEST(ApiClientTest, LogsReadTheirHeaders) {
    FakeDaemon daemon;
    daemon.respond([](const httplib::Request&, httplib::Response& res) {
        res.set_content("epoch 1\n", "text/plain");
        res.set_header("X-Carma-Log-Size", "108");
        res.set_header("X-Carma-Task-State", "running");
    });
    auto chunk = api::ApiClient(daemon.socket()).logs(4, {api::LogStream::Stdout, {}, 100});
    ASSERT_TRUE(chunk) << chunk.error().message;
    EXPECT_EQ(chunk->text, "epoch 1\n");
    EXPECT_EQ(chunk->log_size, 108u);
    EXPECT_EQ(chunk->task_state, "running");
}

// This test verifies where the socket is when nothing is set: root's is system-wide, a user's
// lives in their XDG state directory.
TEST(ApiClientTest, DefaultSocketPath) {
    EXPECT_EQ(api::default_socket_path_for(true, "/x", "/root"), "/var/lib/carma/carma.sock");
    EXPECT_EQ(api::default_socket_path_for(false, "/state", "/home/a"), "/state/carma/carma.sock");
    EXPECT_EQ(api::default_socket_path_for(false, nullptr, "/home/a"),
              "/home/a/.local/state/carma/carma.sock");
    EXPECT_EQ(api::default_socket_path_for(false, "", "/home/a"),
              "/home/a/.local/state/carma/carma.sock");
    // The XDG spec: a relative XDG_STATE_HOME is invalid and ignored.
    EXPECT_EQ(api::default_socket_path_for(false, "rel", "/home/a"),
              "/home/a/.local/state/carma/carma.sock");

    ::setenv("CARMA_SOCKET", "/env.sock", 1);
    EXPECT_EQ(api::resolve_socket_path("/flag.sock"), "/flag.sock");
    EXPECT_EQ(api::resolve_socket_path(""), "/env.sock");
    ::unsetenv("CARMA_SOCKET");
    EXPECT_EQ(api::resolve_socket_path(""), api::default_socket_path());
}

// This test verifies which socket a command takes when nothing names one (issue 45, item 1): a
// user's own daemon while it answers, else the packaged daemon's when its socket exists, else
// their own (whose absence the error explains); root always takes the system's.
TEST(ApiClientTest, ClientSocketPrefersOwnDaemonThenSystem) {
    const std::string own = "/home/a/.local/state/carma/carma.sock";
    const std::string system = "/var/lib/carma/carma.sock";
    EXPECT_EQ(api::system_socket_path(), system);
    // is_root, own answers, system socket exists
    EXPECT_EQ(api::client_socket_path_for(false, own, true, true), own);
    EXPECT_EQ(api::client_socket_path_for(false, own, true, false), own);
    EXPECT_EQ(api::client_socket_path_for(false, own, false, true), system);
    EXPECT_EQ(api::client_socket_path_for(false, own, false, false), own);
    EXPECT_EQ(api::client_socket_path_for(true, system, false, false), system);
}

// ---- the commands -------------------------------------------------------------------------
// These need src/cli/commands/*_command.cpp in the test executable (tests/CMakeLists.txt adds
// them).

void answer_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

// Unix seconds now, as the daemon stamps tasks.
double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

const json kTask = json::parse(R"({
    "id": 12, "name": "resnet3", "user": "alice", "uid": 1001, "gid": 1001, "state": "running",
    "command": ["carma-fakejob", "--profile", "resnet3"], "workdir": "/home/alice/exp",
    "gpus": 1, "memory": {"declared_mib": 13236, "profiled_mib": null, "horus_mib": null,
                          "faketensor_mib": null, "gpumemnet_mib": null},
    "env": {"EPOCHS": "3"}, "attempts": 2, "max_attempts": 3,
    "submitted_at": 1764441600.5, "finished_at": null, "message": "running on GPU 2",
    "attempt_list": [
        {"number": 1, "gpus": [0], "started_at": 1764441601.0, "ended_at": 1764441700.0,
         "outcome": "out-of-memory", "exit_code": 1, "signal": null, "recovered": false},
        {"number": 2, "gpus": [2], "started_at": 1764441710.0, "ended_at": null,
         "outcome": "", "exit_code": null, "signal": null, "recovered": true}]
})");

// This test verifies that `carma submit` turns its flags into the request body and prints the
// new task's id and name.
// PATH set to a directory holding a fake `python`, for the duration of a test.
class FakePath {
public:
    FakePath() : dir_(make_temp_dir()), old_(std::getenv("PATH") ? std::getenv("PATH") : "") {
        std::ofstream(dir_ / "python") << "#!/bin/sh\n";
        fs::permissions(dir_ / "python", fs::perms::owner_all);
        ::setenv("PATH", (dir_.string() + ":/usr/bin:/bin").c_str(), 1);
    }
    ~FakePath() {
        ::setenv("PATH", old_.c_str(), 1);
        fs::remove_all(dir_);
    }
    std::string python() const { return (dir_ / "python").string(); }

private:
    fs::path dir_;
    std::string old_;
};

// This test verifies that `carma submit` turns its flags into the request body and prints the
// new task's id and name; the executable is resolved against the submitter's PATH.
TEST(ClientCommandsTest, SubmitSendsFlags) {
    FakeDaemon daemon;
    FakePath path;
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 201, kTask); });
    const std::string out = run_command(
        cli::add_submit_command,
        {"submit", "--socket", daemon.socket(), "-g",     "2",      "--gpu-mem",  "12GiB",
         "-c", "8", "--mem", "32GiB", "--name", "resnet3",  "--workdir",     "/data",  "--env",  "A=1",    "--env",
         "B=x=y",  "--max-attempts", "4",       "--export", "NONE", "--",     "python",
         "train.py", "--lr",   "0.1"});
    EXPECT_EQ(out, "submitted task 12 (resnet3)\n");
    ASSERT_EQ(daemon.seen().size(), 1u);
    json expected = json::parse(R"({
        "command": ["python", "train.py", "--lr", "0.1"], "workdir": "/data", "name": "resnet3",
        "gpus": 2, "cpus": 8, "host_mem_mib": 32768, "memory": {"declared_mib": 12288},
        "env": {"A": "1", "B": "x=y"},
        "explicit_env": ["A", "B"], "max_attempts": 4})");
    expected["command"][0] = path.python();
    EXPECT_EQ(json::parse(daemon.seen()[0].body), expected);

    // Exported from the shell (the default --export=ALL): sent, but not among the variables
    // set on purpose.
    (void)run_command(cli::add_submit_command,
                      {"submit", "--socket", daemon.socket(), "--env", "A=1", "--", "python",
                       "train.py"});
    const json exported = json::parse(daemon.seen().back().body);
    EXPECT_EQ(exported["explicit_env"], json::array({"A"}));
    EXPECT_TRUE(exported["env"].contains("PATH")) << exported.dump();
}

// This test verifies sbatch's spellings on `carma submit`: -J, -t MINUTES, --dependency with its
// three types, --after with array members and arrays, -o/-e with their codes, -D, -a, and the
// mail options, each reaching the body as the daemon takes it.
TEST(ClientCommandsTest, SubmitTakesSbatchSpellings) {
    FakeDaemon daemon;
    FakePath path;
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 201, kTask); });
    (void)run_command(cli::add_submit_command,
                      {"submit", "--socket", daemon.socket(), "-J", "sweep", "-t", "100",
                       "--after", "106_5:107", "--dependency=afterany:108,afternotok:109_*",
                       "-o", "out-%A_%a.log", "-e", "err-%j.log", "-D", "/data", "-a", "0-3",
                       "--mail-type", "END,FAIL", "--mail-user", "alice@lab", "--export",
                       "NONE", "--", "python", "t.py"});
    ASSERT_EQ(daemon.seen().size(), 1u);
    const json body = json::parse(daemon.seen()[0].body);
    EXPECT_EQ(body["name"], "sweep");
    EXPECT_EQ(body["time_limit_s"], 6000) << "a bare -t is minutes, as sbatch reads it";
    EXPECT_EQ(body["dependencies"], json::parse(R"([
        {"type": "afterok", "task": "106_5"}, {"type": "afterok", "task": "107"},
        {"type": "afterany", "task": "108"}, {"type": "afternotok", "task": "109_*"}])"));
    EXPECT_EQ(body["output"], "out-%A_%a.log");
    EXPECT_EQ(body["error"], "err-%j.log");
    EXPECT_EQ(body["workdir"], "/data");
    EXPECT_EQ(body["array"], "0-3");
    EXPECT_EQ(body["mail_type"], "END,FAIL");
    EXPECT_EQ(body["mail_user"], "alice@lab");
    EXPECT_FALSE(body.contains("after"));

    const std::string s = "/tmp/carma-no-such-dir/carma.sock";
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--dependency", "singleton:12", "x"}),
                HasSubstr("singleton takes none"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--after", "12_x", "x"}),
                HasSubstr("'12_x' is not a task"));
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "-o", "%N", "x"}),
                HasSubstr("--output '%N' has the code %N"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--mail-type", "SOMETIMES", "x"}),
                HasSubstr("'SOMETIMES'"));
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "-t", "1.5", "x"}),
                HasSubstr("MINUTES"));
    // Options after the first word are the task's, as sbatch's are the script's; a task file
    // has none, so one there says where options go.
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "t.yaml", "--json"}),
                HasSubstr("options go before it: got --json after t.yaml; e.g. `carma submit "
                          "--json t.yaml`"));
}

// This test verifies --export: the submitter's environment goes with the task by default (as
// with sbatch), without what would change where it runs; NONE and a list narrow it.
TEST(ClientCommandsTest, SubmitExportsTheEnvironment) {
    FakeDaemon daemon;
    FakePath path;
    ::setenv("CARMA_TEST_EXPORTED", "yes", 1);
    ::setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    auto env_of = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {"submit", "--socket", daemon.socket()};
        argv.insert(argv.end(), args.begin(), args.end());
        (void)run_command(cli::add_submit_command, argv);
        return json::parse(daemon.seen().back().body).value("env", json::object());
    };
    const json all = env_of({"--", "python", "t.py"});
    EXPECT_FALSE(all.contains("CARMA_TEST_EXPORTED")) << "CARMA_* belongs to CARMA";
    EXPECT_FALSE(all.contains("CUDA_VISIBLE_DEVICES"));
    EXPECT_EQ(all.value("PATH", ""), std::getenv("PATH"));
    ::setenv("MY_EXPORTED_VAR", "hello", 1);
    EXPECT_EQ(env_of({"--", "python", "t.py"}).value("MY_EXPORTED_VAR", ""), "hello");
    EXPECT_EQ(env_of({"--export", "NONE", "--", "python", "t.py"}), json::object());
    EXPECT_EQ(env_of({"--export", "MY_EXPORTED_VAR,X=1", "--", "python", "t.py"}),
              (json{{"MY_EXPORTED_VAR", "hello"}, {"X", "1"}}));
    ::unsetenv("CARMA_TEST_EXPORTED");
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("MY_EXPORTED_VAR");
}

// This test verifies that a task file given to `carma submit` is read, with flags overriding it.
TEST(ClientCommandsTest, SubmitTaskFile) {
    FakeDaemon daemon;
    const fs::path dir = make_temp_dir();
    std::ofstream(dir / "job.yaml") << "command: python t.py\ngpus: 1\nworkdir: run\n";
    const std::string out = run_command(
        cli::add_submit_command,
        {"submit", "--socket", daemon.socket(), "-g", "2", "--json", (dir / "job.yaml").string()});
    const json body = json::parse(daemon.seen().at(0).body);
    EXPECT_EQ(body["gpus"], 2);
    EXPECT_EQ(body["name"], "job");
    EXPECT_EQ(body["workdir"], (dir / "run").string());
    EXPECT_EQ(json::parse(out), json::object());  // --json prints the daemon's answer
    fs::remove_all(dir);
}

// This test verifies that impossible submissions are refused before anything is sent.
TEST(ClientCommandsTest, SubmitRefusesBadInput) {
    const std::string s = "/tmp/carma-no-such-dir/carma.sock";
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "-g", "-1", "x"}),
                HasSubstr("--gpus must be 0 (a CPU-only task) or more (got -1)"));
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "-c", "0", "x"}),
                HasSubstr("--cpus-per-task must be a number of cores from 1"));
    EXPECT_THAT(
        command_error(cli::add_submit_command, {"submit", "--socket", s, "--mem", "lots", "x"}),
        HasSubstr("memory 'lots' does not start with a number"));
    EXPECT_THAT(
        command_error(cli::add_submit_command, {"submit", "--socket", s, "--mem", "12", "x"}),
        HasSubstr("--mem 12: give a unit: 12GiB, 12MiB, or 12GB"));
    EXPECT_THAT(
        command_error(cli::add_submit_command, {"submit", "--socket", s, "--gpu-mem", "12", "x"}),
        HasSubstr("--gpu-mem 12: give a unit: 12GiB, 12MiB, or 12GB"));
    EXPECT_THAT(  // estimate reads the flags as submit does
        command_error(cli::add_estimate_command,
                      {"estimate", "--socket", s, "--gpu-mem", "12", "x"}),
        HasSubstr("--gpu-mem 12: give a unit: 12GiB, 12MiB, or 12GB"));
    EXPECT_THAT(
        command_error(cli::add_estimate_command, {"estimate", "--socket", s, "-g", "-2", "x"}),
        HasSubstr("--gpus must be 0 (a CPU-only task) or more (got -2)"));
    EXPECT_THAT(
        command_error(cli::add_submit_command, {"submit", "--socket", s, "--env", "A", "x"}),
        HasSubstr("--env 'A' must be NAME=VALUE"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--max-attempts", "0", "x"}),
                HasSubstr("--max-attempts must be from 1 to 100"));
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s}),
                HasSubstr("nothing to submit"));
    EXPECT_THAT(command_error(cli::add_submit_command, {"submit", "--socket", s, "/bin/true"}),
                HasSubstr("cannot reach the CARMA daemon"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--", "no-such-program-here"}),
                HasSubstr("command 'no-such-program-here' not found in your PATH"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--conda", "no-such-env", "/bin/true"}),
                HasSubstr("conda environment 'no-such-env' not found (looked in"));
    EXPECT_THAT(command_error(cli::add_submit_command,
                              {"submit", "--socket", s, "--export", "NONE,A", "/bin/true"}),
                HasSubstr("--export 'NONE,A': give ALL, NONE, or a comma list"));
}

// This test verifies the queue table's columns (a running task's TIME from started_at), that
// nothing is cut when stdout is not a terminal, and that --json passes the answer through.
TEST(ClientCommandsTest, QueueTableAndJson) {
    FakeDaemon daemon;
    json list = {{"tasks", json::array({kTask})}};
    list["tasks"][0]["message"] = std::string(100, 'm');
    list["tasks"][0]["started_at"] = now_seconds() - 5 * 3600;
    daemon.respond(
        [&](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, list); });
    const std::string out =
        run_command(cli::add_queue_command, {"queue", "--all", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("ID  USER   NAME     STATE    GPUS  MEM         WAIT  TIME   "
                               "REASON\n"));
    EXPECT_THAT(out, HasSubstr("12  alice  resnet3  running  1     13,236 MiB  -     5h00m  " +
                               std::string(100, 'm') + "\n"));
    EXPECT_EQ(daemon.targets().back(), "GET /v1/tasks?all=1&limit=10000");
    const std::string js =
        run_command(cli::add_queue_command, {"queue", "--json", "--socket", daemon.socket()});
    EXPECT_EQ(json::parse(js), list);
}

// The login the daemon would name this process's tasks with.
std::string my_login() {
    const passwd* pw = ::getpwuid(::geteuid());
    return pw != nullptr ? pw->pw_name : std::to_string(::geteuid());
}

// This test verifies --user (repeatable, comma lists), --me, --state (a finished state fetches
// finished tasks too; an unknown one is named with the nearest) and --format, in the table and
// in --json.
TEST(ClientCommandsTest, QueueFiltersAndFormat) {
    FakeDaemon daemon;
    json list = {{"tasks", json::array()}};
    for (const auto& [id, user, state] : {std::tuple{1, "alice", "running"},
                                          std::tuple{2, "bob", "queued"},
                                          std::tuple{3, "carol", "succeeded"}}) {
        json t = kTask;
        t["id"] = id;
        t["user"] = user;
        t["state"] = state;
        list["tasks"].push_back(t);
    }
    list["tasks"][2]["user"] = my_login();
    daemon.respond(
        [&](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, list); });
    const std::string s = daemon.socket();
    auto queue = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"queue", "--socket", s, "--format", "id,user"});
        return run_command(cli::add_queue_command, args);
    };
    EXPECT_EQ(queue({"--user", "bob"}), "ID  USER\n2   bob\n");
    EXPECT_EQ(queue({"-u", "alice,bob"}), "ID  USER\n1   alice\n2   bob\n");
    EXPECT_EQ(queue({"--user", "alice", "--user", "bob"}), "ID  USER\n1   alice\n2   bob\n");
    EXPECT_EQ(queue({"--me"}), fmt::format("ID  USER\n3   {}\n", my_login()));
    EXPECT_EQ(daemon.targets().back(), "GET /v1/tasks?limit=10000");
    EXPECT_EQ(queue({"--state", "succeeded,queued"}),
              fmt::format("ID  USER\n2   bob\n3   {}\n", my_login()));
    EXPECT_EQ(daemon.targets().back(), "GET /v1/tasks?all=1&limit=10000");  // finished tasks were asked for
    EXPECT_EQ(run_command(cli::add_queue_command,
                          {"queue", "--socket", s, "-o", "%i %t", "-t", "running"}),
              "ID  STATE\n1   running\n");
    const json js = json::parse(run_command(cli::add_queue_command,
                                            {"queue", "--socket", s, "--json", "--user", "bob"}));
    EXPECT_EQ(js, json({{"tasks", json::array({list["tasks"][1]})}}));

    EXPECT_THAT(command_error(cli::add_queue_command, {"queue", "--socket", s, "--state", "runing"}),
                HasSubstr("unknown state 'runing' in --state (did you mean 'running'?)"));
    EXPECT_THAT(command_error(cli::add_queue_command,
                              {"queue", "--socket", s, "--format", "id,stat"}),
                HasSubstr("unknown field 'stat' in --format (did you mean 'state'?)"));
    EXPECT_THAT(command_error(cli::add_queue_command, {"queue", "--socket", s, "--watch", "0"}),
                HasSubstr("--watch 0: give the seconds between refreshes, 0.1 or more"));
}

// This test verifies that --watch lists again and again, each listing after a blank line when
// stdout is not a terminal, and that an error the daemon answers with ends it.
TEST(ClientCommandsTest, QueueWatchRepeatsUntilAnError) {
    FakeDaemon daemon;
    std::atomic<int> listings{0};
    daemon.respond([&](const httplib::Request&, httplib::Response& res) {
        if (++listings <= 2) {
            answer_json(res, 200, {{"tasks", json::array({kTask})}});
        } else {
            answer_json(res, 403, {{"error", "not yours"}});
        }
    });
    CLI::App app;
    cli::Action action = cli::add_queue_command(app);
    const char* argv[] = {"carma", "queue", "--socket", daemon.socket().c_str(), "--watch", "0.1",
                          "--format", "id,state"};
    app.parse(8, argv);
    ::testing::internal::CaptureStdout();
    std::string error;
    try {
        action();
    } catch (const std::exception& e) {
        error = e.what();
    }
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(out, "ID  STATE\n12  running\n\nID  STATE\n12  running\n");
    EXPECT_THAT(error, HasSubstr("not yours"));
    EXPECT_EQ(listings.load(), 3);
}



// This test verifies that `carma show` prints the fields and one row per attempt.
TEST(ClientCommandsTest, ShowPrintsFieldsAndAttempts) {
    FakeDaemon daemon;
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, kTask); });
    const std::string out =
        run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("task 12 (resnet3)\n"));
    EXPECT_THAT(out, HasSubstr("command     carma-fakejob --profile resnet3\n"));
    EXPECT_THAT(out, HasSubstr("memory      declared 13,236 MiB\n"));
    EXPECT_THAT(out, HasSubstr("env         EPOCHS=3\n"));
    EXPECT_THAT(out, HasSubstr("attempts    2 of at most 3\n"));
    EXPECT_THAT(out, HasSubstr("ATTEMPT  GPUS  STARTED"));
    EXPECT_THAT(out, ::testing::ContainsRegex("1 +0 +.* 1m39s +out-of-memory +1 +no"));
    EXPECT_THAT(out, ::testing::ContainsRegex("2 +2 +.* - .* running +- +yes"));
    EXPECT_THAT(daemon.targets(), ::testing::Contains("GET /v1/tasks/12"));
}

// This test verifies that `carma show` lists the variables set on purpose (explicit_env) and
// counts the ones exported from the submitter's shell, which --env-all lists too; and that it
// prints the task's warning events (a task file's duplicated block), and nothing of other kinds.
TEST(ClientCommandsTest, ShowPrintsExplicitEnvironmentAndWarnings) {
    FakeDaemon daemon;
    json task = kTask;
    task["env"] = {{"EPOCHS", "3"}, {"HOME", "/home/alice"}, {"PATH", "/usr/bin"}};
    task["explicit_env"] = {"EPOCHS"};
    const json events = json::parse(R"({"events": [
        {"id": 1, "time": 1764441600, "task": 12, "kind": "submitted", "message": "by alice"},
        {"id": 2, "time": 1764441600, "task": 12, "kind": "warning",
         "message": "gpt2_xl.rad:13: a second `memory` block; the first one is used"}]})");
    daemon.respond([&](const httplib::Request& req, httplib::Response& res) {
        answer_json(res, 200, req.path == "/v1/events" ? events : task);
    });
    const std::string out =
        run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("env         EPOCHS=3; and 2 from the submitter's environment "
                               "(--env-all shows them)\n"));
    EXPECT_THAT(out, HasSubstr("warning     gpt2_xl.rad:13: a second `memory` block; the first "
                               "one is used\n"));
    EXPECT_THAT(out, ::testing::Not(HasSubstr("by alice")));
    EXPECT_THAT(daemon.targets(), ::testing::Contains("GET /v1/events?limit=10000&task=12"));
    const std::string all = run_command(cli::add_show_command,
                                        {"show", "12", "--env-all", "--socket", daemon.socket()});
    EXPECT_THAT(all, HasSubstr("env         EPOCHS=3 HOME=/home/alice PATH=/usr/bin\n"));
    // Another user's task comes without its environment.
    task.erase("env");
    task.erase("explicit_env");
    EXPECT_THAT(run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()}),
                HasSubstr("env         - (only the task's owner and root see it)\n"));
}

// This test verifies that several task files in one submit are refused with what to do, not
// read as a command ("command 'a.rad' not found or not executable"), before the daemon is asked.
TEST(ClientCommandsTest, OneTaskFilePerSubmit) {
    const std::string s = "/tmp/carma-no-such-dir/carma.sock";
    const std::string error =
        command_error(cli::add_submit_command, {"submit", "--socket", s, "a.rad", "b.yaml"});
    EXPECT_THAT(error, HasSubstr("one task file per submit: got a.rad, b.yaml"));
    EXPECT_THAT(error, HasSubstr("for f in a.rad b.yaml; do carma submit"));
}

// This test verifies Slurm's ID_INDEX on `carma show`, `logs`, `cancel`, `hold` and `release`:
// the member goes to the daemon as written (GET /v1/tasks/106_5), is named the way views name
// it, and a whole array is refused by show and logs with how to name one task. Before,
// `carma show 106_5` printed CLI11's "Could not convert: id = 106_5".
TEST(ClientCommandsTest, ArrayMembersByIdIndex) {
    FakeDaemon daemon;
    json member = kTask;
    member["id"] = 111;
    member["array"] = {{"id", 106}, {"index", 5}};
    member["state"] = "queued";
    member["dependencies"] = json::parse(R"([{"type": "afterany", "task": "99_*"}])");
    member["output"] = "out-%A_%a.log";
    daemon.respond([&](const httplib::Request&, httplib::Response& res) {
        answer_json(res, 200, member);
    });
    const std::string shown =
        run_command(cli::add_show_command, {"show", "106_5", "--socket", daemon.socket()});
    EXPECT_THAT(daemon.targets(), ::testing::Contains("GET /v1/tasks/106_5"));
    EXPECT_THAT(shown, HasSubstr("task 106_5 (resnet3)\n"));
    EXPECT_THAT(shown, HasSubstr("dependency  afterany:99_*\n"));
    EXPECT_THAT(shown, HasSubstr("output      out-%A_%a.log"));
    EXPECT_EQ(run_command(cli::add_cancel_command, {"cancel", "106_5", "--socket", daemon.socket()}),
              "stopping task 106_5 (resnet3); it stays queued until its processes have exited\n");
    EXPECT_EQ(daemon.targets().back(), "DELETE /v1/tasks/106_5");
    EXPECT_EQ(run_command(cli::add_hold_command, {"hold", "106_5", "--socket", daemon.socket()}),
              "held task 106_5 (resnet3)\n");
    EXPECT_EQ(daemon.targets().back(), "POST /v1/tasks/106_5/hold");
    (void)run_command(cli::add_release_command, {"release", "106_5", "--socket", daemon.socket()});
    EXPECT_EQ(daemon.targets().back(), "POST /v1/tasks/106_5/release");
    (void)run_command(cli::add_logs_command, {"logs", "106_5", "--socket", daemon.socket()});
    EXPECT_THAT(daemon.targets().back(), HasSubstr("GET /v1/tasks/106_5/logs"));
    EXPECT_THAT(command_error(cli::add_show_command, {"show", "106_*", "--socket", daemon.socket()}),
                HasSubstr("'106_*' is a whole array; name one task"));
    EXPECT_THAT(command_error(cli::add_logs_command, {"logs", "106_x", "--socket", daemon.socket()}),
                HasSubstr("an array member (12_3)"));
}

// This test verifies that cancel says whether the task is gone or still stopping, and that an
// unknown task's error is the daemon's.
TEST(ClientCommandsTest, Cancel) {
    FakeDaemon daemon;
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, kTask); });
    EXPECT_EQ(run_command(cli::add_cancel_command, {"cancel", "12", "--socket", daemon.socket()}),
              "stopping task 12 (resnet3); it stays running until its processes have exited\n");
    EXPECT_EQ(daemon.targets().back(), "DELETE /v1/tasks/12");
    daemon.respond([](const httplib::Request&, httplib::Response& res) {
        answer_json(res, 404, {{"error", "task 13 does not exist"}});
    });
    EXPECT_EQ(command_error(cli::add_cancel_command, {"cancel", "13", "--socket", daemon.socket()}),
              "task 13 does not exist");
}

// This test verifies that `carma logs --follow` prints the first attempt's log, moves on to the
// relaunched attempt, and stops once the task is final and its log drained.
TEST(ClientCommandsTest, LogsFollowAcrossAttempts) {
    FakeDaemon daemon;
    int task_reads = 0;
    // The first read of the task finds attempt 1 running; later ones attempt 2 finished.
    daemon.respond([&](const httplib::Request& req, httplib::Response& res) {
        if (req.path == "/v1/tasks/5") {
            const bool second = ++task_reads >= 2;
            answer_json(res, 200,
                        {{"id", 5},
                         {"attempts", second ? 2 : 1},
                         {"state", second ? "succeeded" : "running"}});
            return;
        }
        const bool second = task_reads >= 2;
        const std::string log = req.get_param_value("attempt") == "2" ? "two\n" : "one\n";
        const std::size_t offset = std::stoul("0" + req.get_param_value("offset"));
        res.set_content(log.substr(std::min(offset, log.size())), "text/plain");
        res.set_header("X-Carma-Log-Size", std::to_string(log.size()));
        res.set_header("X-Carma-Task-State", second ? "succeeded" : "running");
    });
    const std::string out =
        run_command(cli::add_logs_command, {"logs", "5", "-f", "--socket", daemon.socket()});
    EXPECT_EQ(out, "one\ntwo\n");
    EXPECT_THAT(daemon.targets(),
                ::testing::Contains("GET /v1/tasks/5/logs?attempt=2&stream=stdout"));
}

// This test verifies plain `carma logs --stderr --attempt N`.
TEST(ClientCommandsTest, LogsOnce) {
    FakeDaemon daemon;
    daemon.respond([](const httplib::Request&, httplib::Response& res) {
        res.set_content("Traceback\nCUDA out of memory\n", "text/plain");
    });
    EXPECT_EQ(run_command(cli::add_logs_command,
                          {"logs", "5", "--stderr", "--attempt", "1", "--socket", daemon.socket()}),
              "Traceback\nCUDA out of memory\n");
    EXPECT_THAT(daemon.targets(), ElementsAre("GET /v1/tasks/5/logs?attempt=1&stream=stderr"));
}

// This test verifies the GPU table: health, memory used of total, the window risk statistics,
// the verdict, the warm-up lock and the tasks; and below it, per GPU, where each metric comes
// from and the risk rule in force. Output that is not a terminal gets the verdict's reason whole
// (it used to be cut at 48 characters even in a pipe), with or without --wide.
TEST(ClientCommandsTest, Gpus) {
    FakeDaemon daemon;
    const json gpus = json::parse(R"json({"backend": "emulated", "gpus": [
        {"index": 0, "uuid": "GPU-0", "name": "A100-SXM4-40GB", "total_mib": 40960,
         "free_mib": 27724, "available_mib": 27212, "util": 0.97, "smact": 0.9, "smocc": 0.5,
         "drama": 0.3, "power_w": 250, "energy_j": 1000,
         "sources": {"smact": "dcgm", "smocc": "dcgm", "drama": "dcgm", "util": "dcgm",
                     "power": "dcgm", "memory": "dcgm", "energy": "dcgm"},
         "health": {"state": "ok", "reason": ""},
         "window": {"samples": 30, "smact": {"mean": 0.9, "risk": 0.91},
                    "smocc": {"risk": 0.52}, "drama": {"risk": 0.3}},
         "risk": {"high": true,
                  "reason": "SMACT 0.91 >= 0.80 and SMOCC 0.52 >= 0.45 over 30 samples",
                  "rule": "paper",
                  "rule_text": "paper: SMACT >= 0.80 and (SMOCC >= 0.45 or DRAMA >= 0.40)"},
         "locked": true, "tasks": [12, 14]},
        {"index": 1, "name": "A100-SXM4-40GB", "total_mib": 40960, "free_mib": 40960,
         "health": {"state": "unhealthy", "reason": "nvmlDeviceGetMemoryInfo: GPU is lost"},
         "risk": {"high": false}, "locked": false, "tasks": []}]})json");
    daemon.respond(
        [&](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, gpus); });
    const std::string out =
        run_command(cli::add_gpus_command, {"gpus", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("backend: emulated\n"));
    EXPECT_THAT(out, ::testing::ContainsRegex(
                         "0 +A100-SXM4-40GB +ok +13,236 MiB/40,960 MiB +27,212 MiB +0.97 +30 "
                         "+0.91 +0.52 +0.30 +warm-up +12,14 +high: SMACT 0.91 >= 0.80 and SMOCC "
                         "0.52 >= 0.45 over 30 samples\n"));
    EXPECT_THAT(run_command(cli::add_gpus_command, {"gpus", "--wide", "--socket", daemon.socket()}),
                HasSubstr("SMOCC 0.52 >= 0.45 over 30 samples\n"));
    EXPECT_THAT(out, ::testing::ContainsRegex("1 +A100-SXM4-40GB +unhealthy +0 MiB/40,960 MiB +- "
                                              "+- +- +- +- +- +- +- +ok"));
    EXPECT_THAT(out, HasSubstr("GPU 0: SMACT dcgm, SMOCC dcgm, DRAMA dcgm, util dcgm, power dcgm, "
                               "memory dcgm\n  risk rule: paper: SMACT >= 0.80 and (SMOCC >= "
                               "0.45 or DRAMA >= 0.40)\n"));
    EXPECT_THAT(out, HasSubstr("  unhealthy: nvmlDeviceGetMemoryInfo: GPU is lost\n"));
    EXPECT_EQ(json::parse(run_command(cli::add_gpus_command,
                                      {"gpus", "--json", "--socket", daemon.socket()})),
              gpus);
}

// This test verifies `carma share`: the header says whether fair share orders the queue, the
// half-life, how far ahead the factor counts running tasks, the weights and the limits; a row
// per user with shares, charged usage, both normalised, the charge now, the factor, GPUs and
// tasks running and tasks waiting, and with preemption on its budget and each user's stops;
// --json is the answer.
TEST(ClientCommandsTest, ShareShowsEveryUsersStanding) {
    FakeDaemon daemon;
    const json share = json::parse(R"({"fair_share": true, "half_life_s": 604800,
        "horizon_s": 3600,
        "weights": {"fair_share": 10000, "age": 1000},
        "limits": {"max_gpus_per_user": 4, "max_running_per_user": 0},
        "preemption": {"enabled": true, "max_stops_per_user": 4, "stops_window_s": 3600},
        "users": [
          {"user": "alice", "shares": 2, "shares_norm": 0.667, "usage_gpu_hours": 12.5,
           "usage_norm": 0.9, "charge_now": 2.4, "factor": 0.392, "gpus_running": 3, "tasks_running": 3,
           "tasks_waiting": 197, "preemption_stops": 0},
          {"user": "bob", "shares": 1, "shares_norm": 0.333, "usage_gpu_hours": 1.25,
           "usage_norm": 0.1, "charge_now": 0.35, "factor": 0.812, "gpus_running": 1, "tasks_running": 1,
           "tasks_waiting": 2, "preemption_stops": 3}]})");
    daemon.respond(
        [&](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, share); });
    const std::string out =
        run_command(cli::add_share_command, {"share", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("fair share: on; usage half-life 7d00h"));
    EXPECT_THAT(out, HasSubstr("the factor counts running tasks' charge 1h00m ahead"));
    EXPECT_THAT(out, HasSubstr("10000 x factor + 1000 x [waited max_wait] - nice"));
    EXPECT_THAT(out, HasSubstr("limits: max_gpus_per_user 4, max_running_per_user none"));
    EXPECT_THAT(out, HasSubstr("preemption: on; at most 4 stops for one user's waiting tasks per "
                               "1h00m"));
    EXPECT_THAT(out, ::testing::ContainsRegex("USER +SHARES +NORM_SHARES +USAGE_GPU_H +NORM_USAGE "
                                              "+CHARGE_NOW +FACTOR +GPUS +RUNNING +WAITING +STOPS"));
    EXPECT_THAT(out, ::testing::ContainsRegex(
                         "alice +2.00 +0.667 +12.500 +0.900 +2.40 +0.392 +3 +3 +197 +0"));
    EXPECT_THAT(out,
                ::testing::ContainsRegex("bob +1.00 +0.333 +1.250 +0.100 +0.35 +0.812 +1 +1 +2 +3"));
    EXPECT_EQ(daemon.targets().back(), "GET /v1/share");
    EXPECT_EQ(json::parse(run_command(cli::add_share_command,
                                      {"share", "--json", "--socket", daemon.socket()})),
              share);
}

// This test verifies that a dry run prints one line per trace entry and contacts no daemon.
TEST(ClientCommandsTest, ReplayDryRun) {
    const std::string out =
        run_command(cli::add_replay_command, {"replay", "t1", "--dry-run", "--time-scale", "10",
                                              "--socket", "/tmp/carma-no-such-dir/x.sock"});
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 60);
    EXPECT_THAT(out, HasSubstr("[      0.0s] would submit Xception: 1 GPU, 5,918 MiB: "));
    EXPECT_THAT(out, HasSubstr("[     18.1s] would submit resnet18_cifar100_50e_3"));  // 181 s / 10
    EXPECT_THAT(out, HasSubstr("carma-fakejob --profile Xception\n"));
}

// This test verifies that replay submits each entry as a fake job with the profile's GPUs and
// memory, gives unknown tasks their trace row's duration and memory, and with --wait sums up.
TEST(ClientCommandsTest, ReplaySubmitsAndWaits) {
    FakeDaemon daemon;
    const fs::path dir = make_temp_dir();
    std::ofstream(dir / "carma-fakejob") << "#!/bin/sh\n";
    std::ofstream(dir / "trace.csv") << "submit_offset_s,task_name,gpus,standalone_minutes,"
                                        "memory_gb,class\n"
                                        "0,resnet3,,,,\n"
                                        "0.5,mystery,2,10,12.5,heavy\n";
    ::setenv("CARMA_FAKEJOB", (dir / "carma-fakejob").c_str(), 1);
    std::mutex m;
    std::vector<json> tasks;
    // Listed as finished a minute and two minutes after the first submission, at once: the
    // finish lines must say when they finished, not when replay saw it.
    double submitted_at = 0;
    daemon.respond([&](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard lock(m);
        if (req.method == "POST") {
            if (tasks.empty()) {
                submitted_at = now_seconds();
            }
            json t = json::parse(req.body);
            t["id"] = static_cast<int>(tasks.size()) + 1;
            t["state"] = "succeeded";
            t["attempts"] = 2;
            t["submitted_at"] = submitted_at;
            t["finished_at"] = submitted_at + 60.0 * static_cast<double>(tasks.size() + 1);
            t["attempt_list"] = {{{"number", 1}, {"outcome", "out-of-memory"}},
                                 {{"number", 2}, {"outcome", "succeeded"}}};
            tasks.push_back(t);
            answer_json(res, 201, t);
        } else if (req.path == "/v1/status") {
            answer_json(res, 200, {{"time_scale", 1000}});
        } else if (req.path == "/healthz") {
            res.set_content("ok\n", "text/plain");  // else replay waits a minute for the daemon
        } else if (req.path == "/v1/tasks") {
            answer_json(res, 200, {{"tasks", tasks}});
        } else {
            answer_json(res, 200, tasks.at(std::stoul(req.path.substr(10)) - 1));
        }
    });
    const std::string out = run_command(
        cli::add_replay_command,
        {"replay", (dir / "trace.csv").string(), "--wait", "--socket", daemon.socket()});
    ::unsetenv("CARMA_FAKEJOB");
    const std::string fakejob = (dir / "carma-fakejob").string();
    ASSERT_EQ(tasks.size(), 2u);
    EXPECT_EQ(tasks[0]["command"], json({fakejob, "--profile", "resnet3"}));
    EXPECT_EQ(tasks[0]["workload"], "resnet3");
    EXPECT_EQ(tasks[0]["gpus"], 1);
    EXPECT_EQ(tasks[0]["memory"]["declared_mib"], 13236);
    EXPECT_EQ(tasks[0]["memory"]["horus_mib"], 28923);
    EXPECT_EQ(tasks[1]["command"], json({fakejob, "--profile", "mystery", "--duration-s", "600",
                                         "--memory", "12500MiB", "--class", "heavy"}));
    EXPECT_EQ(tasks[1]["gpus"], 2);
    EXPECT_FALSE(tasks[1].contains("workload"));
    EXPECT_THAT(out, HasSubstr("at time scale 1000\n"));  // the daemon's, as none was given
    EXPECT_THAT(out, HasSubstr("submitted task 2 (mystery): 2 GPUs, 12,500 MiB\n"));
    EXPECT_THAT(out, HasSubstr("trace.csv done: 2 tasks: 2 succeeded, 0 failed"));
    EXPECT_THAT(out, HasSubstr("attempts: 4 (2 out of memory)\n"));
    EXPECT_THAT(out, HasSubstr("makespan: 2m00s (first submission to last finish), 1d09h in "
                               "trace time at time scale 1000\n"));  // 120 s x 1000 = 33h20m
    // "[     60.0s] task 1 (resnet3) succeeded after 2 attempt(s)": the stamp is finished_at
    // against the replay's start, which came just before the first submission.
    std::vector<double> stamps;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(" succeeded after 2 attempt(s)") != std::string::npos) {
            stamps.push_back(std::stod(line.substr(1, line.find('s') - 1)));
        }
    }
    ASSERT_EQ(stamps.size(), 2u) << out;
    EXPECT_GE(stamps[0], 60.0);
    EXPECT_LT(stamps[0], 70.0);
    EXPECT_GE(stamps[1], 120.0);
    EXPECT_LT(stamps[1], 130.0);
    fs::remove_all(dir);
}



// This test verifies that `carma show` prints what the daemon learned of the task and why.
TEST(ClientCommandsTest, ShowPrintsKnowledge) {
    FakeDaemon daemon;
    json task = kTask;
    task["learned"] = {{"need_mib", 13236}, {"margin_mib", 1024}, {"lower_bound_mib", 6048},
                       {"runs", 2},         {"duration_s", 600}, {"activity", 0.71},
                       {"basis", "history: 2 run(s), peak 13,236 MiB"}};
    daemon.respond(
        [&](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, task); });
    const std::string out =
        run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("knowledge   need 13,236 MiB + 1,024 MiB margin, at least 6,048 "
                               "MiB; run time 10m00s; activity 0.71\n"));
    EXPECT_THAT(out, HasSubstr("basis       history: 2 run(s), peak 13,236 MiB\n"));
    task["learned"] = {{"need_mib", nullptr}, {"margin_mib", 0}, {"lower_bound_mib", 0},
                       {"runs", 0}, {"duration_s", nullptr}, {"activity", 0.6},
                       {"basis", "memory unknown"}};
    const std::string unknown =
        run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()});
    EXPECT_THAT(unknown, HasSubstr("knowledge   need unknown; activity 0.60\n"));
}

const json kEstimate = json::parse(R"({
    "user": "alice", "uid": 1001, "command": ["python", "train.py", "--lr", "0.1"], "gpus": 1,
    "fingerprint": "0123456789abcdef",
    "family": {"id": "fedcba9876543210", "program": "python", "script": "train.py"},
    "declared_mib": 12000,
    "estimates": {"horus_mib": 28923, "faketensor_mib": null, "gpumemnet_mib": null},
    "profiled_mib": 13236,
    "history": {"runs": 3, "succeeded": 2, "out_of_memory": 1, "failed": 0,
                "peak_mib": 13236, "min_peak_mib": 13180, "spread_mib": 56,
                "median_run_s": 600, "activity": 0.71, "oom_held_mib": 6048,
                "newest": {"task": 12, "attempt": 1, "outcome": "succeeded",
                           "peak_mib": 13236, "run_s": 600, "activity": 0.7,
                           "ended_at": 1764441600}},
    "family_history": {"runs": 0, "succeeded": 0, "out_of_memory": 0, "failed": 0,
                       "peak_mib": null, "min_peak_mib": null, "spread_mib": null,
                       "median_run_s": null, "activity": null, "oom_held_mib": null,
                       "newest": null},
    "learned": {"need_mib": 13236, "margin_mib": 1024, "lower_bound_mib": 6048, "runs": 2,
                "duration_s": 600, "activity": 0.71,
                "basis": "history: 2 run(s), peak 13,236 MiB, spread 56 MiB + 1,080 MiB margin"}
})");

// This test verifies that `carma estimate -- CMD` sends the command like a submission to
// POST /v1/estimate and prints every source, the need CARMA would plan with and why; --json
// passes the answer through.
TEST(ClientCommandsTest, EstimateTableAndJson) {
    FakeDaemon daemon;
    FakePath path;  // `python` is the fake one: estimate resolves it as submit does
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 200, kEstimate); });
    const std::string out =
        run_command(cli::add_estimate_command, {"estimate", "--socket", daemon.socket(), "-g", "1",
                                                "--", "python", "train.py", "--lr", "0.1"});
    ASSERT_EQ(daemon.targets().size(), 1u);
    EXPECT_EQ(daemon.targets()[0], "POST /v1/estimate");
    const json body = json::parse(daemon.seen()[0].body);
    EXPECT_EQ(body["command"], json({path.python(), "train.py", "--lr", "0.1"}));
    EXPECT_EQ(body["gpus"], 1);
    EXPECT_EQ(body["workdir"], fs::current_path().string());
    EXPECT_THAT(out, HasSubstr("estimate for alice: python train.py --lr 0.1 (1 GPU)\n"));
    EXPECT_THAT(out, HasSubstr("family fedcba9876543210 (python train.py)\n"));
    EXPECT_THAT(out, HasSubstr("SOURCE      MEMORY/GPU  DETAIL\n"));
    EXPECT_THAT(out, HasSubstr("history     13,236 MiB  3 run(s): 2 succeeded, 1 out of memory "
                               "(held 6,048 MiB); spread 56 MiB; median run 10m00s; activity "
                               "0.71; newest task 12 attempt 1 succeeded\n"));
    EXPECT_THAT(out, HasSubstr("family      -           no run of other commands of python "
                               "train.py\n"));
    EXPECT_THAT(out, HasSubstr("declared    12,000 MiB\n"));
    EXPECT_THAT(out, HasSubstr("horus       28,923 MiB\n"));
    EXPECT_THAT(out, HasSubstr("profiled    13,236 MiB  the oracle's value: shown, never used\n"));
    EXPECT_THAT(out, HasSubstr("CARMA plans 13,236 MiB + 1,024 MiB margin\n"));
    EXPECT_THAT(out, HasSubstr("lower bound 6,048 MiB (held when it ran out of memory)\n"));
    EXPECT_THAT(out, HasSubstr("run time    10m00s\n"));
    EXPECT_THAT(out, HasSubstr("activity    0.71\n"));
    EXPECT_THAT(out, HasSubstr("why         history: 2 run(s), peak 13,236 MiB"));
    const std::string js = run_command(
        cli::add_estimate_command, {"estimate", "--json", "--socket", daemon.socket(), "python"});
    EXPECT_EQ(json::parse(js), kEstimate);
    EXPECT_THAT(command_error(cli::add_estimate_command, {"estimate", "--socket", "/nope"}),
                HasSubstr("nothing to estimate"));
}

}  // namespace
}  // namespace carma

namespace carma {
namespace {

// This test verifies that each of the CARMA authors' 52 .rad files (rebuilt line by line from
// data/rad_files.csv) is accepted by `carma submit` when its conda environment exists (a fake
// conda install: <root>/envs/tf/bin/python), running under that environment's python, and fails
// at submit with a clear message when it does not.
TEST(ClientCommandsTest, TheAuthorsRadFilesRunInTheirCondaEnvironment) {
    std::ifstream in(std::string(CARMA_SOURCE_DIR) + "/data/rad_files.csv");
    ASSERT_TRUE(in) << "data/rad_files.csv is missing";
    std::string text, line;
    while (std::getline(in, line)) {
        if (!line.starts_with("#")) {
            text += line + "\n";
        }
    }
    auto table = parse_csv(text, "data/rad_files.csv");
    ASSERT_TRUE(table) << table.error().message;
    ASSERT_EQ(table->rows.size(), 52u);
    const fs::path dir = make_temp_dir();
    const fs::path root = dir / "miniconda3";
    fs::create_directories(root / "bin");
    fs::create_directories(root / "envs" / "tf" / "bin");
    std::ofstream(root / "bin" / "conda") << "#!/bin/sh\n";
    std::ofstream(root / "envs" / "tf" / "bin" / "python") << "#!/bin/sh\n";
    fs::permissions(root / "envs" / "tf" / "bin" / "python", fs::perms::owner_all);
    FakeDaemon daemon;
    daemon.respond(
        [](const httplib::Request&, httplib::Response& res) { answer_json(res, 201, kTask); });
    auto col = [&](std::size_t row, const char* name) {
        return table->rows[row][static_cast<std::size_t>(table->column(name))];
    };
    for (std::size_t i = 0; i < table->rows.size(); ++i) {
        const std::string name = col(i, "name");
        // The authors' layout: comment, conda line, command, model file, dataset, batch size,
        // placeholder, GPUs, then oracle and the three estimates (gpt2_xl stops after the GPUs).
        std::string rad = "# assumption is that model.txt file is in this directory\n"
                          "conda activate tf\n"
                          "python /home/user/workloads/" + col(i, "script_args") + "\n" +
                          col(i, "model_file") + "\n" + col(i, "dataset") + "\n" +
                          col(i, "batch_size") + "\nexclusive\n" + col(i, "gpus") + "\n";
        for (const char* c : {"oracle_mib", "horus_mib", "faketensor_mib", "gpumemnet_mib"}) {
            if (!col(i, c).empty()) {
                rad += col(i, c) + "\n";
            }
        }
        const fs::path file = dir / (name + ".rad");
        std::ofstream(file) << rad;
        ::setenv("CONDA_EXE", (root / "bin" / "conda").c_str(), 1);
        (void)run_command(cli::add_submit_command,
                          {"submit", "--socket", daemon.socket(), file.string()});
        const json body = json::parse(daemon.seen().back().body);
        EXPECT_EQ(body["conda"], (root / "envs" / "tf").string()) << name;
        EXPECT_EQ(body["command"][0], (root / "envs" / "tf" / "bin" / "python").string()) << name;
        EXPECT_EQ(body["command"][1], "/home/user/workloads/" + col(i, "script_args").substr(
                                          0, col(i, "script_args").find(' ')))
            << name;
        EXPECT_EQ(body["gpus"], std::stoi(col(i, "gpus"))) << name;
        // A file without memory figures (gpt2_xl) says so, at submit and in the task's events.
        bool figures = false;
        for (const char* c : {"oracle_mib", "horus_mib", "faketensor_mib", "gpumemnet_mib"}) {
            figures = figures || !col(i, c).empty();
        }
        if (figures) {
            EXPECT_FALSE(body.contains("warnings")) << name << ": " << body.dump();
        } else {
            EXPECT_THAT(body["warnings"][0].get<std::string>(),
                        HasSubstr(name + ".rad: no memory figures"))
                << name;
        }
        ::setenv("CONDA_EXE", "/nonexistent/bin/conda", 1);
        EXPECT_THAT(command_error(cli::add_submit_command,
                                  {"submit", "--socket", daemon.socket(), file.string()}),
                    HasSubstr("conda environment 'tf' not found (looked in"))
            << name;
    }
    ::unsetenv("CONDA_EXE");
    EXPECT_EQ(daemon.seen().size(), 52u);
    fs::remove_all(dir);
}

}  // namespace
}  // namespace carma
