#include "core/gpu_clauses.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that GPUs turned down for the same reason are named once, as ranges, in the
// order their first GPU came (issue 22: "GPU 0: warming up … GPU 1: warming up …").
TEST(GpuClausesTest, GroupsGpusWithTheSameClause) {
    GpuClauses c;
    for (int gpu : {0, 1, 2, 3}) {
        c.add(gpu, "", "warming up");
    }
    EXPECT_EQ(c.text(), "GPUs 0-3: warming up");

    GpuClauses mixed;
    mixed.add(0, "", "kept for a task ahead in the queue");
    mixed.add(1, "", "warming up");
    mixed.add(2, "", "warming up");
    mixed.add(3, "", "kept for a task ahead in the queue");
    mixed.add(5, "", "warming up");
    EXPECT_EQ(mixed.text(),
              "GPUs 0, 3: kept for a task ahead in the queue; GPUs 1-2, 5: warming up");
}

// This test verifies that one GPU keeps the singular, that nothing gives "", and that the same
// clause on two nodes stays two groups, each naming its node.
TEST(GpuClausesTest, SingularEmptyAndNodes) {
    GpuClauses none;
    EXPECT_TRUE(none.empty());
    EXPECT_EQ(none.text(), "");

    GpuClauses one;
    one.add(3, "", "8,000 MiB available < 12,048 MiB (declared)");
    EXPECT_EQ(one.text(), "GPU 3: 8,000 MiB available < 12,048 MiB (declared)");

    GpuClauses nodes;
    nodes.add(0, "n1", "unhealthy");
    nodes.add(1, "n1", "unhealthy");
    nodes.add(2, "n2", "unhealthy");
    EXPECT_EQ(nodes.text(), "GPUs 0-1 on n1: unhealthy; GPU 2 on n2: unhealthy");
}

// This test verifies the index list: sorted, duplicates dropped, runs as ranges.
TEST(GpuClausesTest, IndexRanges) {
    EXPECT_EQ(gpu_index_ranges({}), "");
    EXPECT_EQ(gpu_index_ranges({7}), "7");
    EXPECT_EQ(gpu_index_ranges({6, 0, 1, 4, 7, 1}), "0-1, 4, 6-7");
}

}  // namespace
}  // namespace carma
