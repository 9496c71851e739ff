// Cores and host memory as request dimensions (core/host.h) and Scheduler::step packing them
// beside the GPUs, under the paper's policies and carma alike.

#include "core/host.h"

#include <gtest/gtest.h>

#include "builders.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;

Scheduler make(const char* policy) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy(policy);
    return Scheduler(cfg);
}

HostView host(int cpus_free, MiB mem_free, int cpus_total = 32, MiB mem_total = 256 * 1024,
              std::string node = "") {
    return HostView{std::move(node), cpus_total, cpus_free, mem_total, mem_free};
}

std::vector<TaskId> placed(const StepResult& r) {
    std::vector<TaskId> ids;
    for (const Placement& p : r.placed) {
        ids.push_back(p.task);
    }
    return ids;
}

// This test verifies the shortfall names the dimension and what is free, cores before memory.
TEST(HostTest, ShortfallNamesTheDimension) {
    EXPECT_EQ(host_shortfall(MakeTask().Host(8, 0), host(6, 1024)), "8 cores: 6 of 32 free");
    EXPECT_EQ(host_shortfall(MakeTask().Host(1, 0), host(0, 1024)), "1 core: 0 of 32 free");
    EXPECT_EQ(host_shortfall(MakeTask().Host(2, 65536), host(6, 20480)),
              "65,536 MiB of host memory: 20,480 MiB of 262,144 MiB free");
    EXPECT_EQ(host_shortfall(MakeTask().Host(2, 1024), host(6, 20480)), "");
    EXPECT_EQ(host_shortfall(MakeTask().Host(4, 0), host(1, 0, 4, 0, "n2")),
              "4 cores: 1 of 4 free on n2");
}

// This test verifies that a task asking for more cores or host memory than any node has is
// refused with the limit and the flag to change, and that no hosts means no limit.
TEST(HostTest, FeasibilityNamesTheLimit) {
    const std::vector<HostView> one = {host(32, 1024)};
    auto r = check_host_feasible(MakeTask("big").Host(64, 0), summarize_hosts(one));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::Infeasible);
    EXPECT_NE(r.error().message.find("asks for 64 cores but this server has 32"),
              std::string::npos);
    EXPECT_NE(r.error().message.find("-c 32"), std::string::npos);
    auto m = check_host_feasible(MakeTask("fat").Host(1, 300 * 1024), summarize_hosts(one));
    ASSERT_FALSE(m);
    EXPECT_NE(m.error().message.find("--mem"), std::string::npos);
    EXPECT_TRUE(check_host_feasible(MakeTask().Host(64, 0), summarize_hosts({})));
}

// This test verifies the cpu list syntax both ways and that a wrong part is named.
TEST(HostTest, CpuLists) {
    EXPECT_EQ(*parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ(*parse_cpu_list(" 5 \n"), std::vector<int>{5});
    EXPECT_TRUE(parse_cpu_list("")->empty());
    auto bad = parse_cpu_list("0-3,x");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("'x'"), std::string::npos);
    EXPECT_FALSE(parse_cpu_list("3-1"));
    const std::vector<int> cpus = {0, 1, 2, 3, 8, 10, 11};
    EXPECT_EQ(format_cpu_list(cpus), "0-3,8,10-11");
    EXPECT_EQ(pick_cores(cpus, {0, 2}, 3), (std::vector<int>{1, 3, 8}));
    EXPECT_EQ(pick_cores(cpus, {0, 1, 2, 3, 8, 10}, 3), std::vector<int>{11});
}

// This test verifies that a CPU-only task starts while every GPU is busy, holds no GPU, takes
// its cores from the round, and that one that does not fit waits naming the cores.
TEST(HostTest, CpuOnlyTaskNeverWaitsForAGpu) {
    for (const char* policy : {"exclusive", "oracle-MAGM", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("prep").Gpus(0).Host(4, 1024));
        s.enqueue(2, MakeTask("prep2").Gpus(0).Host(4, 1024));
        s.enqueue(3, MakeTask("prep3").Gpus(0).Host(4, 1024));
        const std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(1000)};
        const std::vector<HostView> hosts = {host(10, 64 * 1024)};
        StepResult r = s.step(gpus, hosts, 0);
        ASSERT_EQ(placed(r), (std::vector<TaskId>{1, 2})) << policy;
        EXPECT_TRUE(r.placed[0].gpus.empty()) << policy;
        ASSERT_TRUE(r.pending_task) << policy;
        EXPECT_EQ(*r.pending_task, 3) << policy;
        EXPECT_NE(r.pending_reason.find("4 cores: 2 of 32 free"), std::string::npos)
            << policy << ": " << r.pending_reason;
    }
}

// This test verifies that a GPU task waits for its cores though an idle GPU is there, naming
// the cores, and takes the GPU once the cores are free.
TEST(HostTest, GpuTaskWaitsForItsCores) {
    for (const char* policy : {"exclusive", "oracle-MAGM", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("train").Profiled(1000).Knows(1000, 60).Host(8, 1024));
        const std::vector<GpuView> gpus = {MakeGpu(0)};
        StepResult r = s.step(gpus, std::vector<HostView>{host(6, 64 * 1024)}, 0);
        EXPECT_TRUE(r.placed.empty()) << policy;
        EXPECT_NE(r.pending_reason.find("waits for 8 cores: 6 of 32 free"), std::string::npos)
            << policy << ": " << r.pending_reason;
        r = s.step(gpus, std::vector<HostView>{host(8, 64 * 1024)}, 1);
        ASSERT_EQ(placed(r), std::vector<TaskId>{1}) << policy;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{0});
    }
}

