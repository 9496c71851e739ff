// Processes CARMA did not start (daemon/foreign.h): which of a sample's processes are foreign,
// and when they have grown into memory planned for a task.

#include <unistd.h>

#include <gtest/gtest.h>

#include "daemon/foreign.h"

namespace carma::daemon {
namespace {

device::GpuSample sample_with(std::vector<device::GpuProcess> processes) {
    device::GpuSample s;
    s.processes = std::move(processes);
    return s;
}

// This test verifies that a task's processes and MPS servers are never foreign, the rest are, in
// pid order, with their memory and activity.
TEST(ForeignTest, EverythingButOursAndMpsServers) {
    const auto s = sample_with({{30, 100, false, 0.2}, {10, 4000, false, std::nullopt},
                                {20, 300, true, std::nullopt}, {40, 50, false, 0.1}});
    const std::vector<ForeignProcess> f = foreign_processes(s, {40});
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0].pid, 10);
    EXPECT_EQ(f[0].used_mib, 4000);
    EXPECT_EQ(f[1].pid, 30);
    EXPECT_EQ(foreign_mib(f), 4100);
    EXPECT_FALSE(foreign_activity(f));  // pid 10's is unknown
    EXPECT_DOUBLE_EQ(*foreign_activity({f[1]}), 0.2);
}

// This test verifies the user of a pid: this process's is a name (or "uid N"); a pid that does
// not exist has none.
TEST(ForeignTest, UserOfAPid) {
    EXPECT_NE(process_user(::getpid()), "");
    EXPECT_EQ(process_user(0x3fffffff), "");
}

// This test verifies when foreign memory runs into a plan: only past the GPU's usable memory
// (total less the 512 MiB reserve) together with what was planned, a task of unknown need
// counting as the whole GPU; never with nothing planned, no foreign memory, or a plan over the
// GPU already.
TEST(ForeignTest, OverlapOnlyWhenPastThePlan) {
    const std::vector<ForeignProcess> f = {{7, "carol", 20000, std::nullopt}};
    EXPECT_FALSE(foreign_overlap(0, 40960, f, {{1, 20448}}));  // 40448 exactly: fits
    const auto over = foreign_overlap(0, 40960, f, {{1, 20449}});
    ASSERT_TRUE(over);
    EXPECT_NE(over->find("pid 7 (carol)"), std::string::npos) << *over;
    EXPECT_NE(over->find("task 1"), std::string::npos) << *over;
    EXPECT_TRUE(foreign_overlap(0, 40960, f, {{2, std::nullopt}}));
    EXPECT_FALSE(foreign_overlap(0, 40960, f, {}));
    EXPECT_FALSE(foreign_overlap(0, 40960, {{7, "", 0, std::nullopt}}, {{2, std::nullopt}}));
    EXPECT_FALSE(foreign_overlap(0, 40960, f, {{1, 30000}, {2, 30000}}));
}

}  // namespace
}  // namespace carma::daemon
