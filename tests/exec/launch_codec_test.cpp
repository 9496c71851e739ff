// The pure parts of launching, without a shim: the JSON of request.json and exit.json, and how a
// pid file and an attempt directory's path are read.

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/launch.h"
#include "exec/launch_internal.h"

namespace carma::exec {
namespace {

// A request as the launcher writes it, with `field` replaced by `value` (raw JSON).
std::string request_with(const std::string& field, const std::string& value) {
    LaunchRequest r;
    r.argv = {"true"};
    r.workdir = "/";
    r.attempt_dir = "/tmp/attempt";
    auto text = request_to_json(r);
    EXPECT_TRUE(text);
    const std::string key = "\"" + field + "\": ";
    const auto at = text->find(key);
    EXPECT_NE(at, std::string::npos) << *text;
    const auto end = text->find_first_of(",\n", at + key.size());
    return text->substr(0, at + key.size()) + value + text->substr(end);
}

// This test verifies the on-disk formats read back what was written.
TEST(LaunchFormatTest, RoundTrips) {
    LaunchRequest r;
    r.argv = {"python3", "train.py", "--lr", "0.1"};
    r.workdir = "/home/u";
    r.env = {{"PATH", "/usr/bin"}, {"X", ""}};
    r.uid = 1001;
    r.gid = 100;
    r.groups = {100, 27};
    r.switch_user = true;
    r.attempt_dir = "/var/lib/carma/attempts/7-1";
    r.kill_grace_s = 2.5;
    r.files = {TaskFile{"/var/lib/carma/emulated-gpus", "CARMA_EMULATOR_FD"}};
    auto text = request_to_json(r);
    ASSERT_TRUE(text);
    auto back = request_from_json(*text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->argv, r.argv);
    EXPECT_EQ(back->env, r.env);
    EXPECT_EQ(back->groups, r.groups);
    EXPECT_EQ(back->uid, r.uid);
    EXPECT_TRUE(back->switch_user);
    EXPECT_EQ(back->kill_grace_s, 2.5);
    ASSERT_EQ(back->files.size(), 1u);
    EXPECT_EQ(back->files[0].path, "/var/lib/carma/emulated-gpus");
    EXPECT_EQ(back->files[0].env, "CARMA_EMULATOR_FD");
    EXPECT_FALSE(request_from_json("{\"argv\": 3}"));

    r.argv = {"\xff\xfe"};
    EXPECT_FALSE(request_to_json(r));  // JSON cannot carry it: refused, not mangled

    ExitRecord e{.started = true,
                 .exit_code = std::nullopt,
                 .signal = 9,
                 .cancel_requested = true,
                 .ended_at = 1.7e9,
                 .error = ""};
    auto exit_back = exit_from_json(exit_to_json(e));
    ASSERT_TRUE(exit_back);
    EXPECT_EQ(exit_back->signal, 9);
    EXPECT_FALSE(exit_back->exit_code);
    EXPECT_TRUE(exit_back->cancel_requested);
    EXPECT_EQ(exit_back->ended_at, 1.7e9);
}

TEST(LaunchCodecTest, RequestWithoutTaskFilesHasNone) {
    // Written by a daemon from before task files: no "files" at all.
    auto r = request_from_json(R"({"argv": ["true"], "workdir": "/", "env": [], "uid": 0,
                                   "gid": 0, "groups": [], "switch_user": false,
                                   "attempt_dir": "/tmp/a", "kill_grace_s": 0})");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->files.empty());
    EXPECT_EQ(r->kill_grace_s, 0);
}

TEST(LaunchCodecTest, RequestRefusesIdsAndNumbersOutOfRange) {
    ASSERT_TRUE(request_from_json(request_with("uid", "1001")));
    // (uid_t)-1 means "unchanged" to setuid(): never an id to run as.
    EXPECT_FALSE(request_from_json(request_with("uid", "4294967295")));
    EXPECT_FALSE(request_from_json(request_with("uid", "-1")));
    EXPECT_FALSE(request_from_json(request_with("gid", "1e300")));
    EXPECT_FALSE(request_from_json(request_with("gid", "1.5")));
    EXPECT_FALSE(request_from_json(request_with("groups", "[100, -1]")));
    EXPECT_FALSE(request_from_json(request_with("groups", "100")));
    EXPECT_FALSE(request_from_json(request_with("kill_grace_s", "-1")));
    EXPECT_FALSE(request_from_json(request_with("kill_grace_s", "\"10\"")));
    auto bad = request_from_json(request_with("uid", "-1"));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(bad.error().message.find("uid"), std::string::npos) << bad.error().message;
}

TEST(LaunchCodecTest, NotJsonIsRefusedWithWhatItWas) {
    auto r = request_from_json("{not json");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("the launch request is not JSON"), std::string::npos)
        << r.error().message;
    auto e = exit_from_json("");
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("exit.json is not JSON"), std::string::npos)
        << e.error().message;
}

