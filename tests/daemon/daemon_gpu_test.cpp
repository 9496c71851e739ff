// The daemon on "real" GPUs: a Daemon in this process on the NVML (and DCGM) backend, loaded
// through the same loader code as on a real machine but pointed at the fake libraries the tests
// build. The fakes read their knobs from this process's environment at every call, so a test can
// break a GPU, list a task's process on it or turn MIG on between two ticks of the loop.

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "support.h"
#include "daemon/daemon.h"
#include "device/dcgm.h"
#include "device/nvml.h"

#ifndef CARMA_FAKE_NVML_PATH
#error "CARMA_FAKE_NVML_PATH must name the fake NVML library"
#endif
#ifndef CARMA_FAKE_DCGM_PATH
#error "CARMA_FAKE_DCGM_PATH must name the fake DCGM library"
#endif
#ifndef CARMA_SHIM_PATH
#error "CARMA_SHIM_PATH must name carma-shim"
#endif
#ifndef CARMA_FAKE_MPS_CONTROL
#error "CARMA_FAKE_MPS_CONTROL must name the fake nvidia-cuda-mps-control"
#endif

extern char** environ;

namespace carma::daemon {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

void clear_knobs() {
    std::vector<std::string> names;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string text(*e);
        if (text.starts_with("FAKE_NVML_") || text.starts_with("FAKE_DCGM_") ||
            text.starts_with("FAKE_MPS_")) {
            names.push_back(text.substr(0, text.find('=')));
        }
    }
    for (const std::string& n : names) {
        ::unsetenv(n.c_str());
    }
}

using test_support::eventually;

class RealGpuDaemonTest : public ::testing::Test {
protected:
    void SetUp() override {
        clear_knobs();
        ::setenv(device::kNvmlLibraryEnv, CARMA_FAKE_NVML_PATH, 1);
        ::setenv(device::kDcgmLibraryEnv, CARMA_FAKE_DCGM_PATH, 1);
        ::setenv("FAKE_NVML_GPU0_PROCS", "0", 1);  // both GPUs idle unless a test says otherwise
        char tmpl[] = "/tmp/carma-gpu-daemon-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        config_.state_dir = dir_ + "/state";
        config_.gpus = "nvml";
        config_.window = 2;
        config_.warmup_s = 0;
        config_.policy = "exclusive";
        config_.shim_path = CARMA_SHIM_PATH;
        config_.kill_grace_s = 0;
    }

