#include "store/schema.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/store.h"

namespace carma::store::detail {

namespace {

// ---- schema -----------------------------------------------------------------------------------

// One forward-only step. Opening a database applies, in order and in one transaction, every step
// whose version is above the file's PRAGMA user_version. Steps are never edited once released:
// a change to the schema is a new step.
struct Migration {
    int version;  // the user_version once this step has run
    const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
-- AUTOINCREMENT: ids are shown to users and written in logs, so a deleted newest task must
-- never hand its id to the next submission.
CREATE TABLE tasks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,  -- copy of spec.name for people reading the file with sqlite3
    spec_json    TEXT    NOT NULL,
    uid          INTEGER NOT NULL,
    gid          INTEGER NOT NULL,
    user         TEXT    NOT NULL,
    workdir      TEXT    NOT NULL,
    env_json     TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    submitted_at REAL    NOT NULL,
    finished_at  REAL,
    message      TEXT    NOT NULL
);
-- Listing live tasks must not scan the whole history.
CREATE INDEX tasks_state ON tasks(state);

CREATE TABLE attempts (
    task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    number     INTEGER NOT NULL,
    gpus_json  TEXT    NOT NULL,
    dir        TEXT    NOT NULL,
    shim_pid   INTEGER NOT NULL,
    started_at REAL    NOT NULL,
    ended_at   REAL,
    outcome    TEXT    NOT NULL,
    exit_code  INTEGER,
    signal     INTEGER,
    recovered  INTEGER NOT NULL,
    PRIMARY KEY (task_id, number)
);

-- task_id 0 marks daemon-wide events, so it cannot be a foreign key.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    REAL    NOT NULL,
    task_id INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    message TEXT    NOT NULL
);
CREATE INDEX events_task ON events(task_id);

-- The metrics may be NULL: a backend without a reading reports NaN, which SQLite stores as NULL.
CREATE TABLE gpu_samples (
    time     REAL    NOT NULL,
    gpu      INTEGER NOT NULL,
    free_mib INTEGER NOT NULL,
    used_mib INTEGER NOT NULL,
    util     REAL,
    smact    REAL,
    smocc    REAL,
    drama    REAL,
    power_w  REAL,
    energy_j REAL
);
CREATE INDEX gpu_samples_time ON gpu_samples(time);
)sql"},
    {2, R"sql(
-- Peak GPU memory of the attempt's processes per GPU, {"<gpu index>": MiB}: what later issues
-- learn memory needs from.
ALTER TABLE attempts ADD COLUMN peak_mib_json TEXT NOT NULL DEFAULT '{}';
)sql"},
    {3, R"sql(
-- What each finished attempt did, by command (store/history.h). Not tied to tasks by a foreign
-- key: it is knowledge about a command and outlives any one task. id orders rows by when they
-- were recorded (newest = largest).
CREATE TABLE history (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,  -- core/fingerprint.h: owner + argv + GPU count
    family      TEXT    NOT NULL,  -- owner + program + script
    uid         INTEGER NOT NULL,
    gpus        INTEGER NOT NULL,
    peak_mib    INTEGER NOT NULL,  -- the most held on any one of its GPUs
    peak_json   TEXT    NOT NULL,  -- {"<gpu index>": MiB}
    run_s       REAL    NOT NULL,
    activity    REAL,              -- mean SMACT of its GPUs; NULL when no GPU reported it
    outcome     TEXT    NOT NULL,
    ended_at    REAL    NOT NULL,
    UNIQUE (task_id, attempt)
);
CREATE INDEX history_fingerprint ON history(fingerprint, id);
CREATE INDEX history_family ON history(family, id);
)sql"},
    {4, R"sql(
-- The GPU energy attributed to the attempt (`carma acct`): joules, accumulated while it runs
-- (daemon/daemon_acct.cpp); NULL where no GPU of it reported energy, and for attempts recorded
-- before this step.
ALTER TABLE attempts ADD COLUMN energy_j REAL;
)sql"},
    {5, R"sql(
-- Where the attempt ran when CARMA schedules over several nodes (`carma agent`): the node's
-- name and the Slurm job of the allocation its agent ran in, so `sacct` and `carma acct` join.
-- Empty for attempts on the daemon's own GPUs and for those recorded before this step.
ALTER TABLE attempts ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN slurm_job TEXT NOT NULL DEFAULT '';
)sql"},
    {6, R"sql(
-- Per-user limits count a user's waiting tasks at every submission, and the live view counts
-- every user's: from the index alone, not a scan of a table that may hold 100,000 tasks. It
-- answers what tasks_state did, too.
CREATE INDEX tasks_state_uid ON tasks(state, uid);
DROP INDEX tasks_state;
-- The live view's "finished recently" and accounting by time, without a scan.
CREATE INDEX tasks_finished_at ON tasks(finished_at);
)sql"},
    {7, R"sql(
-- Why an attempt was not seen on its GPUs ("not-seen", "no-memory": core/knowledge.h
-- Observation); NULL when it was, and for rows recorded before this step. Such a row teaches its
-- run time only: its peak of 0 is not a need.
ALTER TABLE history ADD COLUMN unobserved TEXT;
)sql"},
    {8, R"sql(
-- `carma` learns its own error (core/speed_correction.h): per attempt, the time it ran with
-- GPU-active co-runners (0: alone, so its run time is solo history), and where it shared, the
-- sharing class and the factor k by which its slowdown exceeded the prediction. NULL for rows
-- recorded before this step: unknown whether they ran alone, so they are no solo history.
ALTER TABLE history ADD COLUMN shared_s REAL;
ALTER TABLE history ADD COLUMN sharing_class TEXT;
ALTER TABLE history ADD COLUMN speed_k REAL;
)sql"},
    {9, R"sql(
-- Fair share (core/fair_share.h): per user, the GPU-seconds charged, decayed to at_s (unix
-- seconds); and per attempt what it was charged and, where it shared its GPUs, the slowdown it
-- saw (its run time over the solo run time its command's history predicts). NULL for attempts
-- recorded before this step.
CREATE TABLE usage (
    user  TEXT PRIMARY KEY,
    gpu_s REAL NOT NULL,
    at_s  REAL NOT NULL
);
ALTER TABLE attempts ADD COLUMN charged_gpu_s REAL;
ALTER TABLE attempts ADD COLUMN slowdown REAL;
)sql"},
    {10, R"sql(
-- The whole server (core/host.h): the cores an attempt held (its cpuset), and what its fence
-- (cgroup) counted: CPU time and the peak of its host memory. NULL where no fence counted them.
ALTER TABLE attempts ADD COLUMN cores_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE attempts ADD COLUMN total_cpu_s REAL;
ALTER TABLE attempts ADD COLUMN max_rss_mib INTEGER;
)sql"},
};

