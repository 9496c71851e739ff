// Fences end to end: attempts launched through carma-shim with a fence in their request, on this
// machine's cgroup v1 hierarchies (and its controller-less cgroup2 for the BPF device filter).
// Needs root; a test that cannot get what it needs fails and says why. The kernel-level checks
// of each limit are in cgroup_test.cpp.

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cgroup.h"
#include "exec/launch.h"
#include "exec/launch_wait.h"

namespace carma::exec {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Launches with a fence on this machine's cgroup v1 hierarchies, under a root of the test's own
// that is prepared as the daemon would and removed at the end.
class FencedLaunchTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(::geteuid(), 0u) << "fences need root";
        char pattern[] = "/tmp/carma-fenced-launch-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr) << "mkdtemp: " << std::strerror(errno);
        root_ = pattern;
        static int counter = 0;
        fence_root_ =
            "carma-test-launch-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
        auto ok = prepare_fence_root(CgroupMode::V1, fence_root_);
        ASSERT_TRUE(ok) << ok.error().message;
    }
    void TearDown() override {
        if (HasFailure()) {  // the shim's own log says what it saw
            std::cerr << "shim.log:\n" << read_file(root_ / "attempt" / kShimLogFile);
        }
        if (!fence_root_.empty()) {
            auto leaf = remove_fence(fence());
            EXPECT_TRUE(leaf) << leaf.error().message;
            auto root = remove_fence_root(CgroupMode::V1, fence_root_);
            EXPECT_TRUE(root) << root.error().message;
        }
        std::error_code ec;
        fs::remove_all(root_, ec);
    }

    LaunchRequest request(std::vector<std::string> argv) const {
        LaunchRequest r;
        r.argv = std::move(argv);
        r.workdir = root_.string();
        r.env = {{"PATH", "/usr/bin:/bin"}};
        r.attempt_dir = (root_ / "attempt").string();
        r.kill_grace_s = 10;
        return r;
    }

    // Launches and waits for exit.json; fails the test if either does not happen.
    std::optional<ExitRecord> run(const LaunchRequest& r) { return launch_and_wait(r); }

    std::string attempt_file(std::string_view name) const {
        return (root_ / "attempt" / name).string();
    }

    FenceSpec fence() const {
        FenceSpec f;
        f.mode = CgroupMode::V1;
        f.root = fence_root_;
        f.name = "task-1-1";
        return f;
    }

    // No hierarchy keeps the leaf once the shim is done.
    bool leaf_gone() const {
        for (const char* c : {"cpuset", "memory", "pids", "devices", "cpuacct"}) {
            if (fs::exists(fence_leaf_path(fence(), c))) {
                return false;
            }
        }
        return true;
    }

    fs::path root_;
    std::string fence_root_;
};

// This test verifies the memory fence end to end: a task that allocates 600 MiB in a 64 MiB
// fence is killed by the kernel, and exit.json says so (signal 9, the limit hit, the limit, the
// peak); the shim survives to record it and removes the leaf.
TEST_F(FencedLaunchTest, TaskOverItsMemoryIsKilledAndRecorded) {
    LaunchRequest r = request({"python3", "-c", "b = bytearray(600 << 20)"});
    r.fence = fence();
    r.fence->memory_bytes = 64 << 20;
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->signal, SIGKILL);
    EXPECT_FALSE(record->exit_code);
    EXPECT_TRUE(record->memory_fence_hit);
    EXPECT_EQ(record->memory_limit_bytes, 64 << 20);
    ASSERT_TRUE(record->max_rss_bytes);
    EXPECT_GT(*record->max_rss_bytes, 32 << 20);
    EXPECT_LE(*record->max_rss_bytes, 64 << 20);
    ASSERT_TRUE(record->cpu_s);
    EXPECT_EQ(record->fence_error, "");
    EXPECT_TRUE(leaf_gone());
}

