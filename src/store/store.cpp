// The Store is one SQLite connection (store_impl.h) over one schema (schema.cpp); its queries live
// with their tables: tasks.cpp (tasks and attempts), events.cpp, samples.cpp, accounting.cpp and
// history.cpp. This file opens, checks and backs up the database and drops what is past its
// retention, across the tables.

#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/codecs.h"
#include "store/schema.h"
#include "store/store_impl.h"

namespace carma::store {

using namespace detail;

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() = default;

namespace {

std::string restore_hint(const std::string& path) {
    return fmt::format(
        "keep {0} and its -wal and -shm files as they are (they may hold the newest writes), then "
        "either restore a backup made with `carma admin backup FILE` (`carma admin restore FILE`, "
        "which moves them aside), or move the damaged files aside to start with an empty queue",
        path);
}

// Serving a damaged database would answer every request with 500 and could make it worse.
Result<void> check_integrity(SQLite::Database& db, const std::string& path) {
    std::string problem;
    try {
        SQLite::Statement st(db, "PRAGMA quick_check");
        if (st.executeStep()) {
            problem = st.getColumn(0).getString();
        }
    } catch (const std::exception& e) {
        problem = e.what();
    }
    if (problem == "ok") {
        return {};
    }
    return fail(ErrorCode::Io, fmt::format("the database {} is damaged ({}); {}", path,
                                           problem.empty() ? "quick_check said nothing" : problem,
                                           restore_hint(path)));
}

}  // namespace

Result<void> Store::backup(const std::string& source, const std::string& destination) {
    if (!std::filesystem::exists(source)) {
        return fail(ErrorCode::NotFound,
                    fmt::format("no database at {}; give the daemon's state directory", source));
    }
    try {
        SQLite::Database from(source, SQLite::OPEN_READONLY);
        from.setBusyTimeout(kBusyTimeoutMs);
        {
            // Created 0600 before SQLite writes a byte: the tasks' environments are inside.
            const int fd = ::open(destination.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) {
                return fail(ErrorCode::Io, fmt::format("cannot create {}: {}; choose a new file",
                                                       destination, std::strerror(errno)));
            }
            ::close(fd);
        }
        SQLite::Database to(destination, SQLite::OPEN_READWRITE);
        SQLite::Backup copy(to, from);
        copy.executeStep(-1);
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot back up {} to {}: {}", source, destination,
                                               e.what()));
    }
    return {};
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path) {
    if (auto dir = check_directory(path); !dir) {
        return tl::unexpected(dir.error());
    }
    // The database holds every task's environment (tokens, keys): only the daemon's user may
    // read it. SQLite gives its -wal and -shm files the database file's mode.
    if (const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
        (void)::fchmod(fd, 0600);
        ::close(fd);
    }
    std::unique_ptr<Impl> impl;
    try {
        impl = std::make_unique<Impl>(path);
        configure(impl->db);
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot open the database {}: {}; {}", path,
                                               e.what(), restore_hint(path)));
    }
    if (auto healthy = check_integrity(impl->db, path); !healthy) {
        return tl::unexpected(healthy.error());
    }
    // Before a migration, the file as it is: the carma that wrote it can open that copy again
    // (it refuses the migrated file), so going back to it never loses the database. The oldest
    // copy of a version is kept.
    int found = 0;
    try {
        found = impl->db.execAndGet("PRAGMA user_version").getInt();
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot read the schema version of {}: {}", path,
                                               e.what()));
    }
    if (found > 0 && found < kSchemaVersion) {
        const std::string copy = path + ".schema-" + std::to_string(found);
        if (!std::filesystem::exists(copy)) {
            if (auto kept = backup(path, copy); !kept) {
                return fail(kept.error().code,
                            fmt::format("not migrating {} from schema version {} to {}: a copy "
                                        "of it as it is comes first, and {}",
                                        path, found, kSchemaVersion, kept.error().message));
            }
        }
    }
    auto version = migrate(impl->db, path);
    if (!version) {
        return tl::unexpected(version.error());
    }
    impl->version = *version;
    // make_unique cannot reach the private constructor.
    return std::unique_ptr<Store>(new Store(std::move(impl)));
}

int Store::schema_version() const {
    return impl_->version;
}

// ---- retention --------------------------------------------------------------------------------

Result<std::int64_t> Store::prune_history(double before) {
    // Finished tasks go as their events do; their attempts first (counted), though the foreign
    // key would take them along.
    const std::string finished = fmt::format(
        "SELECT id FROM tasks WHERE state IN ({}) AND COALESCE(finished_at, submitted_at) < ?",
        final_states_sql());
    return impl_->write("drop GPU samples, events and finished tasks past their retention",
                        [&](SQLite::Database& db) -> Result<std::int64_t> {
                            SQLite::Statement samples(db, "DELETE FROM gpu_samples WHERE time < ?");
                            samples.bind(1, before);
                            std::int64_t dropped = samples.exec();
                            SQLite::Statement events(db, "DELETE FROM events WHERE time < ?");
                            events.bind(1, before);
                            dropped += events.exec();
                            SQLite::Statement attempts(
                                db, "DELETE FROM attempts WHERE task_id IN (" + finished + ")");
                            attempts.bind(1, before);
                            dropped += attempts.exec();
                            SQLite::Statement tasks(db, "DELETE FROM tasks WHERE id IN (" +
                                                            finished + ")");
                            tasks.bind(1, before);
                            dropped += tasks.exec();
                            return dropped;
                        });
}

}  // namespace carma::store
