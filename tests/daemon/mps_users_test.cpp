// MPS as NVIDIA documents it, end to end: a real daemon (`carma serve --mps`) on emulated GPUs
// with the fake control program (tests/fake_mps/nvidia-cuda-mps-control) and tasks that start as
// MPS clients (tests/fake_mps/mps-client). The fake reproduces the per-user server rule of
// nvidia-cuda-mps-control(1): a control daemon serves one user at a time, and a client of another
// user waits in CUDA initialisation until every client of the current server has exited.
//
// MpsUsersTest needs root (users are created with useradd and tasks run as them);
// `ctest -R MpsUsers` selects it. MpsDaemonTest: the control daemons across a stop and a restart,
// and the memory limit a task gets.

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support.h"
#include "users.h"
#include "api/client.h"

#ifndef CARMA_FAKE_MPS_DIR
#error "CARMA_FAKE_MPS_DIR must name tests/fake_mps"
#endif

namespace carma {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test_support::eventually;
using test_support::read_text;
using test_support::ensure_user;

// A copy of a fake MPS program in `dir` that any user can run: the source tree may sit in a
// directory only root can enter (a clone under /root, a 0700 temp dir), and the control daemon
// and the clients run as the tasks' users.
std::string reachable_copy(const std::string& dir, const std::string& name) {
    const fs::perms rx = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec;
    fs::create_directories(dir);
    fs::permissions(dir, rx);
    const std::string copy = dir + "/" + name;
    fs::copy_file(std::string(CARMA_FAKE_MPS_DIR) + "/" + name, copy,
                  fs::copy_options::overwrite_existing);
    fs::permissions(copy, rx);
    return copy;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1)) {
        ++n;
    }
    return n;
}

using test_support::as_user;

class MpsDaemonTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-mps-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        // Tasks of other users write their marks here, and reach the socket.
        ::chmod(dir_.c_str(), 0777);
        socket_ = dir_ + "/carma.sock";
        record_ = dir_ + "/mps-record";
        control_ = reachable_copy(dir_ + "/bin", "nvidia-cuda-mps-control");
        client_ = reachable_copy(dir_ + "/bin", "mps-client");
    }

    void TearDown() override {
        stop(SIGTERM);
        // Clients left behind by a failed test must not outlive it (each wrote its pid, which
        // its exec keeps, into its mark).
        for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
            if (!e.is_regular_file() || !e.path().filename().string().starts_with("mark.")) {
                continue;
            }
            const std::string text = read_text(e.path().string());
            const std::size_t at = text.find("pid=");
            const pid_t pid = at == std::string::npos ? 0 : std::atoi(text.c_str() + at + 4);
            if (pid > 1) {
                ::kill(pid, SIGKILL);
            }
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    void start(const std::string& policy, const std::string& gpus = "emulated:4xA100-40GB") {
        const std::vector<std::string> args = {
            CARMA_BIN,     "serve",      "--gpus",       gpus,          "--state-dir",
            dir_ + "/state", "--socket", socket_,        "--time-scale", "60",
            "--policy",    policy,       "--kill-grace", "2",            "--mps",
            "--mps-control", control_};
        daemon_ = test_support::spawn_logged(args, dir_ + "/daemon.log",
                                             {"FAKE_MPS_RECORD=" + record_});
        ASSERT_GT(daemon_, 0) << "cannot start " << CARMA_BIN;
        api::ApiClient c(socket_);
        ASSERT_TRUE(eventually([&] { return c.healthz().has_value(); }, 30s)) << log();
        ASSERT_TRUE(eventually([&] {
            auto g = c.gpus();
            return g && (*g)["gpus"][0]["window"]["samples"] == 30;
        })) << log();
    }

    void stop(int sig) {
        if (daemon_ > 0) {
            ::kill(daemon_, sig);
            int status = 0;
            ::waitpid(daemon_, &status, 0);
            daemon_ = 0;
        }
    }

    std::string log() const { return read_text(dir_ + "/daemon.log"); }

    api::ApiClient client() const { return api::ApiClient(socket_); }

    // A task that starts as an MPS client, then writes its GPUs and MPS environment to `mark`
    // and sleeps: the mark appears once its CUDA initialisation got through.
    json client_task(const std::string& mark, MiB declared = 1000) const {
        const std::string path = dir_ + "/mark." + mark;
        const std::string script =
            "{ echo \"cvd=$CUDA_VISIBLE_DEVICES\"; echo \"pipe=$CUDA_MPS_PIPE_DIRECTORY\"; "
            "echo \"limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT\"; "
            "echo \"threads=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\"; echo \"pid=$$\"; } > " +
            path + ".tmp && mv " + path + ".tmp " + path + " && exec sleep 600";
        return json{{"name", mark},
                    {"command", {client_, "/bin/sh", "-c", script}},
                    {"workdir", "/tmp"},
                    {"memory_mib", declared}};
    }

    bool started(const std::string& mark) const { return fs::exists(dir_ + "/mark." + mark); }
    std::string mark(const std::string& mark) const { return read_text(dir_ + "/mark." + mark); }

    // Submits as `pw` (root when null); the task's id, 0 when refused.
    TaskId submit_as(const passwd* pw, const json& body) const {
        if (pw == nullptr) {
            auto r = client().submit(body);
            EXPECT_TRUE(r) << (r ? "" : r.error().message);
            return r ? (*r)["id"].get<TaskId>() : 0;
        }
        const std::string out = dir_ + "/submitted." + body["name"].get<std::string>();
        const int rc = as_user(*pw, [&] {
            auto r = api::ApiClient(socket_).submit(body);
            if (!r) {
                return 1;
            }
            std::ofstream(out) << (*r)["id"].get<TaskId>() << "\n";
            return 0;
        });
        EXPECT_EQ(rc, 0) << "submission as " << pw->pw_name << " failed";
        TaskId id = 0;
        std::ifstream(out) >> id;
        return id;
    }

    json task(TaskId id) const {
        auto r = client().task(id);
        return r ? *r : json::object();
    }
    std::string state(TaskId id) const { return task(id).value("state", ""); }

    void cancel(TaskId id) const { ASSERT_TRUE(client().cancel(id)); }

    std::string dir_;
    std::string socket_;
    std::string record_;
    std::string control_;
    std::string client_;
    pid_t daemon_ = 0;
};

