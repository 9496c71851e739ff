// Fences against the real kernel: the tests need root and a cgroup v1 machine with an empty
// cgroup2 mounted at /sys/fs/cgroup/unified (the BPF device filter is tried there). A test that
// cannot get what it needs fails and says why; none is skipped. Every test uses roots of its own
// ("carma-test-<pid>-<n>") and removes them, also when it fails.

#include "exec/cgroup.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace carma::exec {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMiB = 1024 * 1024;
const std::string kUnified = "/sys/fs/cgroup/unified";

std::string unique_name() {
    static int counter = 0;
    return fmt::format("carma-test-{}-{}", ::getpid(), counter++);
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// What a forked child wrote on its pipe, and how it ended.
struct ChildResult {
    int status = 0;
    std::string out;
};

void write_all(int fd, const std::string& text) {
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n <= 0) {
            return;
        }
        done += static_cast<std::size_t>(n);
    }
}

// Forks a child that joins `spec` and runs `body`, whose text comes back on a pipe. The child
// exits 90 when it cannot join (the reason on the pipe); no gtest in the child.
ChildResult run_fenced(const FenceSpec& spec, const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) {
        return {-1, fmt::format("pipe: {}", std::strerror(errno))};
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        if (auto ok = join_fence(spec); !ok) {
            write_all(fds[1], "join failed: " + ok.error().message);
            ::_exit(90);
        }
        write_all(fds[1], body());
        ::_exit(0);
    }
    ::close(fds[1]);
    ChildResult r;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);) {
        if (n > 0) {
            r.out.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fds[0]);
    while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
    return r;
}

// Forks a child that drops to uid/gid 65534 (nobody) and runs `body`; exits 91 when it cannot.
ChildResult run_fenced_as_nobody(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) {
        return {-1, fmt::format("pipe: {}", std::strerror(errno))};
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
            write_all(fds[1], fmt::format("cannot become nobody: {}", std::strerror(errno)));
            ::_exit(91);
        }
        write_all(fds[1], body());
        ::_exit(0);
    }
    ::close(fds[1]);
    ChildResult r;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
        r.out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    ::waitpid(pid, &r.status, 0);
    return r;
}

std::string exited_with(const ChildResult& r) {
    if (WIFEXITED(r.status)) {
        return fmt::format("exit {} ({})", WEXITSTATUS(r.status), r.out);
    }
    if (WIFSIGNALED(r.status)) {
        return fmt::format("signal {} ({})", WTERMSIG(r.status), r.out);
    }
    return "?";
}

std::string affinity() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) {
        return fmt::format("sched_getaffinity: {}", std::strerror(errno));
    }
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) {
            cpus.push_back(c);
        }
    }
    return cpu_list(cpus);
}

// Opens a device file and says how it went: "ok" or the errno's name.
std::string open_result(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ::close(fd);
        return "ok";
    }
    const int err = errno;
    switch (err) {
        case EPERM:
            return "EPERM";
        case ENXIO:
            return "ENXIO";
        case ENODEV:
            return "ENODEV";
        case EACCES:
            return "EACCES";
        default:
            return std::strerror(err);
    }
}

// Spins until this process has used `seconds` of CPU time.
void spin_cpu(double seconds) {
    for (;;) {
        timespec t{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9 >= seconds) {
            return;
        }
    }
}

// Two character devices like /dev/nvidia0 and /dev/nvidia1 (major 195) in a temporary
// directory; nothing drives major 195 here, so an allowed open fails with ENXIO, not EPERM.
class FakeGpuNodes {
  public:
    FakeGpuNodes() {
        char pattern[] = "/tmp/carma-cgroup-dev-XXXXXX";
        if (::mkdtemp(pattern) == nullptr) {
            error_ = fmt::format("mkdtemp: {}", std::strerror(errno));
            return;
        }
        dir_ = pattern;
        for (int minor : {0, 1}) {
            const std::string path = node(minor);
            if (::mknod(path.c_str(), S_IFCHR | 0666, ::makedev(195, minor)) != 0) {
                error_ = fmt::format(
                    "mknod {} c 195 {}: {} (needs root and a file system "
                    "without nodev)",
                    path, minor, std::strerror(errno));
                return;
            }
        }
    }
    ~FakeGpuNodes() {
        std::error_code ec;
        if (!dir_.empty()) {
            fs::remove_all(dir_, ec);
        }
    }
    std::string node(int minor) const { return fmt::format("{}/nvidia{}", dir_, minor); }
    const std::string& error() const { return error_; }