// This test verifies that the round's placements take host memory: the second of two tasks that
// each fit alone waits for memory, while GPUs are free.
TEST(HostTest, HostMemoryIsPackedWithinARound) {
    for (const char* policy : {"exclusive", "oracle-MAGM", "carma-nobackfill"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("a").Profiled(1000).Knows(1000, 60).Host(1, 40 * 1024));
        s.enqueue(2, MakeTask("b").Profiled(1000).Knows(1000, 60).Host(1, 40 * 1024));
        const std::vector<GpuView> gpus = {MakeGpu(0), MakeGpu(1)};
        StepResult r = s.step(gpus, std::vector<HostView>{host(32, 64 * 1024)}, 0);
        ASSERT_EQ(placed(r), std::vector<TaskId>{1}) << policy;
        EXPECT_NE(r.pending_reason.find("of host memory: 24,576 MiB of 262,144 MiB free"),
                  std::string::npos)
            << policy << ": " << r.pending_reason;
    }
}

// This test verifies that a task asking more cores than the server has is rejected at once,
// with the limit named.
TEST(HostTest, MoreCoresThanTheServerIsRejected) {
    Scheduler s = make("carma");
    s.enqueue(1, MakeTask("huge").Gpus(0).Host(64, 0));
    StepResult r = s.step({}, std::vector<HostView>{host(32, 1024)}, 0);
    ASSERT_EQ(r.rejected.size(), 1u);
    EXPECT_NE(r.rejected[0].reason.find("64 cores"), std::string::npos);
    EXPECT_TRUE(s.idle());
}

// This test verifies that behind a carma head waiting for cores, smaller tasks do not take the
// cores it waits for (it would starve), but may use what it leaves.
TEST(HostTest, BackfillLeavesTheHeadItsCores) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma-fifo");
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("wide").Gpus(0).Host(8, 1024));
    s.enqueue(2, MakeTask("narrow").Gpus(0).Host(2, 1024));
    // 6 free: the head waits for 8, and the narrow one behind it would take 2 of the 6.
    StepResult r = s.step({}, std::vector<HostView>{host(6, 64 * 1024)}, 0);
    EXPECT_TRUE(r.placed.empty());
    ASSERT_TRUE(r.pending_task);
    EXPECT_EQ(*r.pending_task, 1);
    // 10 free: the head takes 8, the narrow one the 2 left.
    r = s.step({}, std::vector<HostView>{host(10, 64 * 1024)}, 1);
    EXPECT_EQ(placed(r), (std::vector<TaskId>{1, 2}));
}

// This test verifies that a GPU head waiting for GPUs keeps its cores: a CPU-only task behind it
// takes only what leaves the head's share.
TEST(HostTest, CpuOnlyBackfillAroundAGpuHead) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma-fifo");
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("gpu").Knows(30000, 600).Host(4, 1024));
    s.enqueue(2, MakeTask("prep").Gpus(0).Host(4, 1024));
    s.enqueue(3, MakeTask("prep2").Gpus(0).Host(4, 1024));
    const std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(2000)};
    // 10 free: the head keeps 4 of them, so one 4-core task backfills and the other waits.
    StepResult r = s.step(gpus, std::vector<HostView>{host(10, 64 * 1024)}, 0);
    EXPECT_EQ(placed(r), std::vector<TaskId>{2});
    ASSERT_TRUE(r.pending_task);
    EXPECT_EQ(*r.pending_task, 1);
}

// This test verifies that on several nodes a GPU task takes GPUs only on a node with room for
// its cores, and its placement names that node.
TEST(HostTest, GpusOnlyWhereTheNodeHasCores) {
    for (const char* policy : {"exclusive", "oracle-MAGM", "carma"}) {
        Scheduler s = make(policy);
        s.enqueue(1, MakeTask("t").Profiled(1000).Knows(1000, 60).Host(4, 1024));
        std::vector<GpuView> gpus = {MakeGpu(0), MakeGpu(1)};
        gpus[0].node = "a";
        gpus[1].node = "b";
        const std::vector<HostView> hosts = {host(2, 8192, 8, 8192, "a"),
                                             host(8, 8192, 8, 8192, "b")};
        StepResult r = s.step(gpus, hosts, 0);
        ASSERT_EQ(placed(r), std::vector<TaskId>{1}) << policy;
        EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1}) << policy;
        EXPECT_EQ(r.placed[0].node, "b") << policy;
    }
}

// This test verifies that tasks asking for no host resource (the simulator's old traces) are
// placed as before when hosts are given, and that no hosts means no host limit.
TEST(HostTest, TasksAskingNothingAreUnaffected) {
    Scheduler s = make("carma");
    s.enqueue(1, MakeTask("a").Knows(1000, 60));
    s.enqueue(2, MakeTask("b").Gpus(0).Host(100, 0));
    StepResult r = s.step(std::vector<GpuView>{MakeGpu(0)}, std::vector<HostView>{host(0, 0)}, 0);
    EXPECT_EQ(placed(r), std::vector<TaskId>{1});
    EXPECT_EQ(r.rejected.size(), 1u);  // 100 cores on a 32-core server
    Scheduler u = make("carma");
    u.enqueue(3, MakeTask("c").Gpus(0).Host(100, 0));
    r = u.step(std::vector<GpuView>{MakeGpu(0)}, 0);
    EXPECT_EQ(placed(r), std::vector<TaskId>{3});
}

}  // namespace
}  // namespace carma
