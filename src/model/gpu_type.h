#pragma once
// GPU kinds the simulator and the emulated backend know, and the "4xA100-40GB" notation.

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
    int count = 0;
    GpuType type;
    std::string text() const;  // "4xA100-40GB"
};

const std::vector<GpuType>& known_gpu_types();
// Parses "4xA100-40GB" (count 1..1024); the error lists the known types.
Result<GpuSet> parse_gpu_set(std::string_view text);

}  // namespace carma::model
