#pragma once
// What `carma admin restore` does with a state directory besides putting the backup's database
// in place: which attempt directories ran after the backup (kept as records, moved out of the
// way so no new attempt is given their names) and where task ids must resume so that none
// repeats. Pure: the caller lists the directories and reads the databases.

#include <map>
#include <vector>

#include "core/task_id.h"

namespace carma {

// attempts/<task>/<number> of a state directory.
struct AttemptDir {
    TaskId task = 0;
    int number = 0;
    bool operator==(const AttemptDir&) const = default;
    auto operator<=>(const AttemptDir&) const = default;
};

struct RestoreInput {
    // Every task of the backup (any state) and the highest attempt number it knows of it (0: none
    // started).
    std::map<TaskId, int> backup_attempts;
    TaskId backup_last_id = 0;   // the highest id the backup ever handed out
    TaskId current_last_id = 0;  // the same of the database being replaced (0: unreadable)
    std::vector<AttemptDir> on_disk;
};

struct RestorePlan {
    // Attempts the backup does not know: of tasks newer than it, or later attempts of its tasks.
    // Sorted. A directory of a task the backup no longer has (deleted by retention before it) is
    // not one of them: it is older.
    std::vector<AttemptDir> newer;
    // The highest id ever used, anywhere: the next task gets the one after it.
    TaskId last_id = 0;
};

RestorePlan plan_restore(const RestoreInput& input);

}  // namespace carma
