// Packing declared requests onto a heterogeneous cluster (core/cluster_pack.h) and the policies
// that score nodes for it (core/pack_policies.h), on clusters small enough to work out by hand.

#include "core/cluster_pack.h"

#include <gtest/gtest.h>

#include "core/pack_policies.h"

namespace carma {
namespace {

PackRequest share(int milli, std::int64_t cpu = 1000) {
    PackRequest r;
    r.cpu_milli = cpu;
    r.gpus = 1;
    r.milli_per_gpu = milli;
    return r;
}

PackRequest whole(int gpus, std::int64_t cpu = 1000) {
    PackRequest r;
    r.cpu_milli = cpu;
    r.gpus = gpus;
    r.milli_per_gpu = kMilliPerGpu;
    return r;
}

PackRequest cpu_only(std::int64_t cpu) {
    PackRequest r;
    r.cpu_milli = cpu;
    return r;
}

PackNode node(int gpus, std::int64_t cpu = 64000, int model = 0) {
    return make_pack_node(NodeSpec{"n", cpu, 256 * 1024, gpus, "V100M32"}, model);
}

TEST(ClusterPackTest, TaskSpecBecomesARequestInThousandths) {
    GpuModelTable models;
    models.intern("T4");
    TaskSpec t;
    t.gpus = 1;
    t.gpu_milli = 470;
    t.cpu_milli = 3152;
    t.host_mem_mib = 12288;
    t.gpu_models = {"T4", "A100"};
    const PackRequest r = pack_request(t, models);
    EXPECT_EQ(r.cpu_milli, 3152);
    EXPECT_EQ(r.mem_mib, 12288);
    EXPECT_EQ(r.milli_per_gpu, 470);
    EXPECT_TRUE(r.shares_a_gpu());
    EXPECT_EQ(r.models, (std::vector<int>{0, -1}));  // A100: no node has it

    TaskSpec w;
    w.gpus = 2;
    w.cpus = 8;
    const PackRequest rw = pack_request(w, models);
    EXPECT_EQ(rw.cpu_milli, 8000);  // whole cores, when no thousandths are given
    EXPECT_EQ(rw.total_gpu_milli(), 2000);
    EXPECT_FALSE(rw.shares_a_gpu());
}

TEST(ClusterPackTest, FitsChecksCpuMemoryModelAndGpuRoom) {
    PackNode n = node(2, 8000);
    EXPECT_TRUE(pack_fits(n, whole(2, 8000)));
    EXPECT_FALSE(pack_fits(n, whole(3)));          // only two GPUs
    EXPECT_FALSE(pack_fits(n, whole(1, 8001)));    // one thousandth of a core too many
    PackRequest big_mem = whole(1);
    big_mem.mem_mib = 256 * 1024 + 1;
    EXPECT_FALSE(pack_fits(n, big_mem));
    PackRequest other_model = whole(1);
    other_model.models = {1};
    EXPECT_FALSE(pack_fits(n, other_model));
    other_model.models = {1, 0};
    EXPECT_TRUE(pack_fits(n, other_model));

    pack_take(n, share(700), {0});
    EXPECT_TRUE(pack_fits(n, share(300)));   // GPU 0 has 300 left, GPU 1 all of it
    EXPECT_FALSE(pack_fits(n, whole(2)));    // only one GPU is fully free
    EXPECT_EQ(n.gpu_free_total(), 1300);
    EXPECT_EQ(n.fully_free_gpus(), 1);
    EXPECT_EQ(n.cpu_milli_free, 7000);

    const PackNode cpu_node = make_pack_node(NodeSpec{"c", 32000, 1024, 0, ""}, -1);
    EXPECT_TRUE(pack_fits(cpu_node, cpu_only(32000)));
    EXPECT_FALSE(pack_fits(cpu_node, share(100)));
}

TEST(ClusterPackTest, SharesGoToTheChosenGpuAndWholeGpusToTheFirstFreeOnes) {
    std::mt19937_64 rng(1);
    PackNode n = node(4);
    pack_take(n, share(500), {1});  // 500 left on GPU 1
    pack_take(n, share(200), {3});  // 800 left on GPU 3
    EXPECT_EQ(share_gpu(n, share(400), GpuChoice::best_fit, rng), 1);
    EXPECT_EQ(share_gpu(n, share(400), GpuChoice::worst_fit, rng), 0);
    EXPECT_EQ(share_gpu(n, share(600), GpuChoice::best_fit, rng), 3);
    EXPECT_EQ(exclusive_gpus(n, whole(2)), (std::vector<int>{0, 2}));
}

TEST(ClusterPackTest, UniformBelowStaysInRangeAndCoversIt) {
    std::mt19937_64 rng(7);
    std::vector<int> seen(5, 0);
    for (int i = 0; i < 5000; ++i) {
        const std::uint64_t v = uniform_below(rng, 5);
        ASSERT_LT(v, 5U);
        ++seen[v];
    }
    for (int c : seen) {
        EXPECT_GT(c, 800);  // about 1,000 each
    }
}

TEST(PackPoliciesTest, TypicalShapesKeepTheCommonestUntilThePopularityIsCovered) {
    std::vector<PackRequest> all;
    for (int i = 0; i < 6; ++i) all.push_back(share(500));
    for (int i = 0; i < 3; ++i) all.push_back(whole(1));
    all.push_back(whole(8));
    const auto shapes = typical_shapes(all, 0.85);
    ASSERT_EQ(shapes.size(), 2U);  // 6 + 3 of 10 covers 85 %
    EXPECT_EQ(shapes[0].request.milli_per_gpu, 500);
    EXPECT_DOUBLE_EQ(shapes[0].share, 6.0 / 9.0);
    EXPECT_DOUBLE_EQ(shapes[1].share, 3.0 / 9.0);
    EXPECT_EQ(typical_shapes(all, 1.0).size(), 3U);
}

TEST(PackPoliciesTest, FragmentationCountsWhatTypicalRequestsCannotUse) {
    // Half of the requests take 600 of a GPU, half a whole GPU.
    const std::vector<TypicalShape> typical = {{share(600), 0.5}, {whole(1), 0.5}};
    PackNode n = node(2);
    EXPECT_DOUBLE_EQ(fragment_milli(n, typical), 0);  // both fit on either GPU
    pack_take(n, share(500), {0});                    // GPU 0 keeps 500
    // For the 600 share the 500 is too small; for a whole GPU too: 500 fragmented either way.
    EXPECT_DOUBLE_EQ(fragment_milli(n, typical), 500);
    pack_take(n, share(600), {1});  // GPU 1 keeps 400: no typical request fits anywhere now
    EXPECT_DOUBLE_EQ(fragment_milli(n, typical), 900);

    // Without the CPU a request needs, all of the node's free GPU is fragmented for it.
    PackNode starved = node(1, 500);
    EXPECT_DOUBLE_EQ(fragment_milli(starved, typical), 1000);
}

// Places each request with the policy on the given nodes, ties broken by index order.
int choose(std::vector<PackNode>& nodes, const PackRequest& r, const char* policy,
           const std::vector<TypicalShape>& typical = {}) {
    std::mt19937_64 rng(3);
    std::vector<std::uint32_t> rank(nodes.size());
    for (std::size_t i = 0; i < rank.size(); ++i) rank[i] = static_cast<std::uint32_t>(i);
    PackContext ctx{typical, &rng, rank};
    const PackPolicy p = *find_pack_policy(policy);
    const PackPlacement at = choose_placement(nodes, r, p, ctx, nullptr);
    if (at.node >= 0) {
        pack_take(nodes[static_cast<std::size_t>(at.node)], r, at.gpus);
    }
    return at.node;
}

TEST(PackPoliciesTest, BestFitAndPackingPreferTheFullerNodeFgdKeepsRoomForTypicalRequests) {
    const std::vector<TypicalShape> typical = {{whole(1), 0.5}, {whole(4), 0.5}};
    for (const char* policy : {"bestfit", "packing"}) {
        std::vector<PackNode> nodes = {node(8), node(8)};
        pack_take(nodes[1], whole(4), {0, 1, 2, 3});
        EXPECT_EQ(choose(nodes, whole(1), policy, typical), 1) << policy;
    }
    // FGD and carma: a GPU taken from the half-used node leaves 3 free, where a typical 4-GPU
    // request no longer fits (1,500 thousandths fragmented); from the empty node, 7, where both
    // typical requests still fit (none).
    for (const char* policy : {"fgd", "carma"}) {
        std::vector<PackNode> nodes = {node(8), node(8)};
        pack_take(nodes[1], whole(4), {0, 1, 2, 3});
        EXPECT_EQ(choose(nodes, whole(1), policy, typical), 0) << policy;
    }
}

TEST(PackPoliciesTest, DotProdAvoidsAlignmentAndClusteringKeepsShapesApart) {
    // A CPU-heavy request goes where CPU is scarce and GPUs plenty, not to the CPU-rich node.
    std::vector<PackNode> nodes = {node(8, 128000), node(8, 32000)};
    EXPECT_EQ(choose(nodes, whole(1, 16000), "dotprod"), 1);

    // Clustering: a share joins the node already holding shares, a whole GPU the node of whole
    // GPUs, though both are equally full.
    std::vector<PackNode> shaped = {node(8), node(8)};
    pack_take(shaped[0], share(500), {0});
    pack_take(shaped[1], whole(1), {0});
    EXPECT_EQ(choose(shaped, share(300), "clustering"), 0);
    EXPECT_EQ(choose(shaped, whole(1), "clustering"), 1);
}

TEST(PackPoliciesTest, FgdPutsAShareWhereItLeavesRoomForTheTypicalRequests) {
    // Typical requests take 500 of a GPU. A 500 share on the GPU with 500 free fills it; on a
    // fresh GPU it would leave 500, still usable. Both are fine for FGD; a 400 share is not: on
    // the half-used GPU it leaves 100 nobody can use.
    const std::vector<TypicalShape> typical = {{share(500), 1.0}};
    std::vector<PackNode> nodes = {node(1), node(1)};
    pack_take(nodes[0], share(500), {0});
    EXPECT_EQ(choose(nodes, share(400), "fgd", typical), 1);
    EXPECT_EQ(nodes[1].gpu_free[0], 600);
}

TEST(PackPoliciesTest, NothingFitsMeansNoPlacementAndTheNodesStayAsTheyWere) {
    for (const std::string& policy : pack_policy_names()) {
        std::vector<PackNode> nodes = {node(1), node(2)};
        EXPECT_EQ(choose(nodes, whole(4), policy.c_str()), -1) << policy;
        EXPECT_EQ(nodes[0].version + nodes[1].version, 0U) << policy;
    }
}

TEST(PackPoliciesTest, CarmaRiskAddsNoShareToAGpuWhoseSharesReachEightyPercent) {
    const std::vector<TypicalShape> typical = {{share(100), 1.0}};
    std::vector<PackNode> nodes = {node(1)};
    pack_take(nodes[0], share(800), {0});  // busy: 200 left
    EXPECT_EQ(choose(nodes, share(100), "carma-risk", typical), -1);
    EXPECT_EQ(choose(nodes, share(100), "carma", typical), 0);

    std::vector<PackNode> two = {node(2)};
    pack_take(two[0], share(800), {0});
    EXPECT_EQ(choose(two, share(100), "carma-risk", typical), 0);
    EXPECT_EQ(two[0].gpu_free[0], 200);  // the busy GPU was left alone
    EXPECT_EQ(two[0].gpu_free[1], 900);
    // Whole GPUs are not shares: the filter does not apply to them.
    EXPECT_EQ(choose(two, whole(1), "carma-risk", typical), -1);  // GPU 1 is no longer free
}

TEST(PackPoliciesTest, TiesGoToTheNodeFirstInTheRunsOrder) {
    std::mt19937_64 rng(3);
    std::vector<PackNode> nodes = {node(8), node(8), node(8)};
    const std::vector<std::uint32_t> rank = {2, 0, 1};  // node 1 first, then 2, then 0
    PackContext ctx{{}, &rng, rank};
    const PackPolicy p = *find_pack_policy("packing");
    EXPECT_EQ(choose_placement(nodes, whole(1), p, ctx, nullptr).node, 1);
}

TEST(PackPoliciesTest, UnknownPolicyIsRefusedWithTheKnownOnes) {
    auto p = find_pack_policy("fdg");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("fgd"), std::string::npos);
    EXPECT_NE(p.error().message.find("bestfit"), std::string::npos);
}

}  // namespace
}  // namespace carma
