// openb's node and pod lists (sim/openb.h) and the FGD protocol over them
// (sim/pack_protocol.h), on the slice in tests/sim/data made for these tests.

#include "sim/openb.h"

#include <gtest/gtest.h>

#include "sim/pack_protocol.h"
#include "sim/pack_replay.h"

namespace carma::sim {
namespace {

std::string slice(const char* file) {
    return *read_text_file(std::string(CARMA_SOURCE_DIR) + "/tests/sim/data/" + file, "slice");
}

const std::string kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";
const std::string kPodHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";

TEST(OpenbTest, ReadsTheSliceNodesAndPods) {
    const std::string nodes_text = slice("openb_slice_nodes.csv");
    const std::string pods_text = slice("openb_slice_pods.csv");
    EXPECT_TRUE(is_openb_node_list(nodes_text));
    EXPECT_FALSE(is_openb_pod_list(nodes_text));
    EXPECT_TRUE(is_openb_pod_list(pods_text));
    EXPECT_FALSE(is_openb_node_list("submit_offset_s,task_name\n0,a\n"));

    const ClusterSpec cluster = *parse_openb_nodes(nodes_text, "nodes");
    ASSERT_EQ(cluster.nodes.size(), 7U);
    EXPECT_EQ(cluster.nodes[0].name, "slice-node-0");
    EXPECT_EQ(cluster.nodes[0].cpu_milli, 96000);
    EXPECT_EQ(cluster.nodes[0].gpus, 8);
    EXPECT_EQ(cluster.nodes[0].gpu_model, "V100M32");
    EXPECT_EQ(cluster.nodes[2].gpus, 0);
    EXPECT_EQ(cluster.nodes[2].gpu_model, "");

    const PodList pods = *parse_openb_pods(pods_text, "pods");
    ASSERT_EQ(pods.pods.size(), 40U);
    const Pod& first = pods.pods[0];
    EXPECT_EQ(first.task.name, "slice-pod-0000");
    EXPECT_EQ(first.task.cpu_milli, 11300);
    EXPECT_EQ(first.task.gpus, 1);
    EXPECT_EQ(first.task.gpu_milli, 0);  // 1000: a whole GPU
    ASSERT_TRUE(first.times);
    EXPECT_EQ(first.times->created_s, 473);
    EXPECT_EQ(*first.times->deleted_s, 6755);
    EXPECT_EQ(first.phase, "Failed");
}

TEST(OpenbTest, SharesAndModelConstraintsAreRead) {
    const PodList pods = *parse_openb_pods(kPodHeader +
                                               "p1,3152,12288,1,470,\n"
                                               "p2,8000,16384,1,1000,V100M16|V100M32\n"
                                               "p3,4000,8192,0,0,\n",
                                           "pods");
    EXPECT_EQ(pods.pods[0].task.gpu_milli, 470);
    EXPECT_EQ(pods.pods[0].task.cpu_milli, 3152);
    EXPECT_EQ(pods.pods[1].task.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
    EXPECT_EQ(pods.pods[2].task.gpus, 0);
    EXPECT_FALSE(pods.pods[0].times);  // a list without times (as the multigpu* ones)
}

TEST(OpenbTest, BadRowsAreRefusedWithTheirLine) {
    struct Case {
        std::string text;
        std::string says;
    };
    const std::vector<Case> pods = {
        {kPodHeader + "p1,1000,1024,1,470,\np2,1000,1024,1,1200,\n", "line 3"},
        {kPodHeader + "p1,1000,1024,2,500,\n", "a share is of one GPU"},
        {kPodHeader + "p1,lots,1024,1,1000,\n", "cpu_milli"},
        {kPodHeader + "p1,1000,1024,1.5,1000,\n", "num_gpu"},
        {kPodHeader + ",1000,1024,1,1000,\n", "no name"},
        {kPodHeader, "no pods"},
        {"name,cpu,mem\np,1,1\n", "not an openb pod list"},
    };
    for (const Case& c : pods) {
        auto r = parse_openb_pods(c.text, "pods.csv");
        ASSERT_FALSE(r) << c.text;
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("pods.csv"), std::string::npos);
    }
    const std::vector<Case> nodes = {
        {kNodeHeader + "n1,64000,1024,8,\n", "line 2: node n1 has 8 GPUs but no model"},
        {kNodeHeader + "n1,64000,1024,99,T4\n", "from 0 to 16"},
        {kNodeHeader + "../x,64000,1024,1,T4\n", "not valid"},
        {kNodeHeader + "n1,0,1024,1,T4\n", "cpu_milli"},
    };
    for (const Case& c : nodes) {
        auto r = parse_openb_nodes(c.text, "nodes.csv");
        ASSERT_FALSE(r) << c.text;
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    }
}

struct SliceSetup {
    std::vector<NodeSpec> nodes;
    std::size_t left_out = 0;
    PodList pods;
    GpuModelTable models;
};

SliceSetup slice_setup() {
    SliceSetup s;
    const ClusterSpec cluster = *parse_openb_nodes(slice("openb_slice_nodes.csv"), "nodes");
    s.nodes = gpu_nodes_of(cluster, s.left_out);
    s.pods = *parse_openb_pods(slice("openb_slice_pods.csv"), "pods");
    return s;
}

std::int64_t gpu_milli_of(const std::vector<PackRequest>& arrivals) {
    std::int64_t total = 0;
    for (const PackRequest& r : arrivals) total += r.total_gpu_milli();
    return total;
}

TEST(PackProtocolTest, InflatesToTheTargetAndLeavesNodesWithoutGpusOut) {
    SliceSetup s = slice_setup();
    EXPECT_EQ(s.left_out, 1U);
    ASSERT_EQ(s.nodes.size(), 6U);  // 38 GPUs
    PackProtocolConfig config;
    const PackWorkload w = *fgd_workload(s.nodes, s.pods, s.models, config);
    EXPECT_EQ(w.original, 40U);
    EXPECT_GT(w.arrivals.size(), 40U);
    const std::int64_t asked = gpu_milli_of(w.arrivals);
    EXPECT_LE(asked, 38 * 1300);
    EXPECT_GT(asked, 38 * 1300 - 4000);  // stopped by a pod that would go past; 4 GPUs at most
    EXPECT_FALSE(w.typical.empty());

    // Below what the list asks: pods are dropped at random until it holds.
    config.inflate = 0.5;
    const PackWorkload half = *fgd_workload(s.nodes, s.pods, s.models, config);
    EXPECT_LE(gpu_milli_of(half.arrivals), 38 * 500);
    EXPECT_LT(half.arrivals.size(), 40U);

    config.inflate = 0;
    EXPECT_FALSE(fgd_workload(s.nodes, s.pods, s.models, config));
}

TEST(PackProtocolTest, EveryPolicyReportsTheCurveFromZeroToTheInflation) {
    SliceSetup s = slice_setup();
    PackProtocolConfig config;
    const PackWorkload w = *fgd_workload(s.nodes, s.pods, s.models, config);
    for (const std::string& name : pack_policy_names()) {
        const PackRun run = run_pack_policy(s.nodes, s.models, w, *find_pack_policy(name), config);
        EXPECT_EQ(run.placed + run.failed, w.arrivals.size()) << name;
        ASSERT_TRUE(run.allocation_ratio_at.count(130)) << name;
        double last = 0;
        for (const auto& [k, v] : run.allocation_ratio_at) {
            EXPECT_LE(v, 100.0) << name;
            EXPECT_GE(v, last - 1e-9) << name << " at " << k;  // pods never leave
            last = v;
        }
        // What is allocated at the end is the capacity less what stays free.
        EXPECT_NEAR(run.gpus_unallocated, 38 * (1.0 - run.allocation_ratio_at.at(130) / 100.0),
                    38 * 0.02)
            << name;
        EXPECT_GE(run.gpus_fragmented, 0) << name;
    }
}

TEST(PackProtocolTest, TheSeedFixesTheWorkloadAndChangesIt) {
    SliceSetup s = slice_setup();
    PackProtocolConfig config;
    config.seed = 42;
    const PackWorkload a = *fgd_workload(s.nodes, s.pods, s.models, config);
    const PackWorkload b = *fgd_workload(s.nodes, s.pods, s.models, config);
    config.seed = 43;
    const PackWorkload c = *fgd_workload(s.nodes, s.pods, s.models, config);
    auto kinds = [](const PackWorkload& w) {
        std::vector<int> out;
        for (const PackRequest& r : w.arrivals) out.push_back(r.kind);
        return out;
    };
    EXPECT_EQ(kinds(a), kinds(b));
    EXPECT_EQ(a.tie_rank, b.tie_rank);
    EXPECT_NE(kinds(a), kinds(c));
    const PackPolicy fgd = *find_pack_policy("fgd");
    EXPECT_EQ(run_pack_policy(s.nodes, s.models, a, fgd, config).allocation_ratio_at,
              run_pack_policy(s.nodes, s.models, b, fgd, config).allocation_ratio_at);
}

TEST(PackProtocolTest, TheCurveAveragesTheRecordsOfEachArrivedPercent) {
    // Arrived 0.4 % and 0.6 % round to 0 and 1; 1.4 % to 1; nothing rounds to 2 or 3.
    const std::vector<std::pair<double, double>> records = {
        {0.4, 0.3}, {0.6, 0.5}, {1.4, 1.2}, {4.2, 4.0}};
    const auto curve = allocation_curve(records, 5);
    EXPECT_DOUBLE_EQ(curve.at(0), 0.3);
    EXPECT_DOUBLE_EQ(curve.at(1), 0.85);
    EXPECT_DOUBLE_EQ(curve.at(2), 0.85);  // none at 2: those within one point (at 1)
    EXPECT_DOUBLE_EQ(curve.at(3), 4.0);   // none at 3: those at 4
    EXPECT_DOUBLE_EQ(curve.at(4), 4.0);
    EXPECT_DOUBLE_EQ(curve.at(5), 4.0);
}

const std::string kTimedHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

TEST(PackReplayTest, SharesRunTogetherWhereWholeGpusQueue) {
    // One GPU; two pods asking half of it arrive together and run 100 s each; a third never ran.
    const std::vector<NodeSpec> nodes = {{"n1", 16000, 65536, 1, "T4"}};
    const PodList pods = *parse_openb_pods(kTimedHeader +
                                               "a,1000,1024,1,500,,LS,Succeeded,0,100,0\n"
                                               "b,1000,1024,1,500,,LS,Running,0,110,10\n"
                                               "c,1000,1024,1,500,,LS,Pending,5,50,\n",
                                           "pods");
    const PackPolicy carma = *find_pack_policy("carma");
    const ReplayRun shared = *replay_timed(nodes, pods, carma, ReplayConfig{false, 42});
    EXPECT_EQ(shared.pods, 2U);
    EXPECT_EQ(shared.never_scheduled, 1U);
    EXPECT_EQ(shared.censored, 1U);  // b was still Running
    EXPECT_EQ(shared.wait_p95_s, 0);
    EXPECT_EQ(shared.makespan_s, 100);
    EXPECT_DOUBLE_EQ(shared.gpu_hours, 2 * 0.5 * 100 / 3600.0);

    const ReplayRun whole = *replay_timed(nodes, pods, carma, ReplayConfig{true, 42});
    EXPECT_EQ(whole.wait_p95_s, 100);  // the second waits for the first's GPU
    EXPECT_EQ(whole.makespan_s, 200);
    EXPECT_EQ(whole.completion_p95_s, 200);
}

TEST(PackReplayTest, PodsNoNodeCanHoldAreLeftOutAndCounted) {
    const std::vector<NodeSpec> nodes = {{"n1", 16000, 65536, 2, "T4"}};
    const PodList pods = *parse_openb_pods(kTimedHeader +
                                               "a,1000,1024,4,1000,,LS,Succeeded,0,100,0\n"
                                               "b,1000,1024,1,1000,V100M32,LS,Succeeded,0,100,0\n"
                                               "c,1000,1024,1,1000,,LS,Succeeded,0,100,0\n",
                                           "pods");
    const ReplayRun run =
        *replay_timed(nodes, pods, *find_pack_policy("bestfit"), ReplayConfig{false, 42});
    EXPECT_EQ(run.pods, 1U);
    EXPECT_EQ(run.never_fit, 2U);  // four GPUs; a model the cluster lacks

    const PodList none = *parse_openb_pods(kPodHeader + "p,1000,1024,1,1000,\n", "untimed");
    auto r = replay_timed(nodes, none, *find_pack_policy("bestfit"), ReplayConfig{});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("creation, scheduled and deletion times"), std::string::npos);
}

TEST(PackReplayTest, TheSliceReplaysUnderEveryPolicy) {
    SliceSetup s = slice_setup();
    const ClusterSpec cluster = *parse_openb_nodes(slice("openb_slice_nodes.csv"), "nodes");
    for (const std::string& name : pack_policy_names()) {
        const ReplayRun shared =
            *replay_timed(cluster.nodes, s.pods, *find_pack_policy(name), ReplayConfig{});
        const ReplayRun whole =
            *replay_timed(cluster.nodes, s.pods, *find_pack_policy(name), ReplayConfig{true, 42});
        EXPECT_EQ(shared.pods + shared.never_scheduled + shared.never_fit, 40U) << name;
        EXPECT_GE(shared.completion_p95_s, shared.wait_p95_s) << name;
        EXPECT_LE(shared.gpu_hours, whole.gpu_hours + 1e-9) << name;  // a share costs less
    }
}

}  // namespace
}  // namespace carma::sim
