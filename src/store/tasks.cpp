// Store's queries of the tasks and attempts tables (their columns: store/codecs.h).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "core/controls.h"
#include "store/codecs.h"
#include "store/peak_json.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

using namespace detail;

// ---- tasks ------------------------------------------------------------------------------------

Result<TaskId> Store::insert_task(const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    return impl_->write(fmt::format("insert task '{}'", task.spec.name),
                        [&](SQLite::Database& db) -> Result<TaskId> {
                            SQLite::Statement st(db, kInsertTask);
                            bind_task(st, task, *encoded);
                            st.exec();
                            return db.getLastInsertRowid();
                        });
}

Result<std::vector<TaskId>> Store::insert_array(const TaskRow& task,
                                                std::span<const int> indices) {
    if (indices.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("array task '{}' has no indices", task.spec.name));
    }
    TaskRow member = task;
    const int max_running = task.spec.array ? task.spec.array->max_running : 0;
    member.spec.array = ArrayMember{0, indices.front(), max_running};
    auto encoded = encode_task(member);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    return impl_->write(
        fmt::format("insert array task '{}' ({} members)", task.spec.name, indices.size()),
        [&](SQLite::Database& db) -> Result<std::vector<TaskId>> {
            std::vector<TaskId> ids;
            SQLite::Statement insert(db, kInsertTask);
            SQLite::Statement update(db, kUpdateTask);
            // The array's id is its first member's, known only once that one is in: each member is
            // inserted and then rewritten with it, all in this one transaction.
            for (int index : indices) {
                member.spec.array =
                    ArrayMember{ids.empty() ? 0 : ids.front(), index, max_running};
                insert.reset();
                bind_task(insert, member, EncodedTask{spec_to_json(member.spec).dump(),
                                                      encoded->env_json});
                insert.exec();
                ids.push_back(db.getLastInsertRowid());
            }
            member.spec.array = ArrayMember{ids.front(), indices.front(), max_running};
            update.bind(bind_task(update, member, EncodedTask{spec_to_json(member.spec).dump(),
                                                              encoded->env_json}),
                        ids.front());
            update.exec();
            return ids;
        });
}

