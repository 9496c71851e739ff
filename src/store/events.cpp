// Store's queries of the events table.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

namespace {

// "?, ?, ?" for `n` kinds (at least one: an empty list asks for nothing).
std::string placeholders(std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        out += i == 0 ? "?" : ", ?";
    }
    return out;
}

}  // namespace

// Newest first with LIMIT 1, in SQL: a restart once read a task's oldest 10,000 events and
// missed any stop recorded after them.
Result<std::optional<EventRow>> Store::last_event(TaskId task, std::span<const std::string> kinds,
                                                  std::string_view message_prefix) {
    if (kinds.empty()) {
        return std::optional<EventRow>{};
    }
    const std::string sql = fmt::format(
        "SELECT id, time, task_id, kind, message FROM events WHERE task_id = ? AND kind IN ({})"
        "{} ORDER BY id DESC LIMIT 1",
        placeholders(kinds.size()),
        message_prefix.empty() ? "" : " AND substr(message, 1, length(?)) = ?");
    return impl_->locked(
        fmt::format("read the last event of task {}", task),
        [&](SQLite::Database& db) -> Result<std::optional<EventRow>> {
            SQLite::Statement st(db, sql);
            int index = 1;
            st.bind(index++, task);
            for (const std::string& kind : kinds) {
                st.bind(index++, kind);
            }
            if (!message_prefix.empty()) {
                // length() and substr() count characters alike, whatever the text.
                st.bind(index++, std::string(message_prefix));
                st.bind(index++, std::string(message_prefix));
            }
            if (st.executeStep()) {
                return std::optional<EventRow>{read_event(st)};
            }
            return std::optional<EventRow>{};
        });
}

Result<std::vector<EventRow>> Store::events_since(double since,
                                                  std::span<const std::string> kinds, int limit) {
    if (kinds.empty()) {
        return std::vector<EventRow>{};
    }
    const std::string sql = fmt::format(
        "SELECT id, time, task_id, kind, message FROM events WHERE time >= ? AND kind IN ({}) "
        "ORDER BY id LIMIT ?",
        placeholders(kinds.size()));
    return impl_->locked("list events since a time",
                         [&](SQLite::Database& db) -> Result<std::vector<EventRow>> {
                             SQLite::Statement st(db, sql);
                             int index = 1;
                             st.bind(index++, since);
                             for (const std::string& kind : kinds) {
                                 st.bind(index++, kind);
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
