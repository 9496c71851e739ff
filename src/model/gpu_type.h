#pragma once
// GPU kinds the simulator and the emulated backend know, and the "4xA100-40GB" notation (one
// server) with its "16x4xA100-40GB" form (16 nodes of 4 GPUs each).

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"

namespace carma::model {

struct GpuType {
    std::string name;      // "A100-40GB"
    MiB usable_mib = 0;    // what processes can allocate
    double idle_power_w = 0;
    double max_power_w = 0;
};

struct GpuSet {
    int count = 0;  // GPUs in all, over every node
    GpuType type;
    // 0: one server, whose GPUs name no node. Otherwise `count` GPUs in this many nodes of
    // count / nodes each, named n1, n2, ... in GPU index order.
    int nodes = 0;
    std::string text() const;  // "4xA100-40GB" or "16x4xA100-40GB"
    int per_node() const { return nodes > 0 ? count / nodes : count; }
    // The node of GPU `gpu` (0-based over all GPUs): "" on one server, else "n1".. .
    std::string node_of(int gpu) const;
};

const std::vector<GpuType>& known_gpu_types();
// Parses "4xA100-40GB" (count 1..1024) or "16x4xA100-40GB" (nodes x GPUs per node x type, at
// most 1024 GPUs in all); the error quotes the text, says which part is wrong and lists the
// known types where the type is.
Result<GpuSet> parse_gpu_set(std::string_view text);

}  // namespace carma::model
