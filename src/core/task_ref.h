#pragma once
// Tasks as people name them, the way Slurm names jobs: an id ("12"), a member of an array
// ("12_3": the member of array 12 with index 3) or a whole array ("12_*"), and the one way every
// view writes a task's id. An array's id is its first member's (core/task.h). Pure.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/task_id.h"

namespace carma {

struct TaskRef {
    TaskId id = 0;                   // a task, or the array whose id this is
    std::optional<int> array_index;  // "12_3": the member of array 12 with index 3
    bool whole_array = false;        // "12_*"
    bool plain() const { return !array_index && !whole_array; }
    bool operator==(const TaskRef&) const = default;
    static TaskRef of(TaskId id) {
        TaskRef ref;
        ref.id = id;
        return ref;
    }
};

// "12", "12_3" or "12_*"; anything else is refused with the three spellings.
Result<TaskRef> parse_task_ref(std::string_view word);
// As parse_task_ref reads it back.
std::string format_task_ref(const TaskRef& ref);

// How every view writes a task's id: "12", or "138_2" for the member of array 138 with index 2.
std::string format_task_id(TaskId id, const std::optional<ArrayMember>& array);
// The listed members of one array in one cell, as squeue writes them: "138_[0-3,7]" from the
// sorted indices; "138_5" for one.
std::string format_array_ids(TaskId array_id, std::span<const std::int64_t> sorted_indices);

}  // namespace carma
