#include "cli/commands/task_select.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace carma::cli {

namespace {

std::optional<std::int64_t> whole(std::string_view s) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) {
        return std::nullopt;
    }
    return v;
}

}  // namespace

Result<TaskRef> parse_task_ref(std::string_view word) {
    auto bad = [&] {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("'{}' is not a task: write an id (12), an array member (12_3) or "
                                "a whole array (12_*)",
                                word));
    };
    TaskRef ref;
    const std::size_t under = word.find('_');
    const auto id = whole(word.substr(0, under));
    if (!id || *id < 1) {
        return bad();
    }
    ref.id = *id;
    if (under == std::string_view::npos) {
        return ref;
    }
    const std::string_view rest = word.substr(under + 1);
    if (rest == "*") {
        ref.whole_array = true;
        return ref;
    }
    const auto index = whole(rest);
    if (!index || *index > std::numeric_limits<int>::max()) {
        return bad();
    }
    ref.array_index = static_cast<int>(*index);
    return ref;
}

Result<void> check_filter(const TaskFilter& filter) {
    if (filter.refs.empty() && filter.users.empty() && filter.states.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "name the tasks: ids (12, 12_3, 12_*), or --user and/or --state");
    }
    return {};
}

bool needs_task_list(const TaskFilter& filter) {
    return !filter.users.empty() || !filter.states.empty() ||
           std::any_of(filter.refs.begin(), filter.refs.end(),
                       [](const TaskRef& r) { return !r.plain(); });
}

std::vector<TaskId> select_tasks(const nlohmann::json& tasks, const TaskFilter& filter) {
    auto contains = [](const std::vector<std::string>& list, const std::string& v) {
        return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
    };
    std::set<TaskId> out;
    std::set<TaskId> listed;
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
    // Not listed (finished, or not visible): the daemon says what it is.
    if (filter.users.empty() && filter.states.empty()) {
        for (const TaskRef& r : filter.refs) {
            if (r.plain() && !listed.contains(r.id)) {
                out.insert(r.id);
            }
        }
    }
    return {out.begin(), out.end()};
}

}  // namespace carma::cli