    void TearDown() override {
        if (daemon_) {
            for (const auto& t : tasks()) {
                if (t.value("state", "") == "running") {
                    (void)daemon_->cancel_task(caller(), t["id"].get<std::int64_t>());
                }
            }
            eventually([&] {
                daemon_->tick();
                for (const auto& t : tasks()) {
                    if (t.value("state", "") == "running") {
                        return false;
                    }
                }
                return true;
            });
        }
        daemon_.reset();
        clear_knobs();
        ::unsetenv(device::kNvmlLibraryEnv);
        ::unsetenv(device::kDcgmLibraryEnv);
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    void create() {
        auto d = Daemon::create(config_);
        ASSERT_TRUE(d) << d.error().message;
        daemon_ = std::move(*d);
    }

    static api::Caller caller() {
        api::Caller c;
        c.uid = ::geteuid();
        c.gid = ::getegid();
        c.pid = ::getpid();
        c.user = "tester";
        return c;
    }

    void ticks(int n) {
        for (int i = 0; i < n; ++i) {
            daemon_->tick();
        }
    }

    // Cancels the running task and the queued one, ticks until the running one has stopped,
    // and stops the daemon: a test goes on with another configuration.
    void cancel_and_stop(std::int64_t running, std::int64_t queued) {
        daemon_->cancel_task(caller(), running);
        daemon_->cancel_task(caller(), queued);
        eventually([&] {
            daemon_->tick();
            return task(running)["state"] != "running";
        });
        daemon_.reset();
    }

    json gpus() {
        auto g = daemon_->gpus(caller());
        EXPECT_TRUE(g) << (g ? "" : g.error().message);
        return g ? (*g)["gpus"] : json::array();
    }

    std::vector<json> tasks() {
        std::vector<json> out;
        for (std::int64_t id = 1; id < 20; ++id) {
            auto t = daemon_->show_task(caller(), id);
            if (!t) {
                break;
            }
            out.push_back(*t);
        }
        return out;
    }

    json task(std::int64_t id) {
        auto t = daemon_->show_task(caller(), id);
        EXPECT_TRUE(t) << (t ? "" : t.error().message);
        return t ? *t : json::object();
    }

    std::int64_t submit(std::vector<std::string> command, int gpus = 1,
                        std::optional<MiB> memory = std::nullopt) {
        json body = {{"command", command}, {"workdir", dir_}, {"gpus", gpus}};
        if (memory) {
            body["memory_mib"] = *memory;
        }
        auto r = daemon_->submit(caller(), body);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? (*r)["id"].get<std::int64_t>() : 0;
    }

    std::vector<std::string> event_kinds() {
        auto e = daemon_->events(caller(), 0, 0, 10000);
        std::vector<std::string> out;
        if (e) {
            for (const json& ev : (*e)["events"]) {
                out.push_back(ev["kind"]);
            }
        }
        return out;
    }

    // The pid a task wrote into `file` (tasks below announce their rank's pid that way).
    pid_t read_pid(const std::string& file) {
        pid_t pid = 0;
        eventually([&] {
            daemon_->tick();
            std::ifstream in(file);
            return static_cast<bool>(in >> pid) && pid > 1;
        });
        return pid;
    }

    std::string dir_;
    DaemonConfig config_;
    std::unique_ptr<Daemon> daemon_;
};

// This test verifies GPU health: a GPU whose reads keep failing is marked unhealthy (event and
// `carma gpus`), nothing is placed on it while the other GPU keeps being scheduled, and it
// comes back (window refilled first) when it answers again.
TEST_F(RealGpuDaemonTest, GpuHealthUnhealthyGpuIsSkippedAndComesBack) {
    create();
    ticks(2);
    ASSERT_EQ(gpus()[1]["health"]["state"], "ok") << gpus().dump(2);
    ::setenv("FAKE_NVML_GPU1_FAIL", "1", 1);
    ticks(3);
    const json g = gpus();
    EXPECT_EQ(g[1]["health"]["state"], "unhealthy") << g.dump(2);
    EXPECT_NE(g[1]["health"]["reason"].get<std::string>().find("GPU 1"), std::string::npos);
    EXPECT_EQ(g[0]["health"]["state"], "ok");
    const auto kinds = event_kinds();
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "gpu-unhealthy"), kinds.end());

    const std::int64_t first = submit({"/bin/sleep", "60"});
    const std::int64_t second = submit({"/bin/sleep", "60"});
    ticks(2);
    EXPECT_EQ(task(first)["state"], "running");
    EXPECT_EQ(task(first)["attempt_list"][0]["gpus"], json::array({0}));
    EXPECT_EQ(task(second)["state"], "queued");  // GPU 1 is idle but unhealthy

    ::unsetenv("FAKE_NVML_GPU1_FAIL");
    daemon_->tick();
    EXPECT_EQ(gpus()[1]["health"]["state"], "filling");
    ticks(2);
    EXPECT_EQ(task(second)["state"], "running");
    EXPECT_EQ(task(second)["attempt_list"][0]["gpus"], json::array({1}));
    const auto after = event_kinds();
    EXPECT_NE(std::find(after.begin(), after.end(), "gpu-healthy"), after.end());
}

// This test verifies that a transient failed read makes the GPU stale (not placed on that tick,
// stale free memory never used) without making it unhealthy.
TEST_F(RealGpuDaemonTest, GpuHealthOneFailedReadIsStaleNotUnhealthy) {
    create();
    ticks(2);
    ::setenv("FAKE_NVML_GPU1_FAIL", "1", 1);
    daemon_->tick();
    EXPECT_EQ(gpus()[1]["health"]["state"], "stale");
    ::unsetenv("FAKE_NVML_GPU1_FAIL");
    daemon_->tick();
    EXPECT_EQ(gpus()[1]["health"]["state"], "ok");
}