TEST(LaunchCodecTest, ExitRecordReadsOptionalFieldsAsAbsent) {
    auto e = exit_from_json(R"({"started": false})");
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_FALSE(e->started);
    EXPECT_FALSE(e->exit_code);
    EXPECT_FALSE(e->signal);
    EXPECT_FALSE(e->cancel_requested);
    EXPECT_EQ(e->ended_at, 0);
    EXPECT_EQ(e->error, "");
    // Written before fences: no usage, no fence.
    EXPECT_FALSE(e->cpu_s);
    EXPECT_FALSE(e->max_rss_bytes);
    EXPECT_FALSE(e->memory_fence_hit);
    EXPECT_FALSE(e->memory_limit_bytes);
    EXPECT_EQ(e->fence_error, "");
    EXPECT_FALSE(exit_from_json(R"({"exit_code": 0})"));  // "started" is required
    EXPECT_FALSE(exit_from_json(R"({"started": true, "exit_code": 1e300})"));
    EXPECT_FALSE(exit_from_json(R"({"started": true, "signal": 2.5})"));
}

TEST(LaunchCodecTest, ExitRecordKeepsAnErrorInAnotherEncoding) {
    ExitRecord e;
    e.error = "cannot enter working directory /home/\xe9t\xe9";
    auto back = exit_from_json(exit_to_json(e));  // replaced, not thrown or lost
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_FALSE(back->started);
    EXPECT_EQ(back->error.rfind("cannot enter working directory /home/", 0), 0u) << back->error;

    e.error = "No such file or directory";
    e.exit_code = 3;
    back = exit_from_json(exit_to_json(e));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->error, "No such file or directory");
    EXPECT_EQ(back->exit_code, 3);
}

// A fence as the daemon asks for it: v1 root, the task's cores, 64 GiB, other GPUs denied.
FenceSpec sample_fence() {
    FenceSpec f;
    f.mode = CgroupMode::V1;
    f.root = "carma";
    f.name = "task-12-1";
    f.cpus = {0, 1, 8};
    f.memory_bytes = std::int64_t{64} << 30;
    f.pids_max = 4096;
    f.deny_devices = {DeviceNumber{'c', 195, 1}, DeviceNumber{'c', 195, 3}};
    return f;
}

// This test verifies that a request's fence is written into request.json and read back whole,
// and that a request without one (fences off, or an older daemon) has none.
TEST(LaunchCodecTest, RequestFenceRoundTrips) {
    LaunchRequest r;
    r.argv = {"true"};
    r.workdir = "/";
    r.attempt_dir = "/tmp/attempt";
    r.fence = sample_fence();
    auto text = request_to_json(r);
    ASSERT_TRUE(text);
    auto back = request_from_json(*text);
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_TRUE(back->fence);
    EXPECT_EQ(back->fence->mode, CgroupMode::V1);
    EXPECT_EQ(back->fence->root, "carma");
    EXPECT_EQ(back->fence->name, "task-12-1");
    EXPECT_EQ(back->fence->cpus, (std::vector<int>{0, 1, 8}));
    EXPECT_EQ(back->fence->memory_bytes, std::int64_t{64} << 30);
    EXPECT_EQ(back->fence->pids_max, 4096);
    ASSERT_EQ(back->fence->deny_devices.size(), 2u);
    EXPECT_EQ(back->fence->deny_devices[1].type, 'c');
    EXPECT_EQ(back->fence->deny_devices[1].major, 195);
    EXPECT_EQ(back->fence->deny_devices[1].minor, 3);

    r.fence->mode = CgroupMode::V2;
    r.fence->root = "/sys/fs/cgroup/system.slice/carma.service/tasks";
    r.fence->memory_bytes.reset();
    r.fence->pids_max.reset();
    back = request_from_json(*request_to_json(r));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->fence->mode, CgroupMode::V2);
    EXPECT_EQ(back->fence->root, "/sys/fs/cgroup/system.slice/carma.service/tasks");
    EXPECT_FALSE(back->fence->memory_bytes);
    EXPECT_FALSE(back->fence->pids_max);

    r.fence.reset();
    back = request_from_json(*request_to_json(r));
    ASSERT_TRUE(back);
    EXPECT_FALSE(back->fence);
    EXPECT_EQ(request_to_json(r)->find("fence"), std::string::npos);
}

