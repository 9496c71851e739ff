// Store's queries of the events table.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

namespace {

EventRow read_event(const SQLite::Statement& st) {
    EventRow e;
    e.id = st.getColumn(0).getInt64();
    e.time = st.getColumn(1).getDouble();
    e.task = st.getColumn(2).getInt64();
    e.kind = st.getColumn(3).getString();
    e.message = st.getColumn(4).getString();
    return e;
}

}  // namespace

Result<std::int64_t> Store::add_event(const EventRow& event) {
    return impl_->write(
        fmt::format("add event '{}' of task {}", event.kind, event.task),
        [&](SQLite::Database& db) -> Result<std::int64_t> {
            SQLite::Statement st(
                db, "INSERT INTO events (time, task_id, kind, message) VALUES (?, ?, ?, ?)");
            st.bind(1, event.time);
            st.bind(2, event.task);
            st.bind(3, event.kind);
            st.bind(4, event.message);
            st.exec();
            return db.getLastInsertRowid();
        });
}

Result<void> Store::add_events(std::span<const EventRow> events) {
    if (events.empty()) {
        return {};
    }
    return impl_->write(
        fmt::format("add {} events, the first '{}' of task {}", events.size(),
                    events.front().kind, events.front().task),
        [&](SQLite::Database& db) -> Result<void> {
            SQLite::Statement st(
                db, "INSERT INTO events (time, task_id, kind, message) VALUES (?, ?, ?, ?)");
            for (const EventRow& e : events) {
                st.reset();
                st.bind(1, e.time);
                st.bind(2, e.task);
                st.bind(3, e.kind);
                st.bind(4, e.message);
                st.exec();
            }
            return {};
        });
}

// A negative limit means no limit (SQLite's LIMIT semantics).
Result<std::vector<EventRow>> Store::events(std::int64_t after_id, TaskId task, int limit) {
    // Two statements rather than "(? = 0 OR task_id = ?)", which would keep SQLite from using
    // the task_id index.
    const std::string sql = fmt::format(
        "SELECT id, time, task_id, kind, message FROM events WHERE id > ?{} ORDER BY id LIMIT ?",
        task == 0 ? "" : " AND task_id = ?");
    return impl_->locked("list events", [&](SQLite::Database& db) -> Result<std::vector<EventRow>> {
        SQLite::Statement st(db, sql);
        int index = 1;
        st.bind(index++, after_id);
        if (task != 0) {
            st.bind(index++, task);
        }
        st.bind(index, limit);
        std::vector<EventRow> rows;
        while (st.executeStep()) {
            rows.push_back(read_event(st));
        }
        return rows;
    });
}

}  // namespace carma::store