// This test verifies the labels on plain NVML: SMACT and DRAMA are utilisation-rate proxies,
// SMOCC is unknown (null, not 0), and the risk rule in force says so; with GPM the paper's rule.
TEST_F(RealGpuDaemonTest, SourcesAndRiskRuleFollowTheBackend) {
    create();
    ticks(2);
    json g = gpus();
    EXPECT_EQ(g[0]["sources"]["smact"], "nvml");
    EXPECT_EQ(g[0]["sources"]["smocc"], "unavailable");
    EXPECT_TRUE(g[0]["smocc"].is_null());
    EXPECT_EQ(g[0]["risk"]["rule"], "proxy");
    EXPECT_NE(g[0]["risk"]["rule_text"].get<std::string>().find("NVML utilisation"),
              std::string::npos);
    daemon_.reset();

    ::setenv("FAKE_NVML_GPM", "1", 1);
    create();
    std::this_thread::sleep_for(150ms);  // GPM needs a period between its two samples
    ticks(2);
    g = gpus();
    EXPECT_EQ(g[0]["sources"]["smocc"], "nvml-gpm") << g.dump(2);
    EXPECT_EQ(g[0]["risk"]["rule"], "paper");
}

// This test verifies that a GPU with GPM logs the risk rule it really has, never the hint for
// GPUs without SM activity counters that GPM's first sample (no activity yet: GPM's figures are a
// difference of two of its samples) gave on an H200: "use a Hopper GPU for GPM" on a Hopper GPU.
TEST_F(RealGpuDaemonTest, GpmGpuLogsItsOwnRuleNotTheFirstSamplesHint) {
    auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(500);
    spdlog::default_logger()->sinks().push_back(log);
    ::setenv("FAKE_NVML_GPM", "1", 1);
    create();
    ticks(1);                            // within GPM's first period: no activity yet
    std::this_thread::sleep_for(150ms);  // GPM needs a period between its two samples
    ticks(2);
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log), sinks.end());
    std::string rules;
    for (const std::string& line : log->last_formatted()) {
        if (line.find("risk rule") != std::string::npos) {
            rules += line;
        }
    }
    EXPECT_NE(rules.find("GPU 0: SMACT nvml-gpm"), std::string::npos) << rules;
    EXPECT_NE(rules.find("risk rule paper"), std::string::npos) << rules;
    EXPECT_EQ(rules.find("proxy"), std::string::npos) << rules;
    EXPECT_EQ(rules.find("use a Hopper GPU"), std::string::npos) << rules;
}

// This test verifies that an attempt that dies of out-of-memory before any sample sees its memory
// (on an H200 under MPS one was seen at 14 MiB while PyTorch's error said 4.03 GiB) takes what
// its error says it held: the attempt's peak (not "unobserved"), and the relaunch plans with at
// least that much.
TEST_F(RealGpuDaemonTest, AnOomFasterThanTheSamplesIsLearnedFromItsError) {
    config_.max_attempts = 2;
    create();
    ticks(2);
    const std::string crash =
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
        "a total capacity of 40.00 GiB of which 10.00 MiB is free. Including non-PyTorch memory, "
        "this process has 30.00 GiB memory in use. Of the allocated memory 29.00 GiB is "
        "allocated by PyTorch' >&2; exit 1";
    const std::int64_t id = submit({"/bin/sh", "-c", crash});
    ASSERT_TRUE(eventually([&] {
        daemon_->tick();
        return task(id)["state"] == "failed";
    })) << task(id).dump(2);
    const json t = task(id);
    const json& first = t["attempt_list"][0];
    EXPECT_EQ(first["outcome"], "out-of-memory") << t.dump(2);
    const std::string gpu = std::to_string(first["gpus"][0].get<int>());
    EXPECT_EQ(first["peak_mib"][gpu], 30720) << t.dump(2);
    EXPECT_TRUE(first["unobserved"].is_null()) << t.dump(2);
    const json& learned = t["learned"];
    EXPECT_GE(learned["lower_bound_mib"].get<MiB>(), 30720) << t.dump(2);
    EXPECT_NE(learned["basis"].get<std::string>().find("crashed out of memory holding 30,720 MiB"),
              std::string::npos)
        << t.dump(2);
}

// This test verifies that with no activity metric at all (utilisation not supported) the risk
// filter is not silently off: the rule is "blind" and a GPU in use takes no second task.
TEST_F(RealGpuDaemonTest, NoActivityMetricMeansBlindRule) {
    ::setenv("FAKE_NVML_GPU0_NO_UTIL", "1", 1);
    ::setenv("FAKE_NVML_GPU1_NO_UTIL", "1", 1);
    ::setenv("FAKE_NVML_GPU0_PROCS", "1", 1);  // GPU 0 runs something that is not ours
    config_.policy = "oracle-FF";
    create();
    ticks(2);
    const json g = gpus();
    EXPECT_EQ(g[0]["risk"]["rule"], "blind");
    EXPECT_TRUE(g[0]["risk"]["high"].get<bool>());
    EXPECT_EQ(g[1]["risk"]["rule"], "blind");
    EXPECT_FALSE(g[1]["risk"]["high"].get<bool>());  // idle
}

