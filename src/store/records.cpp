#include "store/records.h"

#include <array>

namespace carma::store {

namespace {

// Every state, so parsing can walk the same names to_string writes and the two never disagree.
constexpr std::array kAllStates = {
    TaskState::Queued,    TaskState::Recovering, TaskState::Running, TaskState::Succeeded,
    TaskState::Failed,    TaskState::Cancelled,  TaskState::Lost,    TaskState::Rejected,
    TaskState::Held,      TaskState::Timeout,
};

}  // namespace

// These names are stored in the database and shown by the API: renaming one needs a migration.
std::string_view to_string(TaskState s) {
    switch (s) {
        case TaskState::Queued: return "queued";
        case TaskState::Recovering: return "recovering";
        case TaskState::Running: return "running";
        case TaskState::Succeeded: return "succeeded";
        case TaskState::Failed: return "failed";
        case TaskState::Cancelled: return "cancelled";
        case TaskState::Lost: return "lost";
        case TaskState::Rejected: return "rejected";
        case TaskState::Held: return "held";
        case TaskState::Timeout: return "timeout";
    }
    return "unknown";
}

std::optional<TaskState> parse_task_state(std::string_view s) {
    for (TaskState state : kAllStates) {
        if (to_string(state) == s) {
            return state;
        }
    }
    return std::nullopt;
}

std::span<const TaskState> all_task_states() { return kAllStates; }

bool is_waiting(TaskState s) {
    return s == TaskState::Queued || s == TaskState::Recovering || s == TaskState::Held;
}

bool is_final(TaskState s) {
    switch (s) {
        case TaskState::Queued:
        case TaskState::Recovering:
        case TaskState::Running:
        case TaskState::Held: return false;
        case TaskState::Succeeded:
        case TaskState::Failed:
        case TaskState::Cancelled:
        case TaskState::Lost:
        case TaskState::Rejected:
        case TaskState::Timeout: return true;
    }
    return false;
}

}  // namespace carma::store