  private:
    std::string dir_;
    std::string error_;
};

// --- detection and pure checks ----------------------------------------------------------------

// This test verifies that this machine (v1 controllers under /sys/fs/cgroup) is detected as v1,
// and that what is missing is said for a cgroup2 mount without controllers and for a directory
// that is no cgroup mount at all.
TEST(CgroupDetectTest, ThisMachineIsV1AndMissingControllersAreNamed) {
    const CgroupSupport here = detect_cgroups();
    EXPECT_EQ(here.mode, CgroupMode::V1) << here.detail;
    EXPECT_NE(here.detail.find("memory at /sys/fs/cgroup/memory"), std::string::npos)
        << here.detail;

    const CgroupSupport unified = detect_cgroups(kUnified);
    EXPECT_EQ(unified.mode, CgroupMode::None);
    EXPECT_EQ(unified.detail,
              "no cpuset, memory, pids controller in /sys/fs/cgroup/unified/cgroup.controllers");

    const CgroupSupport tmp = detect_cgroups("/tmp");
    EXPECT_EQ(tmp.mode, CgroupMode::None);
    EXPECT_NE(tmp.detail.find("no v1 hierarchy of cpuset, memory, pids, devices, cpuacct"),
              std::string::npos)
        << tmp.detail;
}

// This test verifies the cpu list format and that malformed specs are refused before the kernel
// is touched.
TEST(CgroupSpecTest, CpuListsAndMalformedSpecs) {
    EXPECT_EQ(cpu_list({3, 0, 1, 2, 8, 8}), "0-3,8");
    EXPECT_EQ(cpu_list({5}), "5");
    EXPECT_EQ(cpu_list({}), "");
    EXPECT_EQ(to_string(CgroupMode::V2), "v2");
    EXPECT_EQ(cgroup_mode_from_string("v1"), CgroupMode::V1);

    FenceSpec ok{.mode = CgroupMode::V1, .root = "carma", .name = "task-1-1"};
    EXPECT_EQ(fence_spec_problem(ok), "");
    FenceSpec bad = ok;
    bad.name = "../escape";
    EXPECT_NE(fence_spec_problem(bad), "");
    bad = ok;
    bad.root = "/sys/fs/cgroup/carma";  // v1 roots are relative to each controller's mount
    EXPECT_NE(fence_spec_problem(bad), "");
    bad = ok;
    bad.mode = CgroupMode::V2;  // v2 roots are absolute
    EXPECT_NE(fence_spec_problem(bad), "");
    bad = ok;
    bad.root = "carma/../..";
    EXPECT_NE(fence_spec_problem(bad), "");
    bad = ok;
    bad.mode = CgroupMode::None;
    auto refused = create_fence(bad);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

// --- v1, against this machine's hierarchies ----------------------------------------------------

class V1FenceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = unique_name();
        auto ok = prepare_fence_root(CgroupMode::V1, root_);
        ASSERT_TRUE(ok) << "prepare_fence_root: " << ok.error().message;
        // Idempotent: the daemon calls it at every start.
        auto again = prepare_fence_root(CgroupMode::V1, root_);
        ASSERT_TRUE(again) << again.error().message;
    }
    void TearDown() override {
        for (const std::string& name : names_) {
            FenceSpec s = spec(name);
            auto ok = remove_fence(s);
            EXPECT_TRUE(ok) << ok.error().message;
        }
        auto ok = remove_fence_root(CgroupMode::V1, root_);
        EXPECT_TRUE(ok) << ok.error().message;
        for (std::string_view c : {"cpuset", "memory", "pids", "devices", "cpuacct"}) {
            EXPECT_FALSE(fs::exists(fmt::format("/sys/fs/cgroup/{}/{}", c, root_)));
        }
    }

    FenceSpec spec(const std::string& name = "leaf") {
        if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
            names_.push_back(name);
        }
        return FenceSpec{.mode = CgroupMode::V1, .root = root_, .name = name};
    }

    // Creates the leaf; the test fails with the reason when it cannot.
    ::testing::AssertionResult create(const FenceSpec& s) {
        auto ok = create_fence(s);
        if (!ok) {
            return ::testing::AssertionFailure() << "create_fence: " << ok.error().message;
        }
        return ::testing::AssertionSuccess();
    }

    std::string root_;
    std::vector<std::string> names_;
};