// This test verifies that an MPS server on a GPU does not make it busy: the exclusive path still
// takes it (with MPS on, a server sits on every GPU).
TEST_F(RealGpuDaemonTest, MpsServerProcessNeverMakesAGpuBusy) {
    // A process that looks like an MPS server: /bin/sleep under that name.
    const std::string fake_server = dir_ + "/nvidia-cuda-mps-server";
    fs::copy_file("/bin/sleep", fake_server);
    const pid_t server = ::fork();
    ASSERT_GE(server, 0);
    if (server == 0) {
        ::execl(fake_server.c_str(), "nvidia-cuda-mps-server", "60", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ASSERT_TRUE(eventually([&] {
        std::ifstream in(fmt::format("/proc/{}/cmdline", server));
        std::string cmd;
        std::getline(in, cmd);
        return cmd.starts_with("nvidia-cuda-mps-server");
    }));
    for (const char* knob : {"FAKE_NVML_GPU0_COMPUTE_PROCS", "FAKE_NVML_GPU1_COMPUTE_PROCS"}) {
        ::setenv(knob, fmt::format("{}:300", server).c_str(), 1);
    }
    create();
    ticks(2);
    EXPECT_TRUE(gpus()[0]["processes"][0]["mps_server"].get<bool>()) << gpus().dump(2);
    const std::int64_t id = submit({"/bin/sleep", "60"});
    ticks(1);
    EXPECT_EQ(task(id)["state"], "running") << task(id).dump(2);
    ::kill(server, SIGKILL);
    ::waitpid(server, nullptr, 0);
}

// This test verifies "seen" through the process tree: a task whose rank calls setsid (new session
// and group) is still recognised on its GPU; each GPU of a 2-GPU task ends its warm-up when the
// task is seen there (GPU 1 stays locked while only GPU 0 has the rank); and the attempt's peak
// GPU memory per GPU is recorded and shown.
TEST_F(RealGpuDaemonTest, SetsidRankIsSeenPerGpuAndPeakMemoryRecorded) {
    config_.policy = "oracle-FF";
    create();
    ticks(2);
    const std::string pidfile = dir_ + "/rank.pid";
    const std::int64_t id =
        submit({"/bin/sh", "-c", "setsid sleep 60 & echo $! > " + pidfile + "; wait"}, 2);
    const pid_t rank = read_pid(pidfile);
    ASSERT_GT(rank, 1);
    EXPECT_EQ(task(id)["state"], "running");
    json g = gpus();
    EXPECT_TRUE(g[0]["locked"].get<bool>());
    EXPECT_TRUE(g[1]["locked"].get<bool>());
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:1234", rank).c_str(), 1);
    ticks(2);
    g = gpus();
    EXPECT_FALSE(g[0]["locked"].get<bool>()) << g.dump(2);  // seen there: warm-up over (0 s)
    EXPECT_TRUE(g[1]["locked"].get<bool>());                // not seen there yet
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:2000", rank).c_str(), 1);
    ::setenv("FAKE_NVML_GPU1_COMPUTE_PROCS", fmt::format("{}:900", rank).c_str(), 1);
    ticks(6);  // the peak is written every few ticks
    g = gpus();
    EXPECT_FALSE(g[1]["locked"].get<bool>());
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:1500", rank).c_str(), 1);
    ticks(6);
    const json peak = task(id)["attempt_list"][0]["peak_mib"];
    EXPECT_EQ(peak, json({{"0", 2000}, {"1", 900}})) << task(id).dump(2);
}

// This test verifies leaving GPUs out: by index, UUID or name pattern, and MIG GPUs refused with
// a clear reason; when every GPU is left out the daemon refuses to start and says why.
TEST_F(RealGpuDaemonTest, ExcludedAndMigGpusAreLeftOut) {
    ::setenv("FAKE_NVML_GPU1_MIG", "1", 1);
    create();
    ticks(2);
    json g = gpus();
    EXPECT_EQ(g[1]["health"]["state"], "excluded");
    EXPECT_NE(g[1]["health"]["reason"].get<std::string>().find("MIG"), std::string::npos);
    const std::int64_t a = submit({"/bin/sleep", "60"});
    const std::int64_t b = submit({"/bin/sleep", "60"});
    ticks(1);
    EXPECT_EQ(task(a)["state"], "running");
    EXPECT_EQ(task(b)["state"], "queued");  // GPU 1 is idle but MIG
    cancel_and_stop(a, b);

    ::unsetenv("FAKE_NVML_GPU1_MIG");
    config_.exclude_gpus = {"*A100-SXM4-40GB"};
    create();
    EXPECT_EQ(gpus()[0]["health"]["state"], "excluded");
    EXPECT_EQ(gpus()[1]["health"]["state"], "filling");
    daemon_.reset();

    config_.exclude_gpus = {"0", "GPU-fa4e0000-0000-4000-8000-000000000001"};
    auto refused = Daemon::create(config_);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("every GPU is left out"), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("exclude_gpus"), std::string::npos);
}

// This test verifies --gpus auto's order: DCGM when it loads (profiling counters measured),
// else NVML, and --gpus dcgm/nvml with no library name the library in one line.
TEST_F(RealGpuDaemonTest, AutoPrefersDcgmThenNvml) {
    config_.gpus = "auto";
    create();
    EXPECT_EQ(daemon_->backend_name().rfind("dcgm", 0), 0u) << daemon_->backend_name();
    ticks(2);
    EXPECT_EQ(gpus()[0]["sources"]["smact"], "dcgm");
    daemon_.reset();

    ::setenv(device::kDcgmLibraryEnv, "libdcgm-missing.so.4", 1);
    create();
    EXPECT_EQ(daemon_->backend_name(), "nvml");
    daemon_.reset();

    config_.gpus = "dcgm";
    auto no_dcgm = Daemon::create(config_);
    ASSERT_FALSE(no_dcgm);
    EXPECT_NE(no_dcgm.error().message.find("libdcgm-missing.so.4"), std::string::npos);
    EXPECT_EQ(no_dcgm.error().message.find('\n'), std::string::npos);

    ::setenv(device::kNvmlLibraryEnv, "libnvidia-ml-missing.so.1", 1);
    config_.gpus = "nvml";
    auto no_nvml = Daemon::create(config_);
    ASSERT_FALSE(no_nvml);
    EXPECT_NE(no_nvml.error().message.find("libnvidia-ml-missing.so.1"), std::string::npos);
    EXPECT_EQ(no_nvml.error().message.find('\n'), std::string::npos);
}

// This test verifies MPS under the daemon: each GPU's control daemon is started with its pipe and
// log directories under the state directory and that GPU alone visible, each task gets its GPU's
// CUDA_MPS_PIPE_DIRECTORY and, with a known need, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = need + margin
// by ordinal; the daemon's stop quits MPS (no client left); a control program that fails is a
// clear error at start.
TEST_F(RealGpuDaemonTest, MpsControlStartedAndTasksGetLimits) {
    const std::string record = dir_ + "/mps-record";
    ::setenv("FAKE_MPS_RECORD", record.c_str(), 1);
    config_.mps = true;
    config_.mps_control = CARMA_FAKE_MPS_CONTROL;
    config_.memory_margin_mib = 2048;
    create();
    ticks(2);
    const std::string envfile = dir_ + "/task.env";
    const std::int64_t id = submit({"/bin/sh", "-c", "env > " + envfile}, 1, 10000);
    ASSERT_TRUE(eventually([&] {
        daemon_->tick();
        return task(id)["state"] == "succeeded";
    })) << task(id).dump(2);
    std::ifstream in(envfile);
    std::stringstream env;
    env << in.rdbuf();
    const std::string gpu_dir = dir_ + "/state/mps/GPU-fa4e0000-0000-4000-8000-000000000000";
    EXPECT_NE(env.str().find("CUDA_MPS_PIPE_DIRECTORY=" + gpu_dir + "/pipe\n"),
              std::string::npos)
        << env.str();
    EXPECT_NE(env.str().find("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12048M\n"), std::string::npos)
        << env.str();
    const std::atomic<bool> stop{true};
    daemon_->run(stop);  // stops at once: the shutdown path
    daemon_.reset();
    std::ifstream rec(record);
    std::stringstream lines;
    lines << rec.rdbuf();
    EXPECT_NE(lines.str().find("args=-d pipe=" + gpu_dir + "/pipe log=" + gpu_dir +
                               "/log cvd=GPU-fa4e0000-0000-4000-8000-000000000000"),
              std::string::npos)
        << lines.str();
    EXPECT_NE(lines.str().find("stdin=quit"), std::string::npos) << lines.str();

    ::setenv("FAKE_MPS_FAIL", "1", 1);
    auto refused = Daemon::create(config_);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("MPS control daemon did not start"), std::string::npos)
        << refused.error().message;
}

