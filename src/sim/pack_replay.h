#pragma once
// A timed replay of a pod list on its own times (`carma simulate --cluster NODES.csv --trace
// PODS.csv --protocol timed`): each pod arrives at its creation time, waits until the policy
// places it, and holds its CPU, memory and GPU share for as long as it ran in production
// (deletion - scheduled time). No published result covers this for openb; the assumptions are
// stated here and in docs/policies.md:
//
// - A pod never scheduled in production (no scheduled time, openb's Pending) has no run time and
//   is left out; so is one no node of the cluster could ever hold. Both are counted.
// - A pod still Running when the trace ends ran at least its recorded time: its run is censored.
//   It is replayed with that time and counted, so figures for such pods are lower bounds.
// - Waiting pods are tried in arrival order at every arrival and end, and any that fits starts
//   (Kubernetes' behaviour: no reservation for the head of the queue).
// - Run time does not depend on the co-runners: openb states each pod's GPU share as a
//   reservation (Alibaba's cGPU enforces it), not as a hope.
// The baseline gives every pod that asks for a share a whole GPU instead.

#include <cstdint>
#include <string>
#include <vector>

#include "core/pack_policies.h"
#include "core/result.h"
#include "sim/openb.h"

namespace carma::sim {

struct ReplayConfig {
    bool whole_gpus = false;  // the baseline: a share becomes a whole GPU
    std::uint64_t seed = 42;  // the tie-break order of the nodes
};

struct ReplayRun {
    std::string policy;
    bool whole_gpus = false;
    std::size_t pods = 0;                // replayed
    std::size_t never_scheduled = 0;     // left out: no run time
    std::size_t never_fit = 0;           // left out: no node could ever hold it
    std::size_t censored = 0;            // replayed with a run time that is a lower bound
    double makespan_s = 0;               // first arrival to last end
    double wait_p50_s = 0;
    double wait_p95_s = 0;
    double wait_mean_s = 0;
    double completion_p50_s = 0;         // arrival to end
    double completion_p95_s = 0;
    double gpu_hours = 0;                // GPU held (shares as shares), summed over pods
};

Result<ReplayRun> replay_timed(const std::vector<NodeSpec>& nodes, const PodList& pods,
                               const PackPolicy& policy, const ReplayConfig& config);

}  // namespace carma::sim
