#include "sim/output.h"

#include <gtest/gtest.h>

namespace carma::sim {
namespace {

Comparison sample() {
    Comparison c;
    c.trace = "t1";
    c.gpus = "4xA100-40GB";
    c.sharing = "mps";
    PolicyResult e;
    e.policy = "exclusive";
    e.makespan_s = 36000;
    e.energy_j = 20e6;
    PolicyResult m;
    m.policy = "oracle-MAGM";
    m.makespan_s = 27000;
    m.energy_j = 18e6;
    m.oom_crashes = 0;
    c.results = {e, m};
    return c;
}

// This test verifies the text table: one row per policy with its ratio to exclusive.
TEST(OutputTest, TableHasRatios) {
    std::string t = format_table(sample());
    EXPECT_NE(t.find("exclusive"), std::string::npos);
    EXPECT_NE(t.find("oracle-MAGM"), std::string::npos);
    EXPECT_NE(t.find("-25.0%"), std::string::npos);  // 27,000 / 36,000 - 1
    EXPECT_NE(t.find("-10.0%"), std::string::npos);  // 18 MJ / 20 MJ - 1
}

// This test verifies the JSON shape promised by docs/policies.md.
TEST(OutputTest, JsonShape) {
    nlohmann::json j = to_json(sample());
    EXPECT_EQ(j["trace"], "t1");
    EXPECT_EQ(j["gpus"], "4xA100-40GB");
    ASSERT_EQ(j["results"].size(), 2u);
    for (const char* key : {"policy", "makespan_s", "energy_j", "mean_jct_s", "p95_jct_s",
                            "mean_wait_s", "oom_crashes", "preemptions", "tasks_completed",
                            "attempts", "mean_smact", "mean_smocc", "mean_memory_used_frac"}) {
        EXPECT_TRUE(j["results"][1].contains(key)) << key;
    }
    EXPECT_EQ(j["results"][1]["makespan_s"], 27000.0);
}

}  // namespace
}  // namespace carma::sim