// Writes every column but the id: which fields change is the caller's business.
Result<void> Store::update_task(const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op = fmt::format("update task {}", task.id);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kUpdateTask);
        st.bind(bind_task(st, task, *encoded), task.id);
        if (st.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<int> Store::set_learned_if_waiting(std::span<const std::pair<TaskId, Learned>> learned) {
    if (learned.empty()) {
        return 0;
    }
    const std::string op = fmt::format("record what was learned of {} waiting task(s)",
                                       learned.size());
    return impl_->write(op, [&](SQLite::Database& db) -> Result<int> {
        SQLite::Statement st(
            db, fmt::format("UPDATE tasks SET spec_json = json_set(spec_json, '$.learned', "
                            "json(?)) WHERE id = ? AND state IN ({})",
                            waiting_states_sql()));
        int changed = 0;
        for (const auto& [id, l] : learned) {
            st.reset();
            st.bind(1, learned_to_json(l).dump());
            st.bind(2, static_cast<std::int64_t>(id));
            changed += st.exec();
        }
        return changed;
    });
}

Result<void> Store::begin_attempt(const AttemptRow& attempt, const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op =
        fmt::format("record attempt {} of task {} as starting", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement insert(db, kInsertAttempt);
        bind_attempt(insert, attempt);
        insert.exec();
        SQLite::Statement update(db, kUpdateTask);
        update.bind(bind_task(update, task, *encoded), task.id);
        if (update.exec() == 0) {
            return fail(ErrorCode::NotFound, fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<void> Store::end_attempt(const AttemptRow& attempt, const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op =
        fmt::format("record the end of attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement ended(db, kUpdateAttempt);
        bind_attempt(ended, attempt);
        if (ended.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such attempt", op, impl_->path));
        }
        SQLite::Statement update(db, kUpdateTask);
        update.bind(bind_task(update, task, *encoded), task.id);
        if (update.exec() == 0) {
            return fail(ErrorCode::NotFound, fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<std::optional<TaskRow>> Store::task(TaskId id) {
    const std::string sql = fmt::format("SELECT {} FROM tasks WHERE id = ?", kTaskColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::optional<TaskRow>> {
        SQLite::Statement st(db, sql);
        st.bind(1, id);
        if (!st.executeStep()) {
            return std::optional<TaskRow>();
        }
        return read_task(st);
    };
    return impl_->locked(fmt::format("read task {}", id), body);
}

Result<std::vector<TaskRow>> Store::tasks(bool include_final, TaskId after, std::size_t limit) {
    const std::string where =
        include_final ? "" : fmt::format(" AND state IN ({})", live_states_sql());
    return impl_->locked("list tasks", [&](SQLite::Database& db) -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id > ?{} ORDER BY id{}",
                                             kTaskColumns, where, limit_sql(limit)));
        st.bind(1, after);
        return read_tasks(st);
    });
}

Result<std::vector<TaskRow>> Store::tasks_by_id(std::span<const TaskId> ids) {
    if (ids.empty()) {
        return std::vector<TaskRow>{};
    }
    return impl_->locked("read tasks", [&](SQLite::Database& db) -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id IN ({}) ORDER BY id",
                                             task_columns_without_env(), id_list_sql(ids)));
        return read_tasks(st);
    });
}

Result<std::vector<ArrayMemberRow>> Store::array_members(TaskId array_id) {
    return impl_->locked(
        fmt::format("read the members of array {}", array_id),
        [&](SQLite::Database& db) -> Result<std::vector<ArrayMemberRow>> {
            // insert_array stores an array in one transaction, so its members hold the ids from
            // its own up: a range of the primary key, never a scan of every task.
            SQLite::Statement st(db,
                                 "SELECT id, json_extract(spec_json, '$.array.index'), state FROM "
                                 "tasks WHERE id >= ?1 AND id <= ?1 + ?2 AND "
                                 "json_extract(spec_json, '$.array.id') = ?1 "
                                 "ORDER BY json_extract(spec_json, '$.array.index')");
            st.bind(1, static_cast<std::int64_t>(array_id));
            st.bind(2, static_cast<std::int64_t>(kMaxArrayMembers));
            std::vector<ArrayMemberRow> out;
            while (st.executeStep()) {
                const TaskId id = st.getColumn(0).getInt64();
                out.push_back({id, st.getColumn(1).getInt(),
                               decode_state(id, st.getColumn(2).getString())});
            }
            return out;
        });
}

Result<std::vector<TaskId>> Store::ids_in_state(TaskState state, std::size_t limit) {
    return impl_->locked("list task ids by state",
                         [&](SQLite::Database& db) -> Result<std::vector<TaskId>> {
        SQLite::Statement st(db, fmt::format("SELECT id FROM tasks WHERE state = ? ORDER BY id{}",
                                             limit_sql(limit)));
        st.bind(1, std::string(to_string(state)));
        std::vector<TaskId> out;
        while (st.executeStep()) {
            out.push_back(st.getColumn(0).getInt64());
        }
        return out;
    });
}

Result<std::size_t> Store::waiting_count(uid_t uid) {
    return impl_->locked("count a user's waiting tasks",
                         [&](SQLite::Database& db) -> Result<std::size_t> {
        SQLite::Statement st(db, fmt::format("SELECT count(*) FROM tasks WHERE uid = ? AND "
                                             "state IN ({})",
                                             waiting_states_sql()));
        st.bind(1, static_cast<std::int64_t>(uid));
        st.executeStep();
        return static_cast<std::size_t>(st.getColumn(0).getInt64());
    });
}

Result<std::vector<StateCount>> Store::live_counts() {
    return impl_->locked("count live tasks by user and state",
                         [&](SQLite::Database& db) -> Result<std::vector<StateCount>> {
        // The index (state, uid) answers the grouping alone; one row per user gives the name.
        SQLite::Statement st(
            db, fmt::format("SELECT c.uid, c.state, c.n, (SELECT user FROM tasks t WHERE t.state = "
                            "c.state AND t.uid = c.uid LIMIT 1) FROM (SELECT state, uid, count(*) AS n FROM tasks "
                            "WHERE state IN ({}) GROUP BY state, uid) c ORDER BY c.uid, c.state",
                            live_states_sql()));
        std::vector<StateCount> out;
        while (st.executeStep()) {
            const auto state = parse_task_state(st.getColumn(1).getString());
            if (!state) {
                continue;
            }
            out.push_back(StateCount{static_cast<uid_t>(st.getColumn(0).getInt64()),
                                     st.getColumn(3).getString(), *state,
                                     static_cast<std::size_t>(st.getColumn(2).getInt64())});
        }
        return out;
    });
}

Result<std::map<TaskState, std::size_t>> Store::state_counts() {
    return impl_->locked("count tasks by state",
                         [&](SQLite::Database& db) -> Result<std::map<TaskState, std::size_t>> {
        SQLite::Statement st(db, "SELECT state, count(*) FROM tasks GROUP BY state");
        std::map<TaskState, std::size_t> out;
        while (st.executeStep()) {
            if (const auto state = parse_task_state(st.getColumn(0).getString())) {
                out[*state] = static_cast<std::size_t>(st.getColumn(1).getInt64());
            }
        }
        return out;
    });
}

Result<std::vector<TaskRow>> Store::waiting_tasks_without_env(TaskId after, std::size_t limit) {
    return impl_->locked("list waiting tasks", [&](SQLite::Database& db)
                                                   -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id > ? AND state IN ({}) "
                                             "ORDER BY id{}",
                                             task_columns_without_env(), waiting_states_sql(),
                                             limit_sql(limit)));
        st.bind(1, after);
        return read_tasks(st);
    });
}

// ---- attempts ---------------------------------------------------------------------------------

Result<void> Store::insert_attempt(const AttemptRow& attempt) {
    const std::string op =
        fmt::format("insert attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kInsertAttempt);
        bind_attempt(st, attempt);
        st.exec();
        return {};
    });
}