// This test verifies a restart right after SIGKILL: the lock file names a dead daemon but a child
// it forked still holds the lock for a moment; the new daemon waits for it instead of refusing.
// A lock whose recorded holder is alive is still refused at once.
TEST_F(RealGpuDaemonTest, RestartWaitsForALockLeftByADeadDaemonsChild) {
    fs::create_directories(config_.state_dir);
    const std::string lock = config_.state_dir + "/daemon.lock";
    const pid_t dead = ::fork();
    if (dead == 0) {
        ::_exit(0);
    }
    ::waitpid(dead, nullptr, 0);
    std::ofstream(lock) << dead << "\n";
    auto hold = [&](double seconds) {
        const pid_t holder = ::fork();
        if (holder == 0) {
            const int fd = ::open(lock.c_str(), O_RDWR);
            ::flock(fd, LOCK_EX);
            std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
            ::_exit(0);
        }
        // The child has the lock once a non-blocking attempt here fails.
        const int probe = ::open(lock.c_str(), O_RDWR);
        eventually([&] {
            if (::flock(probe, LOCK_EX | LOCK_NB) == 0) {
                ::flock(probe, LOCK_UN);
                return false;
            }
            return true;
        });
        ::close(probe);
        return holder;
    };
    pid_t holder = hold(1.0);
    create();  // waits for the child, then starts
    EXPECT_NE(daemon_, nullptr);
    ::waitpid(holder, nullptr, 0);
    daemon_.reset();

    std::ofstream(lock) << ::getpid() << "\n";  // a live holder: really another daemon
    holder = hold(3.0);
    auto refused = Daemon::create(config_);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("already uses the state directory"), std::string::npos)
        << refused.error().message;
    ::waitpid(holder, nullptr, 0);
}


