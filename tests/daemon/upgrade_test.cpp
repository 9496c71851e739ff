// Upgrades: a daemon of this build starts from the database of each released schema
// (tests/store/fixtures/schema-N.sql) and loses nothing of it (issue 24, item 4).

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "daemon/daemon_fixture.h"
#include "store/store.h"

namespace carma {
namespace {

using namespace daemon_test;  // the fixture, eventually, read_text, fs, json

// The database carma 0.1.0 left: tasks 1 (succeeded, --env EPOCHS=3, resnet3 at 13,236 MiB),
// 2 (failed), 3 and 4 (an array, succeeded), 5 (held), 6 (cancelled).
constexpr const char* kReleaseFixture = CARMA_FIXTURES_DIR "/schema-8.sql";

class UpgradeTest : public DaemonTest {
protected:
    std::string database() const { return dir_ + "/state/carma.db"; }

    // The state directory with the fixture's database in it, as the release left it.
    void restore_fixture(const std::string& fixture) {
        fs::create_directories(dir_ + "/state");
        SQLite::Database db(database(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        db.exec(read_text(fixture));
    }
};

// This test verifies that the first release's database comes through a start of this build:
// every task with its state, environment, attempts and message; accounting; the history a new
// run of the same training code is planned from; and the queue, where the held task runs once
// released. A migration first leaves a copy of the file as it was (carma.db.schema-8), which
// carma 0.1.0 could open again.
TEST_F(UpgradeTest, TheFirstReleasesDatabaseSurvives) {
    restore_fixture(kReleaseFixture);
    start("exclusive");
    SQLite::Database raw(database(), SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), store::kSchemaVersion);
    if (store::kSchemaVersion > 8) {
        SQLite::Database before(database() + ".schema-8", SQLite::OPEN_READONLY);
        EXPECT_EQ(before.execAndGet("PRAGMA user_version").getInt(), 8);
        EXPECT_EQ(before.execAndGet("SELECT count(*) FROM tasks").getInt(), 6);
    }

    auto listed = client().list_tasks(true);
    ASSERT_TRUE(listed) << listed.error().message;
    std::map<TaskId, std::string> states;
    for (const json& t : (*listed)["tasks"]) {
        states[t["id"].get<TaskId>()] = t["state"].get<std::string>();
    }
    EXPECT_EQ(states, (std::map<TaskId, std::string>{{1, "succeeded"},
                                                     {2, "failed"},
                                                     {3, "succeeded"},
                                                     {4, "succeeded"},
                                                     {5, "held"},
                                                     {6, "cancelled"}}));
    const json resnet = task(1);
    EXPECT_EQ(resnet["env"], json({{"EPOCHS", "3"}}));
    ASSERT_EQ(resnet["attempt_list"].size(), 1u) << resnet.dump(2);
    EXPECT_EQ(resnet["attempt_list"][0]["peak_mib"], json({{"0", 13236}}));
    EXPECT_NE(task(2)["message"].get<std::string>().find("exit code 1"), std::string::npos);
    EXPECT_EQ(task(4)["array"], json({{"id", 3}, {"index", 1}}));

    auto acct = client().acct({});
    ASSERT_TRUE(acct) << acct.error().message;
    std::vector<TaskId> accounted;
    for (const json& row : (*acct)["tasks"]) {
        accounted.push_back(row["id"].get<TaskId>());
    }
    EXPECT_EQ(accounted, (std::vector<TaskId>{1, 2, 3, 4, 6}));

    // The history: resnet3's run (13,236 MiB) teaches a new run of the same code. Its exact key
    // held the release's program path, so it is found as the family's.
    auto estimate = client().estimate(
        {{"command", {CARMA_FAKEJOB_PATH, "--profile", "resnet3", "--duration-s", "30"}},
         {"workdir", "/tmp"}});
    ASSERT_TRUE(estimate) << estimate.error().message;
    EXPECT_EQ((*estimate)["family_history"]["runs"], 1) << estimate->dump(2);
    EXPECT_EQ((*estimate)["family_history"]["peak_mib"], 13236) << estimate->dump(2);

    ASSERT_TRUE(client().hold(TaskRef::of(5), false));
    EXPECT_EQ(wait_final(5)["state"], "succeeded");
}

// This test verifies that a database a newer carma wrote is refused at start, naming the file,
// both versions and what to do, and is left as it was: a downgrade never loses it.
TEST_F(UpgradeTest, ADowngradeIsRefused) {
    restore_fixture(kReleaseFixture);
    {
        SQLite::Database db(database(), SQLite::OPEN_READWRITE);
        db.exec(fmt::format("PRAGMA user_version = {}", store::kSchemaVersion + 1));
    }
    const std::string log = dir_ + "/refused.log";
    const int rc = std::system(fmt::format("{} serve --gpus emulated:1xA100-40GB --state-dir {} "
                                           "--socket {} >{} 2>&1",
                                           CARMA_BIN, dir_ + "/state", socket_, log)
                                   .c_str());
    EXPECT_NE(rc, 0);
    const std::string said = read_text(log);
    EXPECT_NE(said.find(database()), std::string::npos) << said;
    EXPECT_NE(said.find(fmt::format("schema version {}", store::kSchemaVersion + 1)),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("upgrade carma"), std::string::npos) << said;
    SQLite::Database db(database(), SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), store::kSchemaVersion + 1);
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM tasks").getInt(), 6);
}

}  // namespace
}  // namespace carma
