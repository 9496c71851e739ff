// End-to-end tests of `carma serve`: a real daemon process on emulated GPUs in a temporary
// directory, real supervisors and real (fake) training jobs, driven through the API client.

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/client.h"

#ifndef CARMA_BIN
#error "CARMA_BIN must name the carma executable"
#endif
#ifndef CARMA_FAKE_MPS_CONTROL
#error "CARMA_FAKE_MPS_CONTROL must name the fake nvidia-cuda-mps-control"
#endif
#ifndef CARMA_FAKEJOB_PATH
#error "CARMA_FAKEJOB_PATH must name the carma-fakejob executable"
#endif

extern char** environ;

namespace carma {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

struct RawReply {
    int status = 0;
    std::string body;
};

// A request with the status kept, whatever it is (the API client turns errors into messages).
RawReply raw_request(const std::string& socket, const std::string& method,
                     const std::string& target, const std::string& body = "") {
    httplib::Client cli(socket, 80);
    cli.set_address_family(AF_UNIX);
    cli.set_read_timeout(60);
    httplib::Result r = method == "POST"     ? cli.Post(target, body, "application/json")
                        : method == "DELETE" ? cli.Delete(target)
                                             : cli.Get(target);
    if (!r) {
        return {-1, httplib::to_string(r.error())};
    }
    return {r->status, r->body};
}

// Polls `done` until it holds or `limit` passes; deadlines are generous because CI machines are
// slow and shared. No test asserts on how long anything took.
bool eventually(const std::function<bool()>& done, std::chrono::seconds limit = 60s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (done()) {
            return true;
        }
        std::this_thread::sleep_for(50ms);
    }
    return done();
}

bool is_final(const std::string& state) {
    return state == "succeeded" || state == "failed" || state == "cancelled" || state == "lost" ||
           state == "rejected";
}

class DaemonTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-daemon-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        // Other users (the two-user test) must reach the socket inside.
        ::chmod(dir_.c_str(), 0755);
        socket_ = dir_ + "/carma.sock";
    }

    void TearDown() override {
        stop(SIGTERM);
        // Jobs left behind by a failed test must not outlive it.
        for (pid_t pgid : task_groups()) {
            ::kill(-pgid, SIGKILL);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    void start(const std::string& policy, std::vector<std::string> extra = {}) {
        std::vector<std::string> args = {CARMA_BIN,     "serve",        "--gpus",
                                         "emulated:4xA100-40GB",        "--state-dir",
                                         dir_ + "/state", "--socket",    socket_,
                                         "--time-scale", "60",           "--policy",
                                         policy,         "--kill-grace", "2"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char*> argv;
        for (std::string& a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        const std::string log = dir_ + "/daemon.log";
        posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        // A variable of the daemon's own environment, which no task may see.
        std::vector<std::string> env_strings;
        std::vector<char*> envp;
        for (char** e = environ; *e != nullptr; ++e) {
            env_strings.emplace_back(*e);
        }
        env_strings.emplace_back("CARMA_DAEMON_ONLY_SECRET=hush");
        for (std::string& e : env_strings) {
            envp.push_back(e.data());
        }
        envp.push_back(nullptr);
        ASSERT_EQ(posix_spawn(&daemon_, argv[0], &fa, nullptr, argv.data(), envp.data()), 0);
        posix_spawn_file_actions_destroy(&fa);
        api::ApiClient c(socket_);
        ASSERT_TRUE(eventually([&] { return c.healthz().has_value(); }, 30s)) << daemon_log();
        // Decisions wait until every GPU's monitor window has filled once.
        ASSERT_TRUE(eventually([&] {
            auto g = c.gpus();
            return g && (*g)["gpus"][0]["window"]["samples"] == 30;
        }));
    }

    void stop(int sig) {
        if (daemon_ > 0) {
            ::kill(daemon_, sig);
            int status = 0;
            waitpid(daemon_, &status, 0);
            daemon_ = 0;
        }
    }

    std::string daemon_log() const {
        std::ifstream in(dir_ + "/daemon.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    std::set<pid_t> task_groups() const {
        std::set<pid_t> out;
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(dir_ + "/state/attempts", ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            if (it->path().filename() == "task.pid") {
                std::ifstream in(it->path());
                pid_t p = 0;
                if (in >> p && p > 1) {
                    out.insert(p);
                }
            }
        }
        return out;
    }

    api::ApiClient client() const { return api::ApiClient(socket_); }

    static json fake_job(const std::string& profile, double duration_s,
                         std::optional<MiB> declared = std::nullopt) {
        json body = {{"name", profile},
                     {"command",
                      {CARMA_FAKEJOB_PATH, "--profile", profile, "--duration-s",
                       std::to_string(duration_s)}},
                     {"workdir", "/tmp"}};
        if (declared) {
            body["memory_mib"] = *declared;
        }
        return body;
    }

    TaskId submit(const json& body) {
        auto r = client().submit(body);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? (*r)["id"].get<TaskId>() : 0;
    }

    json task(TaskId id) {
        auto r = client().task(id);
        return r ? *r : json::object();
    }

    std::string state(TaskId id) { return task(id).value("state", ""); }

    json wait_final(TaskId id, std::chrono::seconds limit = 120s) {
        EXPECT_TRUE(eventually([&] { return is_final(state(id)); }, limit))
            << "task " << id << " is still " << state(id) << "\n" << daemon_log();
        return task(id);
    }

    json events() {
        auto e = client().events(api::EventQuery{std::nullopt, std::nullopt, 10000});
        return e ? (*e)["events"] : json::array();
    }

    std::string dir_;
    std::string socket_;
    pid_t daemon_ = 0;
};

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
    std::vector<TaskId> sleepers;
    for (int i = 0; i < 4; ++i) {
        sleepers.push_back(submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}}));
    }
    ASSERT_TRUE(eventually([&] {
        for (TaskId id : sleepers) {
            if (state(id) != "running") {
                return false;
            }
        }
        return true;
    }));
    const TaskId waiting = submit({{"command", {"/bin/sleep", "1"}}, {"workdir", "/tmp"}});
    std::this_thread::sleep_for(300ms);  // several scheduler rounds (time scale 60)
    EXPECT_EQ(state(waiting), "queued");
    auto listed = client().list_tasks(false);
    ASSERT_TRUE(listed);
    EXPECT_EQ((*listed)["tasks"].size(), 5u);  // 4 running + 1 queued; the finished echo is hidden
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

// This test verifies the optional loopback TCP listener: requests need the bearer token.
TEST_F(DaemonTest, TcpNeedsBearerToken) {
    const std::string token_file = dir_ + "/token";
    std::ofstream(token_file) << "0123456789abcdef0123456789abcdef\n";
    const int port = 20000 + static_cast<int>(::getpid() % 20000);
    start("exclusive", {"--tcp", "127.0.0.1:" + std::to_string(port), "--token-file", token_file});
    httplib::Client tcp("127.0.0.1", port);
    auto anonymous = tcp.Get("/v1/tasks");
    ASSERT_TRUE(anonymous);
    EXPECT_EQ(anonymous->status, 401);
    EXPECT_NE(anonymous->body.find("bearer token"), std::string::npos);
    httplib::Headers auth = {{"Authorization", "Bearer 0123456789abcdef0123456789abcdef"}};
    auto listed = tcp.Get("/v1/tasks", auth);
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->status, 200);
    EXPECT_TRUE(json::parse(listed->body).contains("tasks"));
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
    EXPECT_NE(text.str().find(dir_ + "/state/mps/pipe"), std::string::npos) << text.str();
}

// This test verifies out-of-memory recovery: with no memory information (OR-MAGM) a big task
// lands beside a co-runner, crashes with PyTorch's out-of-memory error, goes to the recovery
// queue and succeeds when relaunched alone.
TEST_F(DaemonTest, OutOfMemoryIsRecovered) {
    start("OR-MAGM");
    std::vector<TaskId> fillers;
    for (int i = 0; i < 4; ++i) {
        fillers.push_back(submit(fake_job("resnet3", 600)));  // 13,236 MiB each, 10 s wall
    }
    ASSERT_TRUE(eventually([&] {
        for (TaskId id : fillers) {
            if (state(id) != "running") {
                return false;
            }
        }
        return true;
    }));
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
        // Every task ran in its own attempt directory exactly once.
        EXPECT_EQ(task_groups().size(), ids.size());
    }
};