// This test verifies that one GPU that fails to enumerate (nvmlDeviceGetHandleByIndex answers
// GPU_IS_LOST: it fell off the bus) is marked unhealthy and left out, with its index kept, while
// the other GPU is scheduled; the same under DCGM when the lost GPU's UUID cannot be read. On the
// code before, one such GPU failed the whole enumeration and the daemon did not start.
TEST_F(RealGpuDaemonTest, LostGpuIsLeftOutAndTheOthersScheduled) {
    ::setenv("FAKE_NVML_GPU0_HANDLE", "lost", 1);
    create();
    ticks(2);
    json g = gpus();
    ASSERT_EQ(g.size(), 2u) << g.dump(2);
    EXPECT_EQ(g[0]["health"]["state"], "unhealthy") << g.dump(2);
    EXPECT_NE(g[0]["health"]["reason"].get<std::string>().find("GPU is lost"), std::string::npos)
        << g[0].dump(2);
    EXPECT_EQ(g[1]["uuid"], "GPU-fa4e0000-0000-4000-8000-000000000001");
    const std::int64_t a = submit({"/bin/sleep", "60"});
    const std::int64_t b = submit({"/bin/sleep", "60"});
    ticks(1);
    EXPECT_EQ(task(a)["state"], "running") << task(a).dump(2);
    EXPECT_EQ(task(a)["attempt_list"][0]["gpus"], json::array({1})) << task(a).dump(2);
    EXPECT_EQ(task(b)["state"], "queued");  // GPU 0 is never used
    cancel_and_stop(a, b);

    ::unsetenv("FAKE_NVML_GPU0_HANDLE");
    ::setenv("FAKE_NVML_GPU1_UUID", "lost", 1);
    config_.gpus = "dcgm";
    create();
    ticks(2);
    g = gpus();
    EXPECT_EQ(g[1]["health"]["state"], "unhealthy") << g.dump(2);
    EXPECT_EQ(g[0]["health"]["state"], "ok") << g.dump(2);
}