class MpsUsersTest : public MpsDaemonTest {
  protected:
    void SetUp() override {
        MpsDaemonTest::SetUp();
        if (::geteuid() != 0) {
            FAIL() << "needs root to create users and run tasks as them (CI runs as root)";
        }
        auto a = ensure_user("carma-test-alice");
        auto b = ensure_user("carma-test-bob");
        if (!a || !b) {
            FAIL() << "useradd could not create carma-test-alice and carma-test-bob";
        }
        alice_ = *a;
        bob_ = *b;
    }

    passwd alice_{};
    passwd bob_{};
};

// This test verifies that two users' tasks on different idle GPUs do not wait for each other:
// bob's task gets through its CUDA initialisation while alice's still runs (with one control
// daemon for the whole machine it waited for all of alice's tasks to end). Each is a client of
// its own GPU's control daemon, with that GPU's UUID as CUDA_VISIBLE_DEVICES.
TEST_F(MpsUsersTest, TwoUsersOnIdleGpusDoNotWaitForEachOther) {
    start("exclusive");
    const TaskId a = submit_as(&alice_, client_task("alice"));
    ASSERT_TRUE(eventually([&] { return started("alice"); })) << task(a).dump(2) << log();
    const TaskId b = submit_as(&bob_, client_task("bob"));
    ASSERT_TRUE(eventually([&] { return state(b) == "running"; })) << task(b).dump(2);
    EXPECT_TRUE(eventually([&] { return started("bob"); }, 30s))
        << "bob's task waits behind alice's MPS server\n"
        << task(b).dump(2) << "\n"
        << read_text(record_);
    EXPECT_EQ(state(a), "running");
    const std::string am = mark("alice");
    const std::string bm = mark("bob");
    EXPECT_NE(am.substr(0, am.find('\n')), bm.substr(0, bm.find('\n'))) << am << bm;
    EXPECT_NE(am.find("pipe=" + dir_ + "/state/mps/"), std::string::npos) << am;
    cancel(a);
    cancel(b);
}

