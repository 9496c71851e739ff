#pragma once
// Which tasks `carma cancel`, `hold` and `release` act on: ids ("12"), array members ("12_3")
// and whole arrays ("12_*"), narrowed by --user and --state like scancel's. Pure: the caller
// passes GET /v1/tasks's list.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "core/task.h"

namespace carma::cli {

struct TaskRef {
    TaskId id = 0;                   // a task, or the array whose id this is
    std::optional<int> array_index;  // "12_3": the member of array 12 with index 3
    bool whole_array = false;        // "12_*"
    bool plain() const { return !array_index && !whole_array; }
};

Result<TaskRef> parse_task_ref(std::string_view word);

struct TaskFilter {
    std::vector<TaskRef> refs;         // empty: every task the filters let through
    std::vector<std::string> users;    // empty: anyone's
    std::vector<std::string> states;   // empty: any state (checked by parse_queue_states)
};

// That something was named.
Result<void> check_filter(const TaskFilter& filter);

// Whether the list is needed at all: plain ids without filters are sent as they are.
bool needs_task_list(const TaskFilter& filter);

// The ids in `tasks` (the "tasks" array of GET /v1/tasks) that the filter selects, in id order;
// a plain id that is not in the list is kept (the daemon answers for it).
std::vector<TaskId> select_tasks(const nlohmann::json& tasks, const TaskFilter& filter);

}  // namespace carma::cli
