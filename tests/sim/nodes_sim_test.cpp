// The simulator over several nodes: each GPU view names its node, and no task's GPUs span two.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/catalog.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace carma::sim {
namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// This test verifies, for the paper's policies and carma, that on 4 nodes of 2 GPUs every task
// completes, every attempt of a multi-GPU task sits on one node (GPUs 2k and 2k+1), the 2-GPU
// tasks do run, and a 4-GPU task (more than a node holds) is rejected with the node named.
TEST(NodesSimTest, EveryAttemptOnOneNode) {
    GeneratorConfig gen;
    gen.count = 120;
    gen.mean_gap_s = 60;
    gen.multi_gpu_share = 0.3;
    gen.seed = 3;
    const Trace trace = generate_trace(model::Catalog::embedded(), gen);
    int wide = 0, pairs = 0;
    for (const TraceEntry& e : trace.entries) {
        wide += e.gpus.value_or(1) == 4 ? 1 : 0;
        pairs += e.gpus.value_or(1) == 2 ? 1 : 0;
    }
    ASSERT_GT(wide, 0) << "the generated trace must hold 4-GPU tasks for this test";
    ASSERT_GT(pairs, 0) << "the generated trace must hold 2-GPU tasks for this test";

    for (const char* policy : {"exclusive", "oracle-MAGM", "OR-RR", "carma"}) {
        SCOPED_TRACE(policy);
        SimConfig config;
        config.gpus = *model::parse_gpu_set("4x2xA100-40GB");
        config.scheduler.policy = *find_policy(policy);
        config.scheduler.placement.explain = false;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), config);
        EXPECT_EQ(r.tasks_rejected, wide);
        EXPECT_EQ(r.tasks_completed + r.tasks_rejected, static_cast<int>(trace.entries.size()));
        int multi_attempts = 0;
        for (const TaskRecord& t : r.tasks) {
            if (t.rejected) {
                EXPECT_EQ(t.gpus, 4);
                EXPECT_TRUE(contains(t.reject_reason, "the largest node, n1, has 2"))
                    << t.reject_reason;
                continue;
            }
            for (const AttemptSpan& span : t.spans) {
                ASSERT_EQ(span.gpus.size(), static_cast<std::size_t>(t.gpus));
                std::set<int> nodes;
                for (int g : span.gpus) {
                    nodes.insert(g / 2);
                }
                EXPECT_EQ(nodes.size(), 1u) << t.name << " spans nodes";
                multi_attempts += t.gpus > 1 ? 1 : 0;
            }
        }
        EXPECT_GT(multi_attempts, 0);
    }
}

// This test verifies that a generated trace with no multi-GPU share is the plain generator's,
// and that the spec text parses with its errors naming the part at fault.
TEST(NodesSimTest, GeneratorSpec) {
    const auto& cat = model::Catalog::embedded();
    const Trace plain = generate_trace(cat, 50, 30, 9);
    const Trace same = generate_trace(cat, GeneratorConfig{50, 30, 0, 9});
    ASSERT_EQ(plain.entries.size(), same.entries.size());
    for (std::size_t i = 0; i < plain.entries.size(); ++i) {
        EXPECT_EQ(plain.entries[i].task_name, same.entries[i].task_name);
        EXPECT_EQ(plain.entries[i].submit_s, same.entries[i].submit_s);
        EXPECT_FALSE(same.entries[i].gpus.has_value());
    }

    auto spec = parse_generator("gen:3000,gap=8,multi=0.1", 5);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->count, 3000u);
    EXPECT_DOUBLE_EQ(spec->mean_gap_s, 8);
    EXPECT_DOUBLE_EQ(spec->multi_gpu_share, 0.1);
    EXPECT_EQ(spec->seed, 5u);
    auto bare = parse_generator("gen:10", 1);
    ASSERT_TRUE(bare);
    EXPECT_DOUBLE_EQ(bare->mean_gap_s, 120);
    EXPECT_DOUBLE_EQ(bare->multi_gpu_share, 0);

    for (const char* wrong : {"gen:", "gen:ten", "gen:0", "gen:1.5", "gen:10,gap=0",
                              "gen:10,multi=2", "gen:10,speed=3", "gen:10,"}) {
        auto r = parse_generator(wrong, 1);
        ASSERT_FALSE(r) << wrong;
        EXPECT_TRUE(contains(r.error().message, wrong)) << r.error().message;
        EXPECT_TRUE(contains(r.error().message, "gen:N[,gap=S][,multi=F]")) << r.error().message;
    }
}

}  // namespace
}  // namespace carma::sim
