#pragma once
// How CARMA numbers tasks; apart from core/task.h so that the words that name tasks
// (core/task_ref.h, core/dependency.h) can be part of a task.

#include <cstdint>

namespace carma {

using TaskId = std::int64_t;

// A task created by `--array`: every member shares the array's id (the id of its first member)
// and has its own index (CARMA_ARRAY_INDEX in its environment).
struct ArrayMember {
    TaskId id = 0;
    int index = 0;
    // `--array=0-9%2`: at most this many of the array's members run at once (Slurm's
    // ArrayTaskThrottle, core/array_throttle.h); 0 = no bound.
    int max_running = 0;
    bool operator==(const ArrayMember&) const = default;
};

}  // namespace carma
