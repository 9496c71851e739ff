#include "core/restore_plan.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies which attempt directories ran after a backup: every attempt of a task
// newer than it, and the later attempts of its own tasks; an older task's directory (its row
// deleted by retention before the backup) and the attempts the backup knows stay.
TEST(RestorePlanTest, AttemptsNewerThanTheBackup) {
    RestoreInput in;
    // The backup: task 38 finished after one attempt, 39 ran its first attempt, 40 waited.
    in.backup_attempts = {{38, 1}, {39, 1}, {40, 0}};
    in.backup_last_id = 40;
    in.current_last_id = 44;
    in.on_disk = {{12, 1},            // task 12: deleted before the backup
                  {38, 1}, {39, 1},   // known
                  {39, 2},            // 39 ran out of memory and ran again after the backup
                  {40, 1},            // 40 started after the backup
                  {42, 1}, {41, 1}};  // tasks submitted after it (43 and 44 never started)
    const RestorePlan plan = plan_restore(in);
    EXPECT_EQ(plan.newer,
              (std::vector<AttemptDir>{{39, 2}, {40, 1}, {41, 1}, {42, 1}}));
    EXPECT_EQ(plan.last_id, 44);
}

// This test verifies that ids resume past every id ever used: the backup's, the replaced
// database's (when it could be read) and the attempt directories'.
TEST(RestorePlanTest, IdsNeverRepeat) {
    RestoreInput in;
    in.backup_attempts = {{5, 1}};
    in.backup_last_id = 6;  // task 6 was deleted: its id is still used
    EXPECT_EQ(plan_restore(in).last_id, 6);
    in.current_last_id = 0;  // unreadable
    in.on_disk = {{9, 1}};
    EXPECT_EQ(plan_restore(in).last_id, 9);
    in.current_last_id = 11;
    EXPECT_EQ(plan_restore(in).last_id, 11);
    in.backup_last_id = 0;  // a backup whose sequence is missing still counts its rows
    in.current_last_id = 0;
    in.on_disk.clear();
    EXPECT_EQ(plan_restore(in).last_id, 5);
}

}  // namespace
}  // namespace carma