// This test verifies that the root gets its parent's cpus and mems at every level, so that
// leaves can hold processes.
TEST_F(V1FenceTest, RootInheritsTheCpusetOfItsParent) {
    EXPECT_EQ(read_text("/sys/fs/cgroup/cpuset/" + root_ + "/cpuset.cpus"),
              read_text("/sys/fs/cgroup/cpuset/cpuset.cpus"));
    EXPECT_EQ(read_text("/sys/fs/cgroup/cpuset/" + root_ + "/cpuset.mems"),
              read_text("/sys/fs/cgroup/cpuset/cpuset.mems"));
}

// This test verifies that a task fenced to cpu 0 runs on cpu 0 only and cannot widen its
// affinity: v1 cpuset intersects the mask asked for with the cpuset's, so sched_setaffinity to
// {0,1} succeeds and the mask read back is still {0}.
TEST_F(V1FenceTest, CpusetConfinesTheTask) {
    FenceSpec s = spec();
    s.cpus = {0};
    ASSERT_TRUE(create(s));
    EXPECT_EQ(read_text(fence_leaf_path(s, "cpuset") + "/cpuset.cpus"), "0\n");
    const ChildResult r = run_fenced(s, [] {
        const std::string before = affinity();
        cpu_set_t both;
        CPU_ZERO(&both);
        CPU_SET(0, &both);
        CPU_SET(1, &both);
        const int rc = ::sched_setaffinity(0, sizeof both, &both);
        const int err = rc == 0 ? 0 : errno;
        return fmt::format("before={} set={} errno={} after={}", before, rc, err, affinity());
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    EXPECT_EQ(r.out, "before=0 set=0 errno=0 after=0");
}

// This test verifies the memory limit: a child that touches 600 MiB in a 128 MiB fence (swap
// limited to the same) is killed by the kernel with SIGKILL, the parent lives on, and the fence's
// counters show the kill, a peak near the limit and the limit itself.
TEST_F(V1FenceTest, MemoryLimitKillsTheTaskAndIsCounted) {
    FenceSpec s = spec();
    s.memory_bytes = 128 * kMiB;
    ASSERT_TRUE(create(s));
    const std::string leaf = fence_leaf_path(s, "memory");
    EXPECT_EQ(read_text(leaf + "/memory.limit_in_bytes"), fmt::format("{}\n", 128 * kMiB));
    EXPECT_EQ(read_text(leaf + "/memory.memsw.limit_in_bytes"), fmt::format("{}\n", 128 * kMiB));
    const ChildResult r = run_fenced(s, [] {
        const std::size_t size = 600 * kMiB;
        char* p = static_cast<char*>(std::malloc(size));
        if (p == nullptr) {
            return std::string("malloc failed");
        }
        const long page = ::sysconf(_SC_PAGESIZE);
        for (std::size_t at = 0; at < size; at += static_cast<std::size_t>(page)) {
            std::memset(p + at, 1, static_cast<std::size_t>(page));
        }
        return std::string("survived");
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << exited_with(r);
    EXPECT_EQ(WTERMSIG(r.status), SIGKILL);
    const FenceUsage u = read_fence_usage(s);
    EXPECT_GT(u.oom_kills, 0);
    ASSERT_TRUE(u.peak_bytes);
    EXPECT_GE(*u.peak_bytes, 100 * kMiB);
    EXPECT_LE(*u.peak_bytes, 128 * kMiB);
    EXPECT_EQ(u.memory_limit_bytes, 128 * kMiB);
}

// This test verifies the pids limit: with pids.max 5 a child (one process) forks 4 more and
// the fifth fork fails with EAGAIN.
TEST_F(V1FenceTest, PidsLimitStopsForks) {
    FenceSpec s = spec();
    s.pids_max = 5;
    ASSERT_TRUE(create(s));
    const ChildResult r = run_fenced(s, [] {
        std::vector<pid_t> kids;
        int err = 0;
        for (int i = 0; i < 20; ++i) {
            const pid_t kid = ::fork();
            if (kid == 0) {
                ::pause();
                ::_exit(0);
            }
            if (kid < 0) {
                err = errno;
                break;
            }
            kids.push_back(kid);
        }
        for (pid_t kid : kids) {
            ::kill(kid, SIGKILL);
            ::waitpid(kid, nullptr, 0);
        }
        return fmt::format("forked={} errno={}", kids.size(),
                           err == EAGAIN ? "EAGAIN" : std::to_string(err));
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    EXPECT_EQ(r.out, "forked=4 errno=EAGAIN");
}

// This test verifies the v1 device filter: fenced with 195:1 denied, the child gets EPERM
// opening the denied node (and making one), and ENXIO (no driver here) opening the allowed
// one, the same as an unfenced process gets for both.
TEST_F(V1FenceTest, DeniedDeviceCannotBeOpened) {
    FakeGpuNodes nodes;
    ASSERT_EQ(nodes.error(), "");
    ASSERT_EQ(open_result(nodes.node(0)), "ENXIO");  // outside the fence: no driver, no refusal
    ASSERT_EQ(open_result(nodes.node(1)), "ENXIO");
    FenceSpec s = spec();
    s.deny_devices = {DeviceNumber{'c', 195, 1}};
    ASSERT_TRUE(create(s));
    const std::string made = nodes.node(0) + "-copy";
    const ChildResult r = run_fenced(s, [&] {
        const int mk = ::mknod(made.c_str(), S_IFCHR | 0600, ::makedev(195, 1));
        return fmt::format("gpu0={} gpu1={} mknod={}", open_result(nodes.node(0)),
                           open_result(nodes.node(1)), mk == 0 ? "ok" : std::strerror(errno));
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    EXPECT_EQ(r.out, fmt::format("gpu0=ENXIO gpu1=EPERM mknod={}", std::strerror(EPERM)));
}

// This test verifies that the CPU time of the fence is read: a child spinning 0.3 s of CPU
// shows more than 0.1 s.
TEST_F(V1FenceTest, CpuTimeIsRead) {
    FenceSpec s = spec();
    ASSERT_TRUE(create(s));
    const ChildResult r = run_fenced(s, [] {
        spin_cpu(0.3);
        return std::string("spun");
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    const FenceUsage u = read_fence_usage(s);
    ASSERT_TRUE(u.cpu_s);
    EXPECT_GT(*u.cpu_s, 0.1);
    EXPECT_LT(*u.cpu_s, 30.0);
    EXPECT_FALSE(u.memory_limit_bytes);  // no limit asked for: none reported
    EXPECT_EQ(u.oom_kills, 0);
}

// This test verifies that remove_fence kills a process still in the leaf and removes the leaf
// from every hierarchy.
TEST_F(V1FenceTest, RemoveKillsAStragglerAndRemovesTheLeaf) {
    FenceSpec s = spec();
    ASSERT_TRUE(create(s));
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(ready[0]);
        const char byte = join_fence(s) ? 'y' : 'n';
        write_all(ready[1], std::string(1, byte));
        for (;;) {
            ::pause();
        }
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(byte, 'y');
    EXPECT_NE(read_text(fence_leaf_path(s, "memory") + "/cgroup.procs"), "");
    auto removed = remove_fence(s);
    EXPECT_TRUE(removed) << removed.error().message;
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    for (std::string_view c : {"cpuset", "memory", "pids", "devices", "cpuacct"}) {
        EXPECT_FALSE(fs::exists(fence_leaf_path(s, c))) << c;
    }
}

// This test verifies that a leaf holding a process is not taken over (Conflict), while an empty
// one left behind is made anew.
TEST_F(V1FenceTest, LeftoverLeafIsReusedOnlyWhenEmpty) {
    FenceSpec s = spec();
    s.pids_max = 7;
    ASSERT_TRUE(create(s));
    s.pids_max = 9;
    ASSERT_TRUE(create(s));  // empty: made anew with the new limit
    EXPECT_EQ(read_text(fence_leaf_path(s, "pids") + "/pids.max"), "9\n");
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!join_fence(s)) {
            ::_exit(1);
        }
        ::pause();
        ::_exit(0);
    }
    bool joined = false;
    for (int i = 0; i < 500 && !joined; ++i) {
        joined = read_text(fence_leaf_path(s, "pids") + "/cgroup.procs") != "";
        ::usleep(10000);
    }
    ASSERT_TRUE(joined);
    auto again = create_fence(s);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, ErrorCode::Conflict);
    EXPECT_NE(again.error().message.find(fence_leaf_path(s, "cpuset")), std::string::npos)
        << again.error().message;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

// This test verifies that errors name the file written and the errno text: a cpu the root does
// not have, and a root that was never prepared (with the hint to turn fences off).
TEST_F(V1FenceTest, ErrorsNameTheFileAndTheErrno) {
    FenceSpec s = spec();
    s.cpus = {1023};
    auto bad_cpu = create_fence(s);
    ASSERT_FALSE(bad_cpu);
    EXPECT_NE(bad_cpu.error().message.find(fence_leaf_path(s, "cpuset") + "/cpuset.cpus"),
              std::string::npos)
        << bad_cpu.error().message;
    // Beyond the machine's cpus the kernel says ERANGE (a cpu it has, outside the root: EINVAL).
    EXPECT_NE(bad_cpu.error().message.find(std::strerror(ERANGE)), std::string::npos)
        << bad_cpu.error().message;
    EXPECT_NE(bad_cpu.error().message.find("does not have"), std::string::npos)
        << bad_cpu.error().message;
    EXPECT_FALSE(fs::exists(fence_leaf_path(s, "cpuset")));  // no half fence left behind

    FenceSpec unprepared{.mode = CgroupMode::V1, .root = unique_name(), .name = "leaf"};
    auto missing = create_fence(unprepared);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos)
        << missing.error().message;
    EXPECT_NE(missing.error().message.find("`fences: off`"), std::string::npos);
}

// This test verifies the message a daemon not running as root gets: the cgroup it could not
// create, the errno text and the way out.
TEST_F(V1FenceTest, WithoutRootTheErrorSaysRunAsRootOrTurnFencesOff) {
    const FenceSpec s = spec();
    const ChildResult r = run_fenced_as_nobody([&] {
        auto ok = create_fence(s);
        return ok ? std::string("created") : ok.error().message;
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    EXPECT_EQ(r.out, fmt::format("cannot create cgroup {}: {}; run the daemon as root, or set "
                                 "`fences: off`",
                                 fence_leaf_path(s, "cpuset"), std::strerror(EACCES)));
}

// --- v2, in the controller-less cgroup2 at /sys/fs/cgroup/unified -----------------------------

class UnifiedFenceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        struct statfs st {};
        ASSERT_EQ(::statfs(kUnified.c_str(), &st), 0)
            << kUnified << ": " << std::strerror(errno)
            << " (these tests need the cgroup2 mount of a hybrid v1 machine)";
        ASSERT_EQ(st.f_type, static_cast<decltype(st.f_type)>(CGROUP2_SUPER_MAGIC))
            << kUnified << " is not a cgroup2 mount";
        name_ = unique_name();
        root_ = kUnified + "/" + name_;
        // Not prepare_fence_root: it wants cpuset, memory and pids, which this mount cannot
        // offer (they are bound to the v1 hierarchies); a device filter needs no controller.
        ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0) << root_ << ": " << std::strerror(errno);
    }
    void TearDown() override {
        auto ok = remove_fence(spec());
        EXPECT_TRUE(ok) << ok.error().message;
        ::rmdir((root_ + "/daemon").c_str());
        auto root = remove_fence_root(CgroupMode::V2, root_);
        EXPECT_TRUE(root) << root.error().message;
        EXPECT_FALSE(fs::exists(root_));
    }
    FenceSpec spec() const {
        return FenceSpec{.mode = CgroupMode::V2, .root = root_, .name = "leaf"};
    }

    std::string name_;
    std::string root_;
};

// This test verifies the v2 device filter: a BPF_PROG_TYPE_CGROUP_DEVICE program denying 195:1,
// attached to a leaf of the unified hierarchy, makes a child in that leaf get EPERM for the
// denied node and ENXIO for the other; the v1 devices cgroup of the child allows both.
TEST_F(UnifiedFenceTest, BpfDeviceProgramDeniesTheListedDevice) {
    FakeGpuNodes nodes;
    ASSERT_EQ(nodes.error(), "");
    FenceSpec s = spec();
    s.deny_devices = {DeviceNumber{'c', 195, 1}, DeviceNumber{'c', 195, 7}};
    auto ok = create_fence(s);
    ASSERT_TRUE(ok) << "create_fence: " << ok.error().message;
    const ChildResult r = run_fenced(s, [&] {
        std::string cgroup;
        std::istringstream lines(read_text("/proc/self/cgroup"));
        for (std::string line; std::getline(lines, line);) {
            if (line.starts_with("0::")) {
                cgroup = line.substr(3);
            }
        }
        return fmt::format("cgroup={} gpu0={} gpu1={}", cgroup, open_result(nodes.node(0)),
                           open_result(nodes.node(1)));
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    EXPECT_EQ(r.out, fmt::format("cgroup=/{}/leaf gpu0=ENXIO gpu1=EPERM", name_));
    EXPECT_EQ(open_result(nodes.node(1)), "ENXIO");  // the parent is not fenced
}

// This test verifies v2's cpu.stat reading and remove_fence's cgroup.kill: a spinning child's
// CPU time is read, then a straggler is killed and the leaf removed.
TEST_F(UnifiedFenceTest, CpuTimeAndRemovalWithAStraggler) {
    FenceSpec s = spec();
    auto ok = create_fence(s);
    ASSERT_TRUE(ok) << ok.error().message;
    const ChildResult r = run_fenced(s, [] {
        spin_cpu(0.3);
        return std::string("spun");
    });
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << exited_with(r);
    const FenceUsage u = read_fence_usage(s);
    ASSERT_TRUE(u.cpu_s);
    EXPECT_GT(*u.cpu_s, 0.1);

    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!join_fence(s)) {
            ::_exit(1);
        }
        for (;;) {
            ::pause();
        }
    }
    bool joined = false;
    for (int i = 0; i < 500 && !joined; ++i) {
        joined = read_text(root_ + "/leaf/cgroup.procs") != "";
        ::usleep(10000);
    }
    ASSERT_TRUE(joined);
    auto removed = remove_fence(s);
    EXPECT_TRUE(removed) << removed.error().message;
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    EXPECT_FALSE(fs::exists(root_ + "/leaf"));
}

// This test verifies what prepare_fence_root says on a cgroup2 mount that offers none of the
// controllers a fence needs, and that it then creates nothing.
TEST_F(UnifiedFenceTest, PrepareSaysWhichControllerIsMissing) {
    const std::string root = kUnified + "/" + unique_name();
    auto ok = prepare_fence_root(CgroupMode::V2, root);
    ASSERT_FALSE(ok);
    EXPECT_NE(ok.error().message.find(
                  "no cpuset controller in /sys/fs/cgroup/unified/cgroup.controllers"),
              std::string::npos)
        << ok.error().message;
    EXPECT_FALSE(fs::exists(root));
}

// This test verifies move_self_to_leaf: the calling process (here a child) ends up in the leaf.
TEST_F(UnifiedFenceTest, MoveSelfToLeaf) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        auto ok = move_self_to_leaf(root_, "daemon");
        write_all(fds[1], ok ? read_text("/proc/self/cgroup") : ok.error().message);
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    EXPECT_NE(out.find(fmt::format("0::/{}/daemon\n", name_)), std::string::npos) << out;
}

}  // namespace
}  // namespace carma::exec
