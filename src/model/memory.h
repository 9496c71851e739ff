#pragma once
// Memory over a task's life and the out-of-memory rule (interference-model.md §8, §10(d,e)):
// nothing during CPU start-up, the CUDA context at the first GPU activity, a linear ramp to the
// peak, flat afterwards (the caching allocator keeps its peak). When the sum on a GPU would pass
// its capacity, the task whose ramp crosses it crashes; the others go on.

#include <optional>
#include <span>

#include "core/task.h"
#include "core/units.h"

namespace carma::model {

struct ResidentMemory {
    TaskId task = 0;
    double active_at = 0;  // first GPU activity; 0 MiB before
    MiB context_mib = 0;   // jumps to this at active_at
    MiB peak_mib = 0;      // reached at active_at + ramp_s
    double ramp_s = 0;
    long order = 0;        // launch order: larger = newer, breaks crossing ties
};

// Memory held at time t.
double memory_at(const ResidentMemory& r, double t);
double total_memory_at(std::span<const ResidentMemory> residents, double t);

struct OomCrash {
    double at = 0;
    TaskId victim = 0;
};

// The first moment at or after `from` when the residents' sum exceeds `capacity`, and the task
// that crashes: the one ramping (or arriving) at that moment, newest first. Nothing if the sum
// stays within capacity for good.
std::optional<OomCrash> next_oom(std::span<const ResidentMemory> residents, MiB capacity,
                                 double from);

}  // namespace carma::model
