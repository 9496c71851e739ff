#pragma once
// Node-scoring policies for packing declared requests onto a heterogeneous cluster
// (core/cluster_pack.h), registered by name: the six of the FGD paper's evaluation (Weng et al.,
// "Beware of Fragmentation", USENIX ATC '23, and its simulator hkust-adsl/kubernetes-scheduler-
// simulator, pkg/simulator/plugin), written here from their descriptions, and CARMA's own.
// docs/policies.md "Cluster packing" says what each does and where it comes from.
//
// A policy scores every node the request fits; the highest score wins. Ties go to the node first
// in a fixed random order drawn once per run, as in the FGD simulator, whose scheduler breaks
// ties by node name after prefixing the names with a random permutation (a uniform draw per
// decision spreads ties, where a fixed order packs them). Pure: the generator is injected.

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_pack.h"
#include "core/result.h"

namespace carma {

// The most common request shapes, covering `popularity` of all requests, with shares that sum to
// 1: the "target workload" FGD measures fragmentation against.
struct TypicalShape {
    PackRequest request;
    double share = 0;
};
std::vector<TypicalShape> typical_shapes(std::span<const PackRequest> requests,
                                         double popularity = 0.95);

// FGD's fragmentation of one node: the GPU thousandths a typical request could not use there,
// weighted by how common each shape is. A GPU request that fits (CPU and GPUs) finds the free
// share of GPUs too small for it fragmented; one that does not fit, a CPU-only one, or one the
// node's model excludes finds all of it so.
double fragment_milli(const PackNode& node, std::span<const TypicalShape> typical);

struct PackContext {
    std::span<const TypicalShape> typical;
    std::mt19937_64* rng = nullptr;
    // Each node's place in the tie-break order (lower wins); empty: ties drawn uniformly.
    std::span<const std::uint32_t> tie_rank;
};

struct PackPolicy {
    std::string name;
    std::string summary;  // one line for `--help` and docs
    // Score of a node the request fits; higher is better.
    std::int64_t (*score)(const PackNode&, const PackRequest&, const PackContext&) = nullptr;
    // The GPUs the request gets on the chosen node.
    std::vector<int> (*gpus)(const PackNode&, const PackRequest&, PackContext&) = nullptr;
    bool normalize = false;    // scores rescaled to 0..100 over the fitting nodes first
    bool random_node = false;  // any fitting node, uniformly
    bool cacheable = true;     // score depends on the node's state and the request alone
    // The risk filter (core/risk_filter.h) in shares: a GPU whose tenants' shares reach this many
    // thousandths (its SMs are busy) takes no further share; 0: off.
    int busy_milli = 0;
};

// The risk filter's threshold of busy SMs (RiskThresholds::smact, 0.80) as a GPU share.
inline constexpr int kBusyShareMilli = 800;

Result<PackPolicy> find_pack_policy(std::string_view name);
std::vector<std::string> pack_policy_names();

// Remembers scores per node and request shape until the node changes, so a policy whose score
// is costly (fgd, carma) is evaluated again only where something moved.
class PackScoreCache {
public:
    PackScoreCache(std::size_t nodes, int kinds);
    bool lookup(std::size_t node, int kind, std::uint32_t version, std::int64_t& score) const;
    void store(std::size_t node, int kind, std::uint32_t version, std::int64_t score);

private:
    int kinds_;
    std::vector<std::uint32_t> version_plus_one_;
    std::vector<std::int64_t> score_;
};

struct PackPlacement {
    int node = -1;  // -1: fits nowhere
    std::vector<int> gpus;
};

// Chooses the node and GPUs for one request; `cache` may be null.
PackPlacement choose_placement(std::span<const PackNode> nodes, const PackRequest& request,
                           const PackPolicy& policy, PackContext& ctx, PackScoreCache* cache);

}  // namespace carma
