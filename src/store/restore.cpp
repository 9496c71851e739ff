#include "store/restore.h"

#include <algorithm>
#include <exception>
#include <filesystem>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

namespace {

// The sequence AUTOINCREMENT keeps (it outlives deleted rows), else the largest id left.
TaskId read_last_id(SQLite::Database& db) {
    TaskId last = db.execAndGet("SELECT COALESCE(MAX(id), 0) FROM tasks").getInt64();
    SQLite::Statement seq(db, "SELECT seq FROM sqlite_sequence WHERE name = 'tasks'");
    if (seq.executeStep()) {
        last = std::max<TaskId>(last, seq.getColumn(0).getInt64());
    }
    return last;
}

}  // namespace

Result<BackupContents> read_backup(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return fail(ErrorCode::NotFound,
                    fmt::format("no backup at {}: {}; give a file made by `carma admin backup`",
                                path, ec ? ec.message() : "not a regular file"));
    }
    BackupContents out;
    std::string step = "open it";
    try {
        SQLite::Database db(path, SQLite::OPEN_READONLY, detail::kBusyTimeoutMs);
        step = "check it (PRAGMA quick_check)";
        const std::string check = db.execAndGet("PRAGMA quick_check").getString();
        if (check != "ok") {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("the backup {} is damaged ({}); choose another backup", path,
                                    check));
        }
        step = "read its schema version";
        out.schema_version = db.execAndGet("PRAGMA user_version").getInt();
        if (out.schema_version > kSchemaVersion) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("the backup {} has schema version {}, newer than this carma's "
                                    "{}; restore it with the carma that wrote it",
                                    path, out.schema_version, kSchemaVersion));
        }
        if (!db.tableExists("tasks") || !db.tableExists("attempts") || out.schema_version < 1) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} is an SQLite file but not a CARMA database (no tasks and "
                                    "attempts); give a file made by `carma admin backup`",
                                    path));
        }
        step = "read its tasks";
        out.last_id = read_last_id(db);
        SQLite::Statement tasks(db, "SELECT id, attempts, state FROM tasks");
        while (tasks.executeStep()) {
            out.attempts[tasks.getColumn(0).getInt64()] = tasks.getColumn(1).getInt();
            if (tasks.getColumn(2).getString() == "running") {
                ++out.running;
            }
        }
        SQLite::Statement attempts(db, "SELECT task_id, MAX(number) FROM attempts GROUP BY task_id");
        while (attempts.executeStep()) {
            int& known = out.attempts[attempts.getColumn(0).getInt64()];
            known = std::max(known, attempts.getColumn(1).getInt());
        }
    } catch (const std::exception& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("cannot {} of the backup {}: {}; give a file made by `carma admin "
                                "backup`",
                                step, path, e.what()));
    }
    return out;
}

Result<TaskId> last_task_id(const std::string& path) {
    try {
        // Read-only: the file is kept as it was (a read-write connection would checkpoint its
        // -wal into it). SQLite still reads the -wal, where the newest ids may be.
        SQLite::Database db(path, SQLite::OPEN_READONLY, detail::kBusyTimeoutMs);
        return read_last_id(db);
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot read the task ids of {}: {}", path, e.what()));
    }
}

Result<void> raise_last_task_id(const std::string& path, TaskId last_id) {
    try {
        SQLite::Database db(path, SQLite::OPEN_READWRITE, detail::kBusyTimeoutMs);
        SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement update(
            db, "UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'tasks'");
        update.bind(1, last_id);
        if (update.exec() == 0) {
            SQLite::Statement insert(db,
                                     "INSERT INTO sqlite_sequence (name, seq) VALUES ('tasks', ?)");
            insert.bind(1, last_id);
            insert.exec();
        }
        tx.commit();
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot carry the task ids past {} in {}: {}",
                                               last_id, path, e.what()));
    }
    return {};
}

}  // namespace carma::store
