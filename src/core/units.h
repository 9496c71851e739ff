#pragma once
// Memory is MiB as an integer everywhere inside CARMA; people may write "12GiB" or "12000MiB".

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace carma {

using MiB = std::int64_t;

// The most memory any parser accepts for one GPU: 16 TiB, far beyond any GPU made, and far enough
// below the int64 range that sums such as need + margin or need x GPUs cannot overflow.
inline constexpr MiB kMaxMemoryMib = MiB{16} * 1024 * 1024;

// Parses "12GiB", "12000MiB", "12 GB" (GB = 1000 MiB, as the paper's tables use), "40000" (MiB).
Result<MiB> parse_memory(std::string_view text);

// "13,236 MiB" style rendering for messages.
std::string format_mib(MiB mib);

}  // namespace carma
