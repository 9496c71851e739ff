#pragma once
// The FGD paper's evaluation protocol (Weng et al., USENIX ATC '23, §6.1, and its simulator's
// experiments/README.md), without time: `carma simulate --cluster NODES.csv --trace PODS.csv
// --protocol fgd`.
//
// - The cluster is its GPU nodes, as in the paper's artifact (nodes without GPUs are left out
//   and the output says how many).
// - The pod list is shuffled with the seed, then inflated: pods drawn from it with replacement
//   are appended until the next would take the GPU request past `inflate` x the capacity.
// - Pods arrive one at a time and never leave; each is placed by the policy or fails.
// - After each pod the GPU allocation ratio (allocated thousandths / capacity) is recorded
//   against the GPU request arrived so far. `allocation_ratio_at[k]` is the mean of the records
//   whose arrived request rounds to k % (those within one point where none does), k = 0..100 x
//   inflate.
// Every policy meets the same pods in the same order and the same tie-break order of nodes (a
// permutation drawn from the seed); the random policy draws from a generator of its own.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/pack_policies.h"
#include "core/result.h"
#include "sim/openb.h"

namespace carma::sim {

struct PackProtocolConfig {
    double inflate = 1.3;          // arrived GPU request, as a multiple of the GPU capacity
    std::uint64_t seed = 42;
    double popularity = 0.95;      // FGD's typical requests cover this share of the pods
};

struct PackRun {
    std::string policy;
    std::map<int, double> allocation_ratio_at;  // percent, 2 decimals, keyed by arrived percent
    std::size_t placed = 0;
    std::size_t failed = 0;
    std::size_t failed_gpu = 0;    // of them, pods asking for GPUs
    double gpus_unallocated = 0;   // GPUs' worth of thousandths never allocated at the end
    double gpus_fragmented = 0;    // of them, fragmented by FGD's measure against typical pods
    double gpus_stranded = 0;      // free GPU share on nodes too short of CPU or memory for it
    double cpu_cores_stranded = 0; // free cores on nodes whose GPUs are all allocated
    double seconds = 0;            // filled by the caller, which owns the clock
};

struct PackExperiment {
    std::string cluster;
    std::string trace;
    std::size_t nodes = 0;
    std::size_t nodes_without_gpus_left_out = 0;
    int gpus = 0;
    std::size_t original_pods = 0;
    std::size_t inflated_pods = 0;  // appended by the inflation
    std::size_t typical_shapes = 0;
    PackProtocolConfig config;
    std::vector<PackRun> runs;
};

// The arrival sequence: the shuffled pods, then the inflation's draws; the same for every policy.
struct PackWorkload {
    std::vector<PackRequest> arrivals;
    std::vector<TypicalShape> typical;
    std::size_t original = 0;
    int kinds = 0;
    std::vector<std::uint32_t> tie_rank;  // per GPU node
};

Result<PackWorkload> fgd_workload(const std::vector<NodeSpec>& gpu_nodes, const PodList& pods,
                                  GpuModelTable& models, const PackProtocolConfig& config);

// One policy over the workload. `on_pod(i)` is called after each arrival when set (progress).
PackRun run_pack_policy(const std::vector<NodeSpec>& gpu_nodes, const GpuModelTable& models,
                        const PackWorkload& workload, const PackPolicy& policy,
                        const PackProtocolConfig& config);

// The records' curve: mean allocation ratio at each whole arrived percentage, as above.
std::map<int, double> allocation_curve(const std::vector<std::pair<double, double>>& records,
                                       int max_percent);

// The nodes of a cluster that have GPUs, and how many were left out.
std::vector<NodeSpec> gpu_nodes_of(const ClusterSpec& cluster, std::size_t& left_out);

}  // namespace carma::sim
