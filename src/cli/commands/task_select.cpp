#include "cli/commands/task_select.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace carma::cli {

Result<TaskRef> parse_one_task(std::string_view word) {
    auto ref = parse_task_ref(word);
    if (ref && ref->whole_array) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("'{}' is a whole array; name one task: {} (the array's first "
                                "member) or a member such as {}_0; `carma queue --array` lists "
                                "the members",
                                word, ref->id, ref->id));
    }
    return ref;
}

Result<void> check_filter(const TaskFilter& filter) {
    if (filter.refs.empty() && filter.users.empty() && filter.states.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "name the tasks: ids (12, 12_3, 12_*), or --user and/or --state");
    }
    return {};
}

void default_to_own_tasks(TaskFilter& filter, bool privileged, const std::string& me) {
    if (!privileged && filter.refs.empty() && filter.users.empty()) {
        filter.users.push_back(me);
    }
}

bool needs_task_list(const TaskFilter& filter) {
    return !filter.users.empty() || !filter.states.empty() ||
           std::any_of(filter.refs.begin(), filter.refs.end(),
                       [](const TaskRef& r) { return r.whole_array; });
}

std::vector<TaskRef> select_tasks(const nlohmann::json& tasks, const TaskFilter& filter) {
    auto contains = [](const std::vector<std::string>& list, const std::string& v) {
        return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
    };
    std::set<TaskId> out;
    std::set<TaskId> listed;
    std::set<std::pair<TaskId, int>> listed_members;
    for (const nlohmann::json& t : tasks) {
        if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer()) {
            continue;
        }
        const TaskId id = t["id"].get<TaskId>();
        listed.insert(id);
        const std::string user = t.value("user", "");
        const std::string state = t.value("state", "");
        if (!contains(filter.users, user) || !contains(filter.states, state)) {
            continue;
        }
        std::optional<TaskId> array_id;
        std::optional<int> index;
        if (auto a = t.find("array"); a != t.end() && a->is_object()) {
            array_id = a->value("id", TaskId{0});
            index = a->value("index", 0);
            listed_members.emplace(*array_id, *index);
        }
        bool chosen = filter.refs.empty();
        for (const TaskRef& r : filter.refs) {
            if (r.plain() ? r.id == id
                          : array_id == r.id && (r.whole_array || r.array_index == index)) {
                chosen = true;
            }
        }
        if (chosen) {
            out.insert(id);
        }
    }
    std::vector<TaskRef> refs;
    for (TaskId id : out) {
        refs.push_back(TaskRef::of(id));
    }
    // Not listed (finished, or not visible): the daemon says what it is.
    if (filter.users.empty() && filter.states.empty()) {
        for (const TaskRef& r : filter.refs) {
            if ((r.plain() && !listed.contains(r.id)) ||
                (r.array_index && !listed_members.contains({r.id, *r.array_index}))) {
                refs.push_back(r);
            }
        }
    }
    return refs;
}

std::string task_failure_line(const TaskRef& id, const std::string& message) {
    const std::string label = fmt::format("task {}", format_task_ref(id));
    if (message.starts_with(label) &&
        (message.size() == label.size() || message[label.size()] == ' ' ||
         message[label.size()] == ':')) {
        return message;
    }
    return fmt::format("{}: {}", label, message);
}

}  // namespace carma::cli