constexpr bool migrations_are_consecutive() {
    int expected = 1;
    for (const Migration& m : kMigrations) {
        if (m.version != expected) {
            return false;
        }
        ++expected;
    }
    return expected - 1 == kSchemaVersion;
}
static_assert(migrations_are_consecutive(), "kMigrations must be steps 1, 2, ..., kSchemaVersion");

std::string too_new_message(const std::string& path, int found) {
    return fmt::format(
        "database {} has schema version {}, but this build of carma knows only up to "
        "version {}; upgrade carma or point --state-dir elsewhere",
        path, found, kSchemaVersion);
}

}  // namespace

// ---- opening ----------------------------------------------------------------------------------

// The daemon creates the state directory. A missing or read-only one is a deployment mistake
// that SQLite would only report as "unable to open database file", so it is named here.
Result<void> check_directory(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) {
        dir = ".";
    }
    std::error_code ec;
    const fs::file_status status = fs::status(dir, ec);
    const auto refuse = [&](const std::string& why) {
        return fail(ErrorCode::Io, fmt::format("cannot open the database {}: {}", path, why));
    };
    if (status.type() == fs::file_type::not_found) {
        return refuse(
            fmt::format("directory {} does not exist (the daemon creates its state "
                        "directory; check --state-dir)",
                        dir.string()));
    }
    if (ec) {
        return refuse(fmt::format("cannot inspect directory {}: {}", dir.string(), ec.message()));
    }
    if (!fs::is_directory(status)) {
        return refuse(fmt::format("{} is not a directory", dir.string()));
    }
    // SQLite creates the -wal and -shm files next to the database, so the directory itself, not
    // only the file, must be writable.
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
        return refuse(fmt::format("directory {} is not writable by this user: {}", dir.string(),
                                  std::strerror(errno)));
    }
    return {};
}

// Throws SQLite::Exception or std::runtime_error; Store::open adds the path.
void configure(SQLite::Database& db) {
    // SQLite silently falls back to read-only when the file is not writable; the daemon would
    // then fail on its first write instead of at startup.
    if (sqlite3_db_readonly(db.getHandle(), "main") == 1) {
        throw std::runtime_error("the file is not writable by this user");
    }
    // WAL: readers in other processes (sqlite3, backups) do not block the daemon's writes, and
    // a commit appends its pages to the log instead of first copying the old ones to a journal.
    const std::string mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
    if (mode != "wal") {
        throw std::runtime_error(
            fmt::format("cannot use WAL journal mode (got '{}'); put the "
                        "state directory on a local filesystem",
                        mode));
    }
    // With WAL, NORMAL can lose the last commits on power failure but never corrupts the file,
    // and it saves an fsync per transaction.
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
}

// Brings the file to kSchemaVersion. IMMEDIATE: two daemons starting at once must not both
// decide to run the same step; the second waits, then sees the new user_version.
Result<int> migrate(SQLite::Database& db, const std::string& path) {
    int found = 0;
    try {
        SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
        found = db.execAndGet("PRAGMA user_version").getInt();
        if (found > kSchemaVersion) {
            return fail(ErrorCode::InvalidArgument, too_new_message(path, found));
        }
        for (const Migration& m : kMigrations) {
            if (m.version > found) {
                db.exec(m.sql);
            }
        }
        if (found < kSchemaVersion) {
            // user_version lives in the file header and is part of the transaction.
            db.exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion));
        }
        tx.commit();
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot migrate the database {} from schema "
                                               "version {} to {}: {}",
                                               path, found, kSchemaVersion, e.what()));
    }
    return kSchemaVersion;
}

}  // namespace carma::store::detail