// This test verifies that a fence a cgroup cannot be made of is refused when request.json is
// read, naming what is wrong.
TEST(LaunchCodecTest, RequestRefusesMalformedFences) {
    const auto with_fence = [](const std::string& fence) {
        return request_with("kill_grace_s", "10, \"fence\": " + fence);
    };
    const std::string good = R"({"mode": "v1", "root": "carma", "name": "task-1-1", "cpus": [0],)"
                             R"( "memory_bytes": 1048576, "pids_max": 10,)"
                             R"( "deny_devices": [{"type": "c", "major": 195, "minor": 1}]})";
    auto ok = request_from_json(with_fence(good));
    ASSERT_TRUE(ok) << ok.error().message;
    ASSERT_TRUE(ok->fence);
    EXPECT_EQ(ok->fence->deny_devices.size(), 1u);

    const char* const kBad[] = {
        R"({"mode": "none", "root": "carma", "name": "t"})",
        R"({"mode": "v3", "root": "carma", "name": "t"})",
        R"({"mode": "v1", "root": "carma", "name": "../t"})",
        R"({"mode": "v1", "root": "/abs", "name": "t"})",
        R"({"mode": "v2", "root": "relative", "name": "t"})",
        R"({"mode": "v1", "root": "carma", "name": "t", "cpus": [-1]})",
        R"({"mode": "v1", "root": "carma", "name": "t", "memory_bytes": 0})",
        R"({"mode": "v1", "root": "carma", "name": "t", "pids_max": 1e300})",
        R"({"mode": "v1", "root": "carma", "name": "t",)"
        R"( "deny_devices": [{"type": "x", "major": 1, "minor": 1}]})",
        R"({"mode": "v1", "root": "carma"})",
    };
    for (const char* bad : kBad) {
        auto r = request_from_json(with_fence(bad));
        ASSERT_FALSE(r) << bad;
        EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(r.error().message.find("malformed"), std::string::npos) << r.error().message;
    }
}

// This test verifies that what the task used and how its fence ended are written into
// exit.json and read back.
TEST(LaunchCodecTest, ExitRecordUsageRoundTrips) {
    ExitRecord e;
    e.started = true;
    e.signal = 9;
    e.cpu_s = 12.5;
    e.max_rss_bytes = std::int64_t{3} << 30;
    e.memory_fence_hit = true;
    e.memory_limit_bytes = std::int64_t{4} << 30;
    e.fence_error = "cannot remove cgroup /sys/fs/cgroup/memory/carma/t: Device or resource busy";
    auto back = exit_from_json(exit_to_json(e));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->cpu_s, 12.5);
    EXPECT_EQ(back->max_rss_bytes, std::int64_t{3} << 30);
    EXPECT_TRUE(back->memory_fence_hit);
    EXPECT_EQ(back->memory_limit_bytes, std::int64_t{4} << 30);
    EXPECT_EQ(back->fence_error, e.fence_error);
    EXPECT_FALSE(exit_from_json(R"({"started": true, "max_rss_bytes": -5})"));
}

TEST(LaunchFilesTest, PidFileIsDigitsAndNewline) {
    EXPECT_EQ(parse_pid("1234\n"), 1234);
    EXPECT_EQ(parse_pid("1234"), 1234);
    EXPECT_EQ(parse_pid("2147483647\n"), 2147483647);
    EXPECT_FALSE(parse_pid(""));
    EXPECT_FALSE(parse_pid("\n"));
    EXPECT_FALSE(parse_pid("0\n"));
    EXPECT_FALSE(parse_pid("1\n"));  // init: never a shim or a task group
    EXPECT_FALSE(parse_pid("-5\n"));
    EXPECT_FALSE(parse_pid("12 34\n"));
    EXPECT_FALSE(parse_pid("123x"));
    EXPECT_FALSE(parse_pid("2147483648\n"));
    EXPECT_FALSE(parse_pid("99999999999999999999\n"));
}

TEST(LaunchFilesTest, PathsAreNormalizedForTheShimsCommandLine) {
    EXPECT_EQ(normalized_path("/var/lib/carma/attempts/7-1"), "/var/lib/carma/attempts/7-1");
    EXPECT_EQ(normalized_path("/var/lib/carma/attempts/7-1/"), "/var/lib/carma/attempts/7-1");
    EXPECT_EQ(normalized_path("/var/lib/./carma/x/../attempts//7-1"),
              "/var/lib/carma/attempts/7-1");
    EXPECT_EQ(normalized_path("/"), "/");
    char cwd[4096];
    ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
    EXPECT_EQ(normalized_path("a/b/.."), normalized_path(std::string(cwd) + "/a"));
}

}  // namespace
}  // namespace carma::exec
