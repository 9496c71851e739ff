#include "core/restore_plan.h"

#include <algorithm>

namespace carma {

RestorePlan plan_restore(const RestoreInput& input) {
    RestorePlan plan;
    plan.last_id = std::max(input.backup_last_id, input.current_last_id);
    for (const auto& [id, attempts] : input.backup_attempts) {
        (void)attempts;
        plan.last_id = std::max(plan.last_id, id);
    }
    for (const AttemptDir& dir : input.on_disk) {
        plan.last_id = std::max(plan.last_id, dir.task);
        const auto known = input.backup_attempts.find(dir.task);
        const bool newer_task = known == input.backup_attempts.end() &&
                                dir.task > input.backup_last_id;
        const bool later_attempt =
            known != input.backup_attempts.end() && dir.number > known->second;
        if (newer_task || later_attempt) {
            plan.newer.push_back(dir);
        }
    }
    std::sort(plan.newer.begin(), plan.newer.end());
    return plan;
}

}  // namespace carma