// This test verifies the same-owner rule on one GPU: with alice's tasks on all four GPUs, her
// fifth is placed beside one of hers and starts, while bob's waits in the queue (on any of them
// it would wait in CUDA initialisation) with a reason that names MPS and alice; once one GPU has
// no client of alice left, bob's task runs there and starts.
TEST_F(MpsUsersTest, AnMpsGpuIsSharedOnlyAmongOneOwnersTasks) {
    start("oracle-MAGM");
    std::vector<TaskId> alice;
    for (int i = 0; i < 4; ++i) {
        alice.push_back(submit_as(&alice_, client_task("alice" + std::to_string(i))));
    }
    for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(eventually([&] { return started("alice" + std::to_string(i)); }))
            << task(alice[static_cast<std::size_t>(i)]).dump(2) << log();
    }
    // Alice's fifth joins one of hers (once its GPU's warm-up lock has run out).
    const TaskId a5 = submit_as(&alice_, client_task("alice4"));
    ASSERT_TRUE(eventually([&] { return started("alice4"); }, 90s)) << task(a5).dump(2) << log();
    const TaskId b = submit_as(&bob_, client_task("bob"));
    EXPECT_TRUE(eventually([&] {
        return task(b).value("message", "").find("MPS") != std::string::npos;
    }, 90s)) << task(b).dump(2);
    EXPECT_EQ(state(b), "queued") << task(b).dump(2);
    const std::string why = task(b).value("message", "");
    EXPECT_NE(why.find("MPS clients of carma-test-alice run there"), std::string::npos) << why;
    EXPECT_FALSE(started("bob"));

    // Alice's only task on one GPU ends: that GPU takes bob's.
    const std::string gpu_of_a5 = mark("alice4").substr(0, mark("alice4").find('\n'));
    TaskId alone = 0;
    for (int i = 0; i < 4 && alone == 0; ++i) {
        const std::string m = mark("alice" + std::to_string(i));
        if (m.substr(0, m.find('\n')) != gpu_of_a5) {
            alone = alice[static_cast<std::size_t>(i)];
        }
    }
    ASSERT_NE(alone, 0);
    cancel(alone);
    EXPECT_TRUE(eventually([&] { return started("bob"); }, 90s)) << task(b).dump(2) << log();
    for (TaskId id : alice) {
        (void)client().cancel(id);
    }
    (void)client().cancel(a5);
    (void)client().cancel(b);
}

// This test verifies the limit's form: a single-GPU task gets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT by
// ordinal ("0=" need + margin: its one GPU is ordinal 0 of its CUDA_VISIBLE_DEVICES), and a
// control daemon per GPU is started with that GPU alone visible.
TEST_F(MpsDaemonTest, LimitIsByOrdinalAndEachGpuHasItsControlDaemon) {
    start("oracle-MAGM");
    const TaskId id = submit_as(nullptr, client_task("root", 10000));
    ASSERT_TRUE(eventually([&] { return started("root"); })) << task(id).dump(2) << log();
    const std::string m = mark("root");
    EXPECT_NE(m.find("limit=0=12048M\n"), std::string::npos) << m;  // 2,048 MiB margin
    const std::string records = read_text(record_);
    for (int g = 0; g < 4; ++g) {
        EXPECT_NE(records.find(fmt::format("args=-d pipe={}/state/mps/GPU-emu00000-0000-4000-8000-"
                                           "00000000000{}/pipe",
                                           dir_, g)),
                  std::string::npos)
            << records;
        EXPECT_NE(records.find(fmt::format("cvd=GPU-emu00000-0000-4000-8000-00000000000{}", g)),
                  std::string::npos)
            << records;
    }
    cancel(id);
}