// This test verifies restart safety after SIGTERM: nothing lost, nothing run twice.
TEST_F(RestartTest, AfterSigterm) { run(SIGTERM); }

// This test verifies restart safety after SIGKILL of the daemon.
TEST_F(RestartTest, AfterSigkill) { run(SIGKILL); }

// Runs `body` in a child process as `user`; returns the child's exit code.
int as_user(const passwd& pw, const std::function<int()>& body) {
    pid_t pid = fork();
    if (pid == 0) {
        if (initgroups(pw.pw_name, pw.pw_gid) != 0 || setgid(pw.pw_gid) != 0 ||
            setuid(pw.pw_uid) != 0) {
            _exit(90);
        }
        _exit(body());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

std::optional<passwd> ensure_user(const std::string& name) {
    if (getpwnam(name.c_str()) == nullptr) {
        const std::string cmd = "useradd --no-create-home --shell /bin/sh " + name + " 2>/dev/null";
        if (std::system(cmd.c_str()) != 0) {
            return std::nullopt;
        }
    }
    passwd* pw = getpwnam(name.c_str());
    if (!pw) {
        return std::nullopt;
    }
    return *pw;
}

// This test verifies multi-user rules: tasks run as their submitter; another user may list but
// not cancel or read them; root may.
TEST_F(DaemonTest, TwoUsers) {
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root to create users and run tasks as them";
    }
    auto alice = ensure_user("carma-test-alice");
    auto bob = ensure_user("carma-test-bob");
    if (!alice || !bob) {
        GTEST_SKIP() << "useradd is not available";
    }
    start("exclusive");
    const std::string ids_file = dir_ + "/alice-ids";
    ::chmod(dir_.c_str(), 0777);
    const int rc = as_user(*alice, [&] {
        api::ApiClient c(socket_);
        auto whoami = c.submit({{"command", {"/bin/sh", "-c", "id -u; id -G"}}, {"workdir", "/tmp"}});
        auto sleeper = c.submit({{"command", {"/bin/sleep", "600"}}, {"workdir", "/tmp"}});
        if (!whoami || !sleeper) {
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
        const bool ok = list && (*list)["tasks"].size() == 2 && !cancel &&
                        cancel.error().message.find("only its owner or root") != std::string::npos &&
                        !logs;
        return ok ? 0 : 1;
    });
    EXPECT_EQ(bob_rc, 0);
    EXPECT_EQ(state(sleeper), "running");
    ASSERT_TRUE(client().cancel(sleeper));  // root may
    EXPECT_EQ(wait_final(sleeper)["state"], "cancelled");
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
        {with("gpus", 0), 400, "at least 1 GPU"},
        {with("gpus", -1), 400, "at least 1 GPU"},
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
        RawReply r = raw_request(socket_, "POST", "/v1/tasks", k.body);
        EXPECT_EQ(r.status, k.status) << k.body.substr(0, 80) << " -> " << r.body;
        EXPECT_NE(r.body.find(k.says), std::string::npos) << r.body;
        EXPECT_TRUE(json::accept(r.body)) << "errors are JSON: " << r.body;
    }
    for (const char* target : {"/v1/tasks/999999", "/v1/tasks/999999/logs"}) {
        RawReply r = raw_request(socket_, "GET", target);
        EXPECT_EQ(r.status, 404) << target;
        EXPECT_NE(r.body.find("no task with id 999999"), std::string::npos);
    }
    EXPECT_EQ(raw_request(socket_, "DELETE", "/v1/tasks/999999").status, 404);
    EXPECT_EQ(raw_request(socket_, "GET", "/v1/nothing-here").status, 404);

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

}  // namespace
}  // namespace carma
