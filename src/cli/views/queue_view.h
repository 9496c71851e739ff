#pragma once
// `carma queue` as a pure function: the tasks of a GET /v1/tasks answer, the options and the
// time go in, the table's lines come out (no I/O, no clock), so every column, filter and cut is
// testable. Answers are read defensively, as in cli/commands/client_common.h: a missing or odd
// field prints as "-".
//
// Columns (docs/user-guide.md, `carma queue`):
//   ID      the task id; a job array's line: ARRAY_[indices], e.g. 12_[0-3,7]
//   USER NAME GPUS
//   STATE   the task's state; an array's line counts its tasks' states: "3 running, 7 queued"
//   MEM     per GPU, what CARMA plans with: learned.need_mib + learned.margin_mib, else
//           memory.declared_mib, else "?"
//   WAIT    queued, recovering and held tasks: the wait so far (now - submitted_at); else "-"
//   TIME    running tasks: the run time of the current attempt (now - started_at); else "-"
//   PRIORITY  a waiting task's priority under `carma` (`priority`), the highest first; else "-"
//   REASON  the task's message: for a waiting task, why it waits
// An array's line takes USER, NAME, GPUS and MEM from its first task (lowest index), WAIT and
// TIME from its longest-waiting and longest-running task, REASON from its first waiting task.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace carma::cli {

enum class QueueField { Id, User, Name, State, Gpus, Mem, Wait, Time, Priority, Reason };

// The columns without --format, in the order above; PRIORITY (a waiting task's under `carma`:
// fair share, age and nice, higher first) only where a listed task has one.
std::vector<QueueField> default_queue_fields();

// --format: a comma list of field names (id,user,name,state,gpus,mem,wait,time,priority,reason)
// or squeue-style codes separated by spaces ("%i %u %j %t %b %m %W %M %Q %R"). An unknown name or
// code is an error naming the nearest field and listing them all.
Result<std::vector<QueueField>> parse_queue_format(std::string_view spec);

// --state, each value a comma list of CARMA's states or squeue's codes and names (PD, R, CD,
// PENDING, OUT_OF_MEMORY, ...: each as CARMA's states); an unknown state is an error naming the
// nearest one.
Result<std::vector<std::string>> parse_queue_states(const std::vector<std::string>& values);

// --user, each value a comma list.
std::vector<std::string> parse_queue_users(const std::vector<std::string>& values);

// Whether any of `states` is a finished one, which a listing without ?all=1 never holds.
bool queue_states_need_finished(const std::vector<std::string>& states);

struct QueueView {
    std::vector<std::string> users;   // empty: every user
    std::vector<std::string> states;  // empty: every state the listing holds
    std::vector<QueueField> fields;   // empty: default_queue_fields()
    bool expand_arrays = false;       // one line per task of an array (ID 12_3)
    // Lines longer than this get NAME and REASON cut (REASON first); 0: nothing is cut.
    std::size_t width = 0;
};

// The tasks that pass the user and state filters, in the answer's order.
nlohmann::json filter_queue_tasks(const nlohmann::json& tasks, const QueueView& view);

// The table: the header, then one line per task or array, without trailing spaces or newlines.
std::vector<std::string> queue_lines(const nlohmann::json& tasks, const QueueView& view,
                                     double now);

}  // namespace carma::cli
