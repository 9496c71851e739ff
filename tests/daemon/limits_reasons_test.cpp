// What a user's waiting tasks are told, end to end: max_gpus_per_user counts physical GPUs, and
// a task not yet looked at by a scheduling round says so instead of "-".

#include <string>
#include <vector>

#include "daemon/daemon_fixture.h"

namespace carma {
namespace {

using namespace daemon_test;

// This test verifies that max_gpus_per_user counts the physical GPUs a user's running tasks
// hold, as Slurm's MaxTRESPerUser=gres/gpu: on the one GPU the daemon may use, with a limit of
// 2, three of the user's tasks run at once, collocated (they hold one GPU); counting tasks, the
// third waited for one of the others to end.
TEST_F(DaemonTest, MaxGpusPerUserCountsPhysicalGpus) {
    start("oracle-MAGM", {"--exclude-gpus", "1,2,3", "--config",
                          write_config(dir_, "limits: {max_gpus_per_user: 2}\n")});
    const TaskId busy = submit(fake_job("efficientNet", 1800));  // 3,752 MiB, 30 s wall
    ASSERT_TRUE(eventually([&] { return state(busy) == "running"; })) << task(busy).dump(2);
    const TaskId first = submit(fake_job("dlrm", 1200));   // 1,468 MiB, 20 s wall
    ASSERT_TRUE(eventually([&] { return state(first) == "running"; })) << task(first).dump(2);
    const TaskId second = submit(fake_job("dlrm", 1200));
    ASSERT_TRUE(eventually([&] { return all_running({busy, first, second}); }, 15s))
        << task(second).dump(2) << daemon_log();
    auto share = client().share();
    ASSERT_TRUE(share);
    for (const json& u : (*share)["users"]) {
        if (u["tasks_running"] == 3) {
            EXPECT_EQ(u["gpus_running"], 1) << share->dump(2);
        }
    }
    for (TaskId id : {busy, first, second}) {
        ASSERT_TRUE(client().cancel(id));
    }
}

// This test verifies that a task just submitted carries a reason before any round has looked
// at it (`carma queue` showed "-"), in the submission's answer and in the store.
TEST_F(DaemonTest, NewTaskSaysItIsNotYetConsidered) {
    start("carma");
    auto answer = client().submit(fake_job("dlrm", 60));
    ASSERT_TRUE(answer) << answer.error().message;
    const std::string message = (*answer)["message"].get<std::string>();
    EXPECT_NE(message.find("not yet considered"), std::string::npos) << answer->dump(2);
}

}  // namespace
}  // namespace carma
