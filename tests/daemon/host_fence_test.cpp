// The whole server end to end (core/host.h, daemon/fences.h, exec/cgroup.h): a real daemon on
// emulated GPUs with its tasks fenced in this machine's cgroups. Needs root (CI runs as root);
// without a usable hierarchy the daemon refuses to start, and these tests fail saying so.

#include <algorithm>
#include <string>
#include <vector>

#include "daemon_fixture.h"

namespace carma::daemon_test {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

json shell_task(const std::string& name, const std::string& script, int gpus) {
    return {{"name", name},
            {"command", {"/bin/sh", "-c", script}},
            {"workdir", "/tmp"},
            {"gpus", gpus}};
}

std::string stdout_of(api::ApiClient& c, TaskId id) {
    auto log = c.logs(id, api::LogRequest{});
    return log ? log->text : std::string();
}

class HostFenceTest : public DaemonTest {
protected:
    void SetUp() override {
        DaemonTest::SetUp();
        ASSERT_EQ(::geteuid(), 0u) << "fences need root: run the suite as root, as CI does";
    }
    json host() {
        auto s = client().status();
        return s ? (*s)["host"] : json::object();
    }
};

// This test verifies the first scenario: a `-g 0 -c 1` task starts while every GPU is
// busy, holds no GPU, runs on one core of its own, and cannot widen its affinity past it.
TEST_F(HostFenceTest, CpuOnlyTaskStartsWhileEveryGpuIsBusyOnItsOneCore) {
    ASSERT_NO_FATAL_FAILURE(start("carma"));
    ASSERT_EQ(host()["fences"]["mode"], "v1") << host().dump() << daemon_log();
    // Said first: before the emulated-GPU warning and anything else.
    const std::string log = daemon_log();
    EXPECT_NE(log.substr(0, log.find('\n')).find("fences: cgroup v1"), std::string::npos) << log;
    json busy = shell_task("busy", "sleep 60", 1);
    busy["exclusive"] = true;
    const std::vector<TaskId> gpu_tasks = one_per_gpu(busy);
    ASSERT_TRUE(eventually([&] { return all_running(gpu_tasks); }, 60s)) << daemon_log();

    json cpu = shell_task("cpu", "grep Cpus_allowed_list /proc/self/status; "
                                 "taskset -a -p -c 0-1023 $$ >/dev/null 2>&1; "
                                 "grep Cpus_allowed_list /proc/self/status",
                          0);
    cpu["cpus"] = 1;
    const TaskId id = submit(cpu);
    const json done = wait_final(id, 60s);
    EXPECT_EQ(done["state"], "succeeded") << done.dump();
    EXPECT_TRUE(all_running(gpu_tasks)) << "the CPU-only task waited for a GPU";
    auto c = client();
    auto shown = c.task(id);
    ASSERT_TRUE(shown);
    const json attempt = (*shown)["attempt_list"][0];
    EXPECT_TRUE(attempt["gpus"].empty()) << attempt.dump();
    // Its one core, before and after it tried to widen its affinity to every core.
    const std::vector<int> cores = attempt["cores"].get<std::vector<int>>();
    ASSERT_EQ(cores.size(), 1u) << attempt.dump();
    const std::string line = "Cpus_allowed_list:\t" + std::to_string(cores[0]) + "\n";
    EXPECT_EQ(stdout_of(c, id), line + line);
    for (TaskId t : gpu_tasks) {
        (void)c.cancel(t);
    }
}

// This test verifies the second: a `--mem 128M` task that touches 600 MiB is stopped by the kernel
// and reported as out of host memory, with the limit, the peak and --mem named, is not relaunched,
// and the daemon answers after it; acct has its CPU time and peak.
TEST_F(HostFenceTest, HostMemoryFenceStopsTheLeakAlone) {
    ASSERT_NO_FATAL_FAILURE(start("carma"));
    json leak = {{"name", "leak"},
                 {"command", {kPython, "-c", "b = bytearray(600 << 20)\nprint('survived')"}},
                 {"workdir", "/tmp"},
                 {"gpus", 0},
                 {"host_mem_mib", 128}};
    const TaskId id = submit(leak);
    const json done = wait_final(id, 60s);
    EXPECT_EQ(done["state"], "failed") << done.dump();
    const std::string message = done["message"];
    EXPECT_NE(message.find("out-of-host-memory after 1 attempt(s)"), std::string::npos) << message;
    EXPECT_NE(message.find("host-memory limit of 128 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("--mem"), std::string::npos) << message;
    auto c = client();
    auto shown = c.task(id);
    ASSERT_TRUE(shown);
    EXPECT_EQ((*shown)["attempt_list"].size(), 1u) << "relaunched: " << shown->dump();
    EXPECT_EQ((*shown)["attempt_list"][0]["outcome"], "out-of-host-memory");
    EXPECT_EQ(stdout_of(c, id), "");
    EXPECT_TRUE(c.healthz().has_value()) << "the daemon does not answer after the leak";

    auto acct = c.acct({});
    ASSERT_TRUE(acct) << acct.error().message;
    const json row = (*acct)["tasks"][0];
    ASSERT_TRUE(row["max_rss_mib"].is_number()) << row.dump();
    EXPECT_GE(row["max_rss_mib"].get<double>(), 100) << row.dump();
    EXPECT_LE(row["max_rss_mib"].get<double>(), 128) << row.dump();
    ASSERT_TRUE(row["total_cpu_s"].is_number()) << row.dump();
    EXPECT_GT(row["total_cpu_s"].get<double>(), 0) << row.dump();
    EXPECT_TRUE(row["attempts"][0]["max_rss_mib"].is_number()) << row.dump();
    EXPECT_TRUE(row["attempts"][0]["total_cpu_s"].is_number()) << row.dump();
}

// This test verifies the third: a GPU task whose processes never show on its GPU (a `sleep`) is
// charged for the GPU it holds, as an exclusive task is.
TEST_F(HostFenceTest, SleepingGpuTaskIsCharged) {
    ASSERT_NO_FATAL_FAILURE(start("carma"));
    const TaskId id = submit(shell_task("sleeper", "sleep 3", 1));
    const json done = wait_final(id, 60s);
    EXPECT_EQ(done["state"], "succeeded") << done.dump();
    auto acct = client().acct({});
    ASSERT_TRUE(acct) << acct.error().message;
    const json row = (*acct)["tasks"][0];
    ASSERT_TRUE(row["charged_gpu_hours"].is_number()) << row.dump();
    // About 3 s x 60 (the time scale) of one whole GPU; at least a second of it.
    EXPECT_GT(row["charged_gpu_hours"].get<double>() * 3600, 60) << row.dump();
}

// This test verifies that a task waits for cores naming them, and starts once they are free;
// and that one asking more cores than the server has is refused at submission.
TEST_F(HostFenceTest, WaitsForCoresNamingThemAndRefusesTooMany) {
    ASSERT_NO_FATAL_FAILURE(start("carma"));
    const int total = host()["cpus_total"].get<int>();
    ASSERT_GE(total, 1) << host().dump();
    json all = shell_task("all", "sleep 4", 0);
    all["cpus"] = total;
    const TaskId first = submit(all);
    ASSERT_TRUE(eventually([&] { return state(first) == "running"; }, 30s)) << daemon_log();
    json one = shell_task("one", "true", 0);
    one["cpus"] = 1;
    const TaskId second = submit(one);
    const std::string want = fmt::format("waits for 1 core: 0 of {} free", total);
    EXPECT_TRUE(eventually([&] {
        return task(second)["message"].get<std::string>().find(want) != std::string::npos;
    }, 20s)) << task(second).dump();
    EXPECT_EQ(wait_final(second, 60s)["state"], "succeeded");
    EXPECT_EQ(state(first), "succeeded");

    json huge = shell_task("huge", "true", 0);
    huge["cpus"] = 4000;
    auto refused = client().submit(huge);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("asks for 4000 cores"), std::string::npos)
        << refused.error().message;
}

// This test verifies that the daemon refuses to start without fences it can make (as a user that
// may not write the cgroups) unless told `fences: off`, and then says nothing is fenced.
TEST_F(HostFenceTest, UnfencedOnlyWhenTheAdminSaysSo) {
    ASSERT_NO_FATAL_FAILURE(start("carma", {"--fences", "off"}));
    EXPECT_EQ(host()["fences"]["mode"], "none") << host().dump();
    EXPECT_NE(host()["fences"]["text"].get<std::string>().find("not fenced"), std::string::npos);
    EXPECT_NE(daemon_log().find("fences: off"), std::string::npos) << daemon_log();
    const TaskId id = submit(shell_task("plain", "sleep 3", 0));
    // Every task says so while it runs.
    EXPECT_TRUE(eventually([&] {
        return task(id)["message"].get<std::string>().find("unfenced (fences: off)") !=
               std::string::npos;
    }, 20s)) << task(id).dump();
    EXPECT_EQ(wait_final(id, 30s)["state"], "succeeded");
    stop(SIGTERM);

    // A fences value the daemon cannot have here.
    const std::string out = dir_ + "/v2.out";
    const int rc = std::system((std::string(CARMA_BIN) + " serve --gpus emulated:1xA100-40GB " +
                                "--state-dir " + dir_ + "/other --socket " + dir_ +
                                "/other.sock --fences v2 >" + out + " 2>&1")
                                   .c_str());
    EXPECT_NE(rc, 0);
    const std::string said = read_text(out);
    EXPECT_NE(said.find("cannot fence tasks in cgroup v2"), std::string::npos) << said;
    EXPECT_NE(said.find("fences: off"), std::string::npos) << said;
}

}  // namespace
}  // namespace carma::daemon_test
