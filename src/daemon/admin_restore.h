#pragma once
// `carma admin restore FILE`: puts a backup (`carma admin backup`) in place of a stopped daemon's
// database and makes the state directory agree with it, so the daemon starts from the backup
// as if from its own last stop:
//   - refused while a daemon holds the state directory (its lock, daemon.lock), naming its pid;
//   - the backup is checked before anything is touched (store::read_backup);
//   - the replaced carma.db with its -wal and -shm is moved into restore-<time>/ in the state
//     directory, never deleted;
//   - attempt directories the backup does not know (they ran after it) are kept there too, as
//     records of what ran, so no new attempt is given their names; those still running are
//     stopped first (their shims' SIGTERM, then SIGKILL), since the restored database does not
//     know them and no daemon would ever follow them;
//   - task ids continue after every id ever used: the backup's, the replaced database's and
//     the attempt directories' (core/restore_plan.h);
//   - tasks running in the backup are left running: the daemon re-attaches them when it starts
//     (daemon_restore.cpp), or records how they ended meanwhile.

#include <string>
#include <vector>

#include "core/restore_plan.h"
#include "core/result.h"

namespace carma::daemon {

struct RestoreReport {
    std::string database;                // <state dir>/carma.db, now the backup's
    std::string aside;                   // where the replaced files and newer attempts went
    std::vector<std::string> moved;      // the database files moved there (names)
    std::vector<AttemptDir> newer;       // attempts kept there as records
    std::vector<AttemptDir> stopped;     // of those, the ones that were still running
    TaskId last_id = 0;                  // the next task gets the id after it
    std::size_t running = 0;             // tasks running in the backup (re-attached at start)
    std::vector<std::string> warnings;   // what could not be done and did not stop the restore
};

// `stop_wait_s`: how long a running newer attempt gets to end after its shim's SIGTERM (the task
// then has its own grace period) before both are killed.
Result<RestoreReport> restore_state_dir(const std::string& state_dir, const std::string& backup,
                                        double stop_wait_s = 60);

}  // namespace carma::daemon
