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
#include "core/task_ref.h"

namespace carma::cli {

// One task, for `carma show` and `logs`: an id or an array member (12, 12_3); a whole array is
// refused, naming how to see its members.
Result<TaskRef> parse_one_task(std::string_view word);

struct TaskFilter {
    std::vector<TaskRef> refs;         // empty: every task the filters let through
    std::vector<std::string> users;    // empty: anyone's
    std::vector<std::string> states;   // empty: any state (checked by parse_queue_states)
};

// That something was named.
Result<void> check_filter(const TaskFilter& filter);

// Without ids and without --user, an ordinary user's bulk operation (`carma cancel --state
// running`) means the user's own tasks: only the owner or root may act on a task, so others'
// tasks would only fail one by one. Root (`privileged`) keeps scancel's meaning, everyone's.
// Naming others (--user bob, or ids) is left as it is: the daemon answers for each.
void default_to_own_tasks(TaskFilter& filter, bool privileged, const std::string& me);

// Whether the list is needed at all: ids and array members (12, 12_3) without filters are sent
// as they are, and the daemon answers for each.
bool needs_task_list(const TaskFilter& filter);

// The tasks in `tasks` (the "tasks" array of GET /v1/tasks) that the filter selects, in id
// order; an id or member that is not in the list is kept (the daemon answers for it).
std::vector<TaskRef> select_tasks(const nlohmann::json& tasks, const TaskFilter& filter);

// One task's refusal in a bulk operation: "task 2: MESSAGE", the task named once when the
// daemon's message already starts with it ("task 2 belongs to bob; ...").
std::string task_failure_line(const TaskRef& id, const std::string& message);

}  // namespace carma::cli