// This test verifies `--gpus auto` with a driver meant to be here (CARMA_NVML_LIBRARY names a
// library) whose NVML fails to initialise with a driver/library version mismatch: the daemon
// refuses to start, says NVML's error and to reboot, instead of running on emulated GPUs (what
// the code before did).
TEST_F(RealGpuDaemonTest, AutoRefusesEmulatedWhenTheDriverIsBroken) {
    ::setenv(device::kDcgmLibraryEnv, "libdcgm-missing.so.4", 1);
    ::setenv("FAKE_NVML_FAIL_INIT", "rm-mismatch", 1);
    config_.gpus = "auto";
    auto refused = Daemon::create(config_);
    ASSERT_FALSE(refused) << (*refused)->backend_name();
    const std::string& why = refused.error().message;
    EXPECT_NE(why.find("Driver/library version mismatch"), std::string::npos) << why;
    EXPECT_NE(why.find("reboot"), std::string::npos) << why;
    EXPECT_NE(why.find("CARMA_NVML_LIBRARY"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

std::string my_user_name() {
    const passwd* pw = ::getpwuid(::geteuid());
    return pw != nullptr ? pw->pw_name : "";
}

// This test verifies processes CARMA did not start: one holding 20 GiB of GPU 0 is shown with
// its pid, user and owner "foreign" in GET /v1/gpus; `carma` does not plan a task into the
// memory it holds (the ledger counted only the residents' needs before, so a 9 GiB task was
// placed beside a 8 GiB one although only 10 GiB were left for both); and when the foreign
// process grows into the memory the running task was planned into, an event says so.
TEST_F(RealGpuDaemonTest, ForeignProcessIsShownTakenAndNeverPlannedInto) {
    config_.policy = "carma";
    config_.exclude_gpus = {"1"};
    const pid_t foreign = ::getpid();  // this test process: no task of the daemon's
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:20480", foreign).c_str(), 1);
    ::setenv("FAKE_NVML_GPU0_USED_MIB", "20480", 1);
    create();
    ticks(2);
    json g = gpus();
    ASSERT_EQ(g[0]["foreign"].size(), 1u) << g[0].dump(2);
    EXPECT_EQ(g[0]["foreign"][0]["pid"], foreign);
    EXPECT_EQ(g[0]["foreign"][0]["user"], my_user_name());
    EXPECT_EQ(g[0]["foreign"][0]["used_mib"], 20480);
    EXPECT_EQ(g[0]["foreign_mib"], 20480);
    EXPECT_EQ(g[0]["processes"][0]["owner"], "foreign") << g[0].dump(2);

    const std::string pidfile = dir_ + "/a.pid";
    const std::int64_t a =
        submit({"/bin/sh", "-c", "echo $$ > " + pidfile + "; exec sleep 60"}, 1, 8000);
    const pid_t a_pid = read_pid(pidfile);
    ASSERT_GT(a_pid, 1);
    ASSERT_EQ(task(a)["state"], "running") << task(a).dump(2);
    // A has only started: it holds 500 MiB of the 8000 (+ 2048 margin) it was planned with.
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:20480,{}:500", foreign, a_pid).c_str(),
             1);
    ::setenv("FAKE_NVML_GPU0_USED_MIB", "20980", 1);
    ticks(3);
    g = gpus();
    EXPECT_EQ(g[0]["foreign"].size(), 1u) << g[0].dump(2);  // A's process is not foreign
    // 40448 usable - 20480 foreign - 10048 planned for A leaves 9920: 9000 + 2048 do not fit.
    const std::int64_t b = submit({"/bin/sleep", "60"}, 1, 9000);
    ticks(3);
    EXPECT_EQ(task(b)["state"], "queued") << task(b).dump(2);
    const std::vector<std::string> before = event_kinds();
    EXPECT_EQ(std::count(before.begin(), before.end(), "foreign-memory"), 0);  // still fits

    // The foreign process grows to 31000 MiB: with A's 10048 planned, past the 40448 usable.
    ::setenv("FAKE_NVML_GPU0_COMPUTE_PROCS", fmt::format("{}:31000,{}:500", foreign, a_pid).c_str(),
             1);
    ::setenv("FAKE_NVML_GPU0_USED_MIB", "31500", 1);
    ticks(2);
    auto e = daemon_->events(caller(), 0, a, 1000);
    ASSERT_TRUE(e);
    bool told = false;
    for (const json& ev : (*e)["events"]) {
        if (ev["kind"] == "foreign-memory") {
            told = true;
            EXPECT_NE(ev["message"].get<std::string>().find(fmt::format("pid {}", foreign)),
                      std::string::npos)
                << ev.dump();
        }
    }
    EXPECT_TRUE(told) << e->dump(2);
}

}  // namespace
}  // namespace carma::daemon
