#pragma once
// The value of CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, the per-GPU memory limit MPS enforces on a
// client (see exec/mps.h for the documentation it follows). Pure: the daemon writes it and the
// emulated GPUs read it.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"

namespace carma {

inline constexpr std::string_view kMpsMemLimitEnv = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";

// One entry of CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
struct MpsMemLimit {
    std::string device;  // a CUDA ordinal ("0") or a GPU UUID ("GPU-...")
    MiB limit_mib = 0;
    bool operator==(const MpsMemLimit&) const = default;
};

// "0=12000M,1=8000M": MiB with "M", as NVIDIA's k8s-device-plugin writes it; the daemon names
// devices by ordinal, as NVIDIA documents the variable. Entries with a limit <= 0 are left out
// (unknown). Empty when nothing is left.
std::string format_pinned_mem_limit(std::span<const MpsMemLimit> limits);

// Parses the variable's value. Accepts "M"/"MB"/"MiB" and "G"/"GB"/"GiB" (any case); a malformed
// value gives an error naming the variable and the bad part.
Result<std::vector<MpsMemLimit>> parse_pinned_mem_limit(std::string_view text);

}  // namespace carma