// This test verifies `--gpu-share` under MPS on one GPU: two halves run on it at once, each an MPS
// client capped at half the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50, as NVIDIA documents the
// share of a client); `carma gpus` shows the GPU fully reserved; a whole-GPU task waits with the
// shares named, and starts once they have ended.
TEST_F(MpsDaemonTest, TwoHalfSharesRunTogetherEachCappedAtHalfTheSms) {
    start("carma", "emulated:1xA100-40GB");
    json half_a = client_task("half_a");
    half_a["gpu_share"] = 0.5;
    json half_b = client_task("half_b");
    half_b["gpu_share"] = 0.5;
    const TaskId a = submit_as(nullptr, half_a);
    ASSERT_TRUE(eventually([&] { return started("half_a"); })) << task(a).dump(2) << log();
    EXPECT_EQ(task(a)["gpu_share"], 0.5);
    const TaskId b = submit_as(nullptr, half_b);
    ASSERT_TRUE(eventually([&] { return started("half_b"); }, 90s)) << task(b).dump(2) << log();
    for (const char* m : {"half_a", "half_b"}) {
        EXPECT_NE(mark(m).find("threads=50\n"), std::string::npos) << mark(m);
        EXPECT_NE(mark(m).find("cvd=GPU-emu00000-0000-4000-8000-000000000000\n"),
                  std::string::npos)
            << mark(m);
    }
    auto gpus = client().gpus();
    ASSERT_TRUE(gpus);
    EXPECT_EQ((*gpus)["gpus"][0]["share_reserved"], 1.0) << gpus->dump(2);
    const TaskId whole = submit_as(nullptr, client_task("whole"));
    EXPECT_TRUE(eventually([&] {
        return task(whole).value("message", "").find("--gpu-share") != std::string::npos;
    }, 60s)) << task(whole).dump(2);
    EXPECT_EQ(state(whole), "queued");
    EXPECT_FALSE(started("whole"));
    cancel(a);
    cancel(b);
    EXPECT_TRUE(eventually([&] { return started("whole"); }, 90s)) << task(whole).dump(2) << log();
    EXPECT_NE(mark("whole").find("threads=\n"), std::string::npos) << mark("whole");
    cancel(whole);
}

// This test verifies that a graceful stop leaves the control daemon of a GPU running while a
// task is its client (quitting would take its MPS server down) and quits the others; that a
// restarted daemon adopts it (no second `-d` there) while the task keeps running; and that a stop
// with no client left quits it too.
TEST_F(MpsDaemonTest, GracefulStopLeavesMpsToLiveClientsAndRestartAdoptsIt) {
    start("exclusive");
    const TaskId id = submit_as(nullptr, client_task("root"));
    ASSERT_TRUE(eventually([&] { return started("root"); })) << task(id).dump(2) << log();
    const std::string m = mark("root");
    const std::string uuid = m.substr(4, m.find('\n') - 4);  // "cvd=GPU-..."
    const std::string pipe = dir_ + "/state/mps/" + uuid + "/pipe";
    ASSERT_TRUE(fs::exists(pipe + "/control")) << m << read_text(record_);
    stop(SIGTERM);
    EXPECT_TRUE(fs::exists(pipe + "/control")) << read_text(record_);
    int quit = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_ + "/state/mps")) {
        if (e.path().filename() != uuid && e.path().filename() != "off") {
            EXPECT_FALSE(fs::exists(e.path() / "pipe" / "control")) << e.path();
            ++quit;
        }
    }
    EXPECT_EQ(quit, 3);
    EXPECT_EQ(count_of(read_text(record_), "args=-d pipe=" + pipe + " "), 1u);

    start("exclusive");
    EXPECT_NE(log().find("already running (adopted)"), std::string::npos) << log();
    EXPECT_EQ(count_of(read_text(record_), "args=-d pipe=" + pipe + " "), 1u) << read_text(record_);
    EXPECT_EQ(state(id), "running");
    cancel(id);
    ASSERT_TRUE(eventually([&] { return state(id) == "cancelled"; })) << task(id).dump(2);
    stop(SIGTERM);
    EXPECT_FALSE(fs::exists(pipe + "/control")) << read_text(record_);
}

}  // namespace
}  // namespace carma
