// Store's queries for accounting and the timeline: tasks with their attempts, a page at a time.

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/codecs.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

using namespace detail;

namespace {

// Tasks matching `where` (bound by `bind`) with their attempts, one query each.
template <typename Bind>
// Tasks (without their environments: no listing of finished tasks shows one) and their
// attempts, at most `limit` (0: all).
Result<std::vector<FinishedTask>> tasks_with_attempts(SQLite::Database& db,
                                                      const std::string& where,
                                                      const std::string& order, const Bind& bind,
                                                      std::size_t limit = 0) {
    std::vector<FinishedTask> out;
    std::map<TaskId, std::size_t> index;
    std::vector<TaskId> ids;
    SQLite::Statement tasks(db, fmt::format("SELECT {} FROM tasks WHERE {} ORDER BY {}{}",
                                            task_columns_without_env(), where, order,
                                            limit_sql(limit)));
    bind(tasks);
    while (tasks.executeStep()) {
        index[tasks.getColumn(0).getInt64()] = out.size();
        ids.push_back(tasks.getColumn(0).getInt64());
        out.push_back(FinishedTask{read_task(tasks), {}});
    }
    if (ids.empty()) {
        return out;
    }
    SQLite::Statement attempts(
        db, fmt::format("SELECT {} FROM attempts WHERE task_id IN ({}) ORDER BY task_id, number",
                        kAttemptColumns, id_list_sql(ids)));
    while (attempts.executeStep()) {
        AttemptRow a = read_attempt(attempts);
        if (auto it = index.find(a.task); it != index.end()) {
            out[it->second].attempts.push_back(std::move(a));
        }
    }
    return out;
}

}  // namespace

Result<std::vector<FinishedTask>> Store::finished_tasks(const FinishedQuery& query) {
    std::string states;
    for (TaskState s : all_task_states()) {
        const bool asked = query.states.empty() ||
                           std::find(query.states.begin(), query.states.end(), s) !=
                               query.states.end();
        if (is_final(s) && asked) {
            states += fmt::format("{}'{}'", states.empty() ? "" : ", ", to_string(s));
        }
    }
    if (states.empty()) {
        return std::vector<FinishedTask>{};  // only live states asked for: nothing has finished
    }
    // The state names are constants, not user input; the user and the time are bound.
    const std::string where =
        fmt::format("id > ? AND state IN ({}) AND COALESCE(finished_at, submitted_at) >= ?{}",
                    states, query.user.empty() ? "" : " AND user = ?");
    const auto bind = [&](SQLite::Statement& st) {
        st.bind(1, query.after);
        st.bind(2, query.since);
        if (!query.user.empty()) {
            st.bind(3, query.user);
        }
    };
    return impl_->locked("list finished tasks", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "id", bind, query.limit);
    });
}

Result<std::vector<FinishedTask>> Store::tasks_between(const SpanQuery& query) {
    // `ran`: only tasks with an attempt in the span (what a chart of the GPUs draws).
    const std::string where = fmt::format(
        "id > ? AND submitted_at <= ? AND (finished_at IS NULL OR finished_at >= ?){}",
        query.ran ? " AND EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = tasks.id AND "
                    "a.started_at <= ? AND (a.ended_at IS NULL OR a.ended_at >= ?))"
                  : "");
    const auto bind = [&](SQLite::Statement& st) {
        st.bind(1, query.after);
        st.bind(2, query.until);
        st.bind(3, query.since);
        if (query.ran) {
            st.bind(4, query.until);
            st.bind(5, query.since);
        }
    };
    return impl_->locked("list the tasks of a time span", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "id", bind, query.limit);
    });
}

Result<std::vector<FinishedTask>> Store::recently_finished(int limit) {
    // One scan of tasks (finished_at has no index): retention keeps the table to weeks of work.
    const std::string where = fmt::format(
        "id IN (SELECT id FROM tasks WHERE finished_at IS NOT NULL ORDER BY finished_at DESC "
        "LIMIT {})",
        std::max(limit, 0));
    return impl_->locked("list recently finished tasks", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "finished_at DESC, id DESC",
                                   [](SQLite::Statement&) {});
    });
}

}  // namespace carma::store
