#pragma once
// How the energy a GPU used over one sampling interval is shared among the attempts live on it
// (`carma acct`, GET /v1/acct). Pure: the daemon feeds it each GPU's energy counter difference
// and what it knows of the activity of each attempt's processes there.
//
// The rule, in order:
//   1. No attempt on the GPU: nothing is attributed (an idle GPU, or processes CARMA did not
//      start, use that energy).
//   2. Every attempt's activity is known and something on the GPU was active: each attempt gets
//      energy x its activity / (the attempts' activities + `unattributed_activity`), the
//      activity of processes on the GPU that belong to no attempt, whose share stays unattributed.
//   3. Otherwise (some attempt's activity unknown, or nothing active: all of them starting up or
//      waiting on their CPUs): equal shares. The GPU is theirs while they hold it, idle or not.
// Activities are SM activity, 0..1 (clamped); a non-finite one counts as unknown.

#include <optional>
#include <span>
#include <vector>

namespace carma {

// One share per entry of `activity`, in its order; empty when `activity` is. A non-finite or
// negative `energy_j` (a counter that went back) gives zero shares.
std::vector<double> split_gpu_energy(double energy_j,
                                     std::span<const std::optional<double>> activity,
                                     double unattributed_activity = 0);

}  // namespace carma
