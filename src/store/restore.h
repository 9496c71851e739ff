#pragma once
// The database side of `carma admin restore` (daemon/admin_restore.h): reading a backup before it
// replaces a daemon's database, and carrying the task ids forward so that none repeats. Each
// opens its file alone, with no daemon running.

#include <cstddef>
#include <map>
#include <string>

#include "core/result.h"
#include "core/task_id.h"

namespace carma::store {

struct BackupContents {
    int schema_version = 0;
    TaskId last_id = 0;                // the highest id it handed out (deleted tasks' included)
    std::map<TaskId, int> attempts;    // each task: the highest attempt number it knows (0: none)
    std::size_t running = 0;           // tasks it has running, which a daemon re-attaches to
};

// A backup as `carma admin backup` makes it (any copy of a CARMA database): refused, naming the
// file and what is wrong, when it is not an SQLite database, fails PRAGMA quick_check, holds no
// CARMA tables, or was written by a newer carma (its schema version above this one's).
Result<BackupContents> read_backup(const std::string& path);

// The highest task id the database at `path` (with its -wal) ever handed out; read-only.
Result<TaskId> last_task_id(const std::string& path);

// Makes the database at `path` hand out ids after `last_id` (never lowers them).
Result<void> raise_last_task_id(const std::string& path, TaskId last_id);

}  // namespace carma::store
