#pragma once
// Private to src/store/: the Store's one SQLite connection. Every file of Store's queries
// (tasks.cpp, events.cpp, samples.cpp, accounting.cpp, history.cpp, store.cpp) runs them through
// Impl::locked() and Impl::write(), so every table is read and written under the one lock.

#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "core/result.h"
#include "store/store.h"

namespace carma::store {

namespace detail {

// Long enough to ride out another process (sqlite3 shell, a backup) holding the write lock for a
// moment; short enough that a wedged one surfaces as an error instead of a hung daemon.
inline constexpr int kBusyTimeoutMs = 5000;

}  // namespace detail

struct Store::Impl {
    explicit Impl(const std::string& file)
        : path(file),
          db(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, detail::kBusyTimeoutMs) {}

    // Runs `body` (which returns a Result) holding the connection's lock: the daemon's API and
    // scheduler threads share this one connection. SQLiteCpp reports errors by throwing; they
    // become an error naming the operation, the file and SQLite's message.
    template <typename F>
    std::invoke_result_t<F&, SQLite::Database&> locked(std::string_view op, F&& body) {
        std::lock_guard lock(mutex);
        try {
            return body(db);
        } catch (const std::exception& e) {
            return fail(ErrorCode::Io, fmt::format("{} in {}: {}", op, path, e.what()));
        }
    }

    // As locked(), inside one transaction that commits only when `body` succeeds, so a failed
    // write leaves nothing behind. IMMEDIATE takes the write lock at BEGIN: a deferred
    // transaction that upgrades later can get SQLITE_BUSY without the busy timeout applying.
    template <typename F>
    std::invoke_result_t<F&, SQLite::Database&> write(std::string_view op, F&& body) {
        return locked(op, [&](SQLite::Database& d) {
            SQLite::Transaction tx(d, SQLite::TransactionBehavior::IMMEDIATE);
            auto result = body(d);
            if (result) {
                tx.commit();
            }
            return result;
        });
    }

    std::string path;
    SQLite::Database db;
    std::mutex mutex;
    int version = 0;
};

}  // namespace carma::store