// This test verifies that a task fenced to cpu 0 sees only cpu 0, that the task is in the leaf
// and its shim (its parent) is not, and that the leaf is gone after the end.
TEST_F(FencedLaunchTest, TaskRunsOnItsCpusAndOnlyTheTaskIsFenced) {
    LaunchRequest r = request({"sh", "-c",
                               "cat /proc/self/status; echo task; cat /proc/self/cgroup; "
                               "echo shim; cat /proc/$PPID/cgroup"});
    r.fence = fence();
    r.fence->cpus = {0};
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    EXPECT_FALSE(record->memory_fence_hit);
    const std::string out = read_file(attempt_file(kStdoutFile));
    EXPECT_NE(out.find("Cpus_allowed_list:\t0\n"), std::string::npos) << out;
    const auto task_at = out.find("task\n");
    const auto shim_at = out.find("shim\n");
    ASSERT_NE(task_at, std::string::npos);
    ASSERT_NE(shim_at, std::string::npos);
    const std::string leaf = "/" + fence_root_ + "/task-1-1";
    const std::string task_cgroups = out.substr(task_at, shim_at - task_at);
    const std::string shim_cgroups = out.substr(shim_at);
    for (const char* c : {"cpuset", "memory", "pids", "devices", "cpuacct"}) {
        EXPECT_NE(task_cgroups.find(std::string(c) + ":" + leaf), std::string::npos)
            << c << "\n"
            << task_cgroups;
    }
    EXPECT_EQ(shim_cgroups.find(fence_root_), std::string::npos) << shim_cgroups;
    EXPECT_TRUE(leaf_gone());
}

// This test verifies that a fence that cannot be created keeps the attempt from starting, with
// an error naming the cgroup and the way out.
TEST_F(FencedLaunchTest, FenceThatCannotBeCreatedIsNotStarted) {
    LaunchRequest r = request({"sh", "-c", "echo ran"});
    r.fence = fence();
    r.fence->root = fence_root_ + "-never-prepared";
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_NE(record->error.find("cannot create the attempt's fence"), std::string::npos)
        << record->error;
    EXPECT_NE(record->error.find(fence_root_ + "-never-prepared"), std::string::npos)
        << record->error;
    EXPECT_NE(record->error.find("`fences: off`"), std::string::npos) << record->error;
    EXPECT_EQ(read_file(attempt_file(kStdoutFile)), "");
}

// This test verifies that a fenced command that cannot be executed is not started and leaves no
// leaf behind (the child had joined it before exec failed).
TEST_F(FencedLaunchTest, CommandThatCannotStartLeavesNoFence) {
    LaunchRequest r = request({"/nonexistent/command"});
    r.fence = fence();
    r.fence->pids_max = 10;
    auto record = run(r);
    ASSERT_TRUE(record);
    EXPECT_FALSE(record->started);
    EXPECT_NE(record->error.find("No such file or directory"), std::string::npos) << record->error;
    EXPECT_TRUE(leaf_gone());
}

// This test verifies the v2 path through the shim, in the controller-less cgroup2 of this
// machine: the task's leaf gets the BPF device filter (the denied node: EPERM; the other: no
// driver, ENXIO), and the leaf is removed at the end.
TEST_F(FencedLaunchTest, V2DeviceFilterThroughTheShim) {
    const std::string v2_root = "/sys/fs/cgroup/unified/" + fence_root_;
    ASSERT_EQ(::mkdir(v2_root.c_str(), 0755), 0) << v2_root << ": " << std::strerror(errno);
    const fs::path dev = root_ / "dev";
    fs::create_directories(dev);
    for (int minor : {0, 1}) {
        const std::string node = (dev / ("nvidia" + std::to_string(minor))).string();
        ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, ::makedev(195, minor)), 0)
            << node << ": " << std::strerror(errno);
    }
    // Prints how opening each node failed ("1 Operation not permitted").
    LaunchRequest r = request({"python3", "-c",
                               "import os, sys\n"
                               "for n in (0, 1):\n"
                               "    try:\n"
                               "        os.open(sys.argv[1] + '/nvidia%d' % n, os.O_RDONLY)\n"
                               "    except OSError as e:\n"
                               "        print(n, e.strerror)\n",
                               dev.string()});
    r.fence = FenceSpec{};
    r.fence->mode = CgroupMode::V2;
    r.fence->root = v2_root;
    r.fence->name = "task-1-1";
    r.fence->deny_devices = {DeviceNumber{'c', 195, 1}};
    auto record = run(r);
    const bool leaf_removed = !fs::exists(v2_root + "/task-1-1");
    ::rmdir(v2_root.c_str());
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    const std::string out = read_file(attempt_file(kStdoutFile));
    EXPECT_NE(out.find("0 No such device or address\n"), std::string::npos) << out;
    EXPECT_NE(out.find("1 Operation not permitted\n"), std::string::npos) << out;
    EXPECT_TRUE(leaf_removed);
}

}  // namespace
}  // namespace carma::exec
