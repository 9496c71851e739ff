// `carma admin restore FILE` (issue 45, item 2) under running tasks: a backup taken while task A
// ran; then B started and C ran to its end; the daemon stopped with A and B still running. The
// restore puts the backup back, ends B (the backup does not know it) and keeps B's and C's
// attempt directories aside as records; the daemon started again re-attaches A, and a new task
// gets an id past C's and a fresh attempt directory.

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/daemon_fixture.h"
#include "daemon/daemon_programs.h"

namespace carma::daemon_test {
namespace {

using ::testing::HasSubstr;

class RestoreTest : public DaemonTest {
protected:
    // `carma admin ARGS` on the test's state directory: its exit status and output.
    std::pair<int, std::string> admin(const std::string& args) {
        const std::string out = dir_ + "/admin.out";
        const std::string cmd = fmt::format("{} admin {} --state-dir {}/state >{} 2>&1",
                                            CARMA_BIN, args, dir_, out);
        const int rc = std::system(cmd.c_str());
        return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_text(out)};
    }

    std::string attempt_dir(TaskId id, int number) const {
        return fmt::format("{}/state/attempts/{}/{}", dir_, id, number);
    }

    // Whether the task group of an attempt still has a process.
    bool group_alive(const std::string& attempt) const {
        pid_t pgid = 0;
        std::ifstream(attempt + "/task.pid") >> pgid;
        return pgid > 1 && ::kill(-pgid, 0) == 0;
    }
};

// This test verifies that a restore under running tasks re-attaches the task the backup knew
// as running, ends the one it did not know, keeps every attempt newer than the backup as a
// record, and that task ids and attempt directories never repeat afterwards.
TEST_F(RestoreTest, UnderRunningTasks) {
    start("exclusive");
    const TaskId a = submit(fake_job("resnet3", 12000));
    ASSERT_TRUE(eventually([&] { return state(a) == "running" && group_alive(attempt_dir(a, 1)); }));
    auto [backup_rc, backup_out] = admin("backup " + dir_ + "/backup.db");
    ASSERT_EQ(backup_rc, 0) << backup_out;
    EXPECT_THAT(backup_out, HasSubstr("carma admin restore"));

    const TaskId b = submit(fake_job("resnet3", 12000));
    const TaskId c = submit(fake_job("resnet3", 30));
    ASSERT_TRUE(eventually([&] { return state(b) == "running" && group_alive(attempt_dir(b, 1)); }));
    EXPECT_EQ(wait_final(c)["state"], "succeeded");

    // Refused while the daemon runs, naming it; nothing is touched.
    auto [busy_rc, busy_out] = admin("restore " + dir_ + "/backup.db");
    EXPECT_NE(busy_rc, 0);
    EXPECT_THAT(busy_out, HasSubstr(fmt::format("the carma daemon (pid {}) is running", daemon_)));
    EXPECT_TRUE(fs::exists(attempt_dir(c, 1)));

    stop(SIGTERM);
    ASSERT_TRUE(group_alive(attempt_dir(a, 1)));
    ASSERT_TRUE(group_alive(attempt_dir(b, 1)));

    auto [rc, out] = admin("restore " + dir_ + "/backup.db");
    ASSERT_EQ(rc, 0) << out;
    EXPECT_THAT(out, HasSubstr("1 task(s) running in it are re-attached"));
    EXPECT_THAT(out, HasSubstr(fmt::format("{}/1, {}/1", b, c)));
    EXPECT_THAT(out, HasSubstr(fmt::format("task ids continue after {}", c)));
    // A runs on: the backup knows it.
    EXPECT_TRUE(group_alive(attempt_dir(a, 1)));
    std::string aside;
    for (const auto& e : fs::directory_iterator(dir_ + "/state")) {
        if (e.path().filename().string().starts_with("restore-")) {
            aside = e.path().string();
        }
    }
    ASSERT_FALSE(aside.empty()) << out;
    EXPECT_TRUE(fs::exists(aside + "/carma.db")) << "the replaced database was not kept";
    for (TaskId id : {b, c}) {
        const std::string kept = fmt::format("{}/attempts/{}/1", aside, id);
        EXPECT_TRUE(fs::exists(kept + "/exit.json")) << kept << " was not kept with its end";
        EXPECT_FALSE(fs::exists(attempt_dir(id, 1)));
    }
    EXPECT_FALSE(group_alive(fmt::format("{}/attempts/{}/1", aside, b))) << "B still runs";
    EXPECT_TRUE(fs::exists(attempt_dir(a, 1)));

    start("exclusive");
    const json restored = task(a);
    EXPECT_EQ(restored["state"], "running") << restored.dump(2);
    EXPECT_EQ(restored["attempts"], 1) << "A was launched again instead of re-attached";
    EXPECT_FALSE(client().task(b)) << "B is not in the backup";
    EXPECT_THAT(daemon_log(), HasSubstr("1 running attempt(s)"));

    const TaskId d = submit(fake_job("resnet3", 30));
    EXPECT_GT(d, c) << "a task id was handed out again";
    const json done = wait_final(d);
    EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
    EXPECT_TRUE(group_alive(attempt_dir(a, 1))) << "A did not survive the restore";
}

// This test verifies that a file that is not a backup is refused before anything is touched.
TEST_F(RestoreTest, RefusesWhatIsNotABackup) {
    start("exclusive");
    stop(SIGTERM);
    std::ofstream(dir_ + "/notes.db") << "not a database";
    auto [rc, out] = admin("restore " + dir_ + "/notes.db");
    EXPECT_NE(rc, 0);
    EXPECT_THAT(out, HasSubstr(dir_ + "/notes.db"));
    EXPECT_TRUE(fs::exists(dir_ + "/state/carma.db"));
    for (const auto& e : fs::directory_iterator(dir_ + "/state")) {
        EXPECT_FALSE(e.path().filename().string().starts_with("restore-")) << e.path();
    }
}

}  // namespace
}  // namespace carma::daemon_test