Result<void> Store::update_attempt(const AttemptRow& attempt) {
    const std::string op =
        fmt::format("update attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kUpdateAttempt);
        bind_attempt(st, attempt);
        if (st.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such attempt", op, impl_->path));
        }
        return {};
    });
}

Result<void> Store::set_attempt_peak(TaskId task, int number, const std::map<int, MiB>& peak_mib) {
    const std::string op = fmt::format("record the peak memory of attempt {} of task {}", number,
                                       task);
    auto body = [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(
            db, "UPDATE attempts SET peak_mib_json = ? WHERE task_id = ? AND number = ?");
        st.bind(1, peak_to_json(peak_mib).dump());
        st.bind(2, task);
        st.bind(3, number);
        st.exec();
        return {};
    };
    return impl_->locked(op, body);
}

Result<void> Store::set_attempt_energy(TaskId task, int number, double energy_j) {
    const std::string op = fmt::format("record the energy of attempt {} of task {}", number, task);
    auto body = [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, "UPDATE attempts SET energy_j = ? WHERE task_id = ? AND number = ?");
        st.bind(1, energy_j);
        st.bind(2, task);
        st.bind(3, number);
        st.exec();
        return {};
    };
    return impl_->locked(op, body);
}

Result<void> Store::set_attempt_charge(TaskId task, int number, double charged_gpu_s) {
    const std::string op = fmt::format("record the charge of attempt {} of task {}", number, task);
    auto body = [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db,
                             "UPDATE attempts SET charged_gpu_s = ? WHERE task_id = ? AND number = ?");
        st.bind(1, charged_gpu_s);
        st.bind(2, task);
        st.bind(3, number);
        st.exec();
        return {};
    };
    return impl_->locked(op, body);
}

Result<std::map<std::string, UsageRow>> Store::usage() {
    auto body = [&](SQLite::Database& db) -> Result<std::map<std::string, UsageRow>> {
        SQLite::Statement st(db, "SELECT user, gpu_s, at_s FROM usage");
        std::map<std::string, UsageRow> out;
        while (st.executeStep()) {
            out[st.getColumn(0).getString()] =
                UsageRow{st.getColumn(1).getDouble(), st.getColumn(2).getDouble()};
        }
        return out;
    };
    return impl_->locked("read the fair-share usage", body);
}

Result<void> Store::save_usage(const std::map<std::string, UsageRow>& rows) {
    return impl_->write("record the fair-share usage", [&](SQLite::Database& db) -> Result<void> {
        db.exec("DELETE FROM usage");
        SQLite::Statement st(db, "INSERT INTO usage (user, gpu_s, at_s) VALUES (?, ?, ?)");
        for (const auto& [user, row] : rows) {
            st.bind(1, user);
            st.bind(2, row.gpu_s);
            st.bind(3, row.at_s);
            st.exec();
            st.reset();
        }
        return {};
    });
}

Result<std::vector<AttemptRow>> Store::attempts(TaskId task) {
    const std::string sql =
        fmt::format("SELECT {} FROM attempts WHERE task_id = ? ORDER BY number", kAttemptColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::vector<AttemptRow>> {
        SQLite::Statement st(db, sql);
        st.bind(1, task);
        return read_attempts(st);
    };
    return impl_->locked(fmt::format("list attempts of task {}", task), body);
}

Result<std::vector<AttemptRow>> Store::open_attempts() {
    const std::string sql = fmt::format(
        "SELECT {} FROM attempts WHERE ended_at IS NULL ORDER BY task_id, number", kAttemptColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::vector<AttemptRow>> {
        SQLite::Statement st(db, sql);
        return read_attempts(st);
    };
    return impl_->locked("list open attempts", body);
}

Result<std::map<TaskId, double>> Store::latest_attempt_starts(std::span<const TaskId> ids) {
    if (ids.empty()) {
        return std::map<TaskId, double>{};
    }
    // The subquery walks the attempts' primary key (task_id, number) backwards: one row each.
    const std::string sql = fmt::format(
        "SELECT t.id, (SELECT a.started_at FROM attempts a WHERE a.task_id = t.id "
        "ORDER BY a.number DESC LIMIT 1) FROM tasks t WHERE t.id IN ({})",
        id_list_sql(ids));
    const auto body = [&](SQLite::Database& db) -> Result<std::map<TaskId, double>> {
        SQLite::Statement st(db, sql);
        std::map<TaskId, double> starts;
        while (st.executeStep()) {
            if (!st.getColumn(1).isNull()) {
                starts.emplace(st.getColumn(0).getInt64(), st.getColumn(1).getDouble());
            }
        }
        return starts;
    };
    return impl_->locked("list the starts of the tasks' latest attempts", body);
}

}  // namespace carma::store
