// History in the store: rows round-trip, queries select the command's or the family's newest
// rows oldest first, retention bounds each command and family, and a schema-2 database is
// migrated with its tasks intact.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include <SQLiteCpp/SQLiteCpp.h>

#include "store/store.h"
#include "store/store_fixture.h"

namespace carma::store {
namespace {

namespace fs = std::filesystem;

using HistoryTest = StoreFixture;

HistoryRow row(TaskId task, int attempt, const std::string& fingerprint, MiB peak,
               const std::string& outcome = "succeeded", const std::string& family = "fam") {
    HistoryRow r;
    r.task = task;
    r.attempt = attempt;
    r.fingerprint = fingerprint;
    r.family = family;
    r.uid = 4000000000;
    r.gpus = 2;
    r.peak_per_gpu = {{0, peak - 10}, {3, peak}};
    r.peak_mib = peak;
    r.run_s = 600.25 + task;
    r.activity = 0.125 * attempt;
    r.outcome = outcome;
    r.ended_at = 1700000000.5 + task;
    return r;
}

// This test verifies that a row comes back with every field as written, an unknown activity
// stays unknown, and the knowledge rule reads the outcome right.
TEST_F(HistoryTest, RoundTripsARow) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    const HistoryRow written = row(7, 2, "aaaa", 13236);
    HistoryRow unknown = row(8, 1, "aaaa", 900, "out-of-memory");
    unknown.activity.reset();
    ASSERT_TRUE(store->add_history(written));
    ASSERT_TRUE(store->add_history(unknown));
    auto rows = store->command_history("aaaa", 10);
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 2u);
    const HistoryRow& r = (*rows)[0];
    EXPECT_EQ(r.task, 7);
    EXPECT_EQ(r.attempt, 2);
    EXPECT_EQ(r.fingerprint, "aaaa");
    EXPECT_EQ(r.family, "fam");
    EXPECT_EQ(r.uid, 4000000000);
    EXPECT_EQ(r.gpus, 2);
    EXPECT_EQ(r.peak_per_gpu, written.peak_per_gpu);
    EXPECT_EQ(r.peak_mib, 13236);
    EXPECT_EQ(r.run_s, written.run_s);
    EXPECT_EQ(r.activity, 0.25);
    EXPECT_EQ(r.outcome, "succeeded");
    EXPECT_EQ(r.ended_at, written.ended_at);
    EXPECT_FALSE((*rows)[1].activity);

    const std::vector<RunFacts> facts = run_facts(*rows);
    EXPECT_TRUE(facts[0].succeeded);
    EXPECT_FALSE(facts[0].out_of_memory);
    EXPECT_EQ(facts[0].peak_mib, 13236);
    EXPECT_FALSE(facts[1].succeeded);
    EXPECT_TRUE(facts[1].out_of_memory);
    EXPECT_EQ(facts[1].peak_mib, 900);
}

// This test verifies that a row of an attempt never seen on its GPUs keeps why (issue 19, item
// 4), and that the knowledge rule reads it as unobserved; a seen row reads as observed.
TEST_F(HistoryTest, AnUnobservedRowRoundTrips) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    HistoryRow unseen = row(9, 1, "bbbb", 0);
    unseen.peak_per_gpu.clear();
    unseen.activity.reset();
    unseen.unobserved = "not-seen";
    ASSERT_TRUE(store->add_history(unseen));
    ASSERT_TRUE(store->add_history(row(10, 1, "bbbb", 5000)));
    auto rows = store->command_history("bbbb", 10);
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 2u);
    EXPECT_EQ((*rows)[0].unobserved, "not-seen");
    EXPECT_EQ((*rows)[1].unobserved, "");
    const std::vector<RunFacts> facts = run_facts(*rows);
    EXPECT_FALSE(facts[0].observed);
    EXPECT_TRUE(facts[0].succeeded);
    EXPECT_TRUE(facts[1].observed);
}

// This test verifies that what an attempt teaches of the predictor's error (issue 19, item 2)
// is kept with its row: the time it shared, its sharing class and factor k. The store hands the
// factors back oldest first, and solo history is the median of the runs that shared nothing.
TEST_F(HistoryTest, SpeedFactorsRoundTrip) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    HistoryRow solo_a = row(1, 1, "cccc", 100);
    solo_a.run_s = 100;
    solo_a.shared_s = 0;
    HistoryRow solo_b = row(2, 1, "cccc", 100);
    solo_b.run_s = 120;
    solo_b.shared_s = 0;
    HistoryRow unknown = row(3, 1, "cccc", 100);  // recorded before step 8: no solo history
    unknown.run_s = 5;
    HistoryRow shared = row(4, 1, "cccc", 100);
    shared.run_s = 200;
    shared.shared_s = 150;
    shared.sharing_class = "mps/medium";
    shared.speed_k = 1.5;
    HistoryRow shared2 = row(5, 1, "dddd", 100, "succeeded", "other");
    shared2.shared_s = 10;
    shared2.sharing_class = "mps/heavy";
    shared2.speed_k = 0.75;
    for (const HistoryRow& r : {solo_a, solo_b, unknown, shared, shared2}) {
        ASSERT_TRUE(store->add_history(r));
    }
    auto rows = store->command_history("cccc", 10);
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 4u);
    EXPECT_EQ((*rows)[0].shared_s, 0.0);
    EXPECT_FALSE((*rows)[2].shared_s);
    EXPECT_EQ((*rows)[3].shared_s, 150.0);
    EXPECT_EQ((*rows)[3].sharing_class, "mps/medium");
    EXPECT_EQ((*rows)[3].speed_k, 1.5);
    EXPECT_FALSE((*rows)[0].speed_k);
    EXPECT_EQ(solo_run_s(*rows), 110.0);
    auto factors = store->speed_factors();
    ASSERT_TRUE(factors) << factors.error().message;
    ASSERT_EQ(factors->size(), 2u);
    EXPECT_EQ((*factors)[0].family, "fam");
    EXPECT_EQ((*factors)[0].sharing_class, "mps/medium");
    EXPECT_EQ((*factors)[0].k, 1.5);
    EXPECT_EQ((*factors)[1].family, "other");
    EXPECT_EQ((*factors)[1].k, 0.75);
}

// This test verifies that a schema-7 database (history without the speed-correction columns)
// is migrated: its rows stay, they are no solo history (unknown whether they shared) and hold
// no factor, and new rows keep theirs.
TEST_F(HistoryTest, MigratesASchemaSevenDatabase) {
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        ASSERT_TRUE(store->add_history(row(1, 1, "eeee", 100)));
    }
    downgrade_to(7);
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    auto rows = store->command_history("eeee", 10);
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_FALSE((*rows)[0].shared_s);
    EXPECT_FALSE(solo_run_s(*rows));
    EXPECT_TRUE(store->speed_factors()->empty());
    HistoryRow fresh = row(2, 1, "eeee", 100);
    fresh.shared_s = 30;
    fresh.sharing_class = "timeslice/light";
    fresh.speed_k = 1.25;
    ASSERT_TRUE(store->add_history(fresh));
    ASSERT_EQ(store->speed_factors()->size(), 1u);
    EXPECT_EQ(store->speed_factors()->front().k, 1.25);
}

// This test verifies that recording the same attempt twice (an end stored again after a failed
// write) keeps one row.
TEST_F(HistoryTest, SameAttemptCountsOnce) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->add_history(row(1, 1, "aaaa", 100)));
    ASSERT_TRUE(store->add_history(row(1, 1, "aaaa", 120)));
    auto rows = store->command_history("aaaa", 10);
    ASSERT_TRUE(rows);
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].peak_mib, 120);
}

// This test verifies the queries: newest N, oldest first; the family leaves out the command's
// own rows and other families.
TEST_F(HistoryTest, QueriesSelectNewestOldestFirst) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= 5; ++i) {
        ASSERT_TRUE(store->add_history(row(i, 1, "aaaa", 1000 * i)));
    }
    ASSERT_TRUE(store->add_history(row(6, 1, "bbbb", 6000)));
    ASSERT_TRUE(store->add_history(row(7, 1, "cccc", 7000)));
    ASSERT_TRUE(store->add_history(row(8, 1, "dddd", 8000, "succeeded", "other")));
    auto mine = store->command_history("aaaa", 3);
    ASSERT_TRUE(mine);
    ASSERT_EQ(mine->size(), 3u);
    EXPECT_EQ((*mine)[0].task, 3);
    EXPECT_EQ((*mine)[2].task, 5);
    auto kin = store->family_history("fam", "aaaa", 10);
    ASSERT_TRUE(kin);
    ASSERT_EQ(kin->size(), 2u);
    EXPECT_EQ((*kin)[0].fingerprint, "bbbb");
    EXPECT_EQ((*kin)[1].fingerprint, "cccc");
    EXPECT_TRUE(store->command_history("nope", 10)->empty());
}

// This test verifies retention: each command keeps its newest per_command rows, each family
// its newest per_family rows; other commands are untouched; pruning old samples and events
// keeps history.
TEST_F(HistoryTest, RetentionIsBoundedPerCommandAndFamily) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    const HistoryLimits limits{3, 5};
    for (int i = 1; i <= 6; ++i) {
        ASSERT_TRUE(store->add_history(row(i, 1, "aaaa", i), limits));
    }
    auto mine = store->command_history("aaaa", 100);
    ASSERT_TRUE(mine);
    ASSERT_EQ(mine->size(), 3u);
    EXPECT_EQ((*mine)[0].task, 4);
    // Three more commands of the family: 3 + 3 rows > 5, so the oldest of "aaaa" go.
    for (int i = 10; i <= 12; ++i) {
        ASSERT_TRUE(store->add_history(row(i, 1, "x" + std::to_string(i), i), limits));
    }
    auto all_mine = store->command_history("aaaa", 100);
    ASSERT_TRUE(all_mine);
    ASSERT_EQ(all_mine->size(), 2u);
    EXPECT_EQ((*all_mine)[0].task, 5);
    ASSERT_TRUE(store->add_history(row(20, 1, "zzzz", 1, "succeeded", "other"), limits));
    ASSERT_TRUE(store->prune_history(1e12));
    EXPECT_EQ(store->command_history("zzzz", 100)->size(), 1u);
}

// This test verifies that a database of schema version 2 (before history) opens: it is migrated
// to the current version, its tasks read back (their specs have no learned figures yet), and
// history works in it.
TEST_F(HistoryTest, MigratesASchemaTwoDatabase) {
    TaskId id = 0;
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        TaskRow t;
        t.spec.name = "old";
        t.spec.command = {"python", "train.py"};
        t.submitted_at = 5;
        auto inserted = store->insert_task(t);
        ASSERT_TRUE(inserted);
        id = *inserted;
    }
    // Make it what schema 2 wrote: no history table, a spec without "learned".
    downgrade_to(2);
    {
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
        raw.exec(R"(UPDATE tasks SET spec_json = '{"name":"old","command":["python","train.py"],)"
                 R"("gpus":1,"memory":{},"workload":""}')");
    }
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    auto task = store->task(id);
    ASSERT_TRUE(task && task->has_value());
    EXPECT_EQ((*task)->spec.command, (std::vector<std::string>{"python", "train.py"}));
    EXPECT_FALSE((*task)->spec.learned.need_mib);
    EXPECT_EQ((*task)->spec.learned.runs, 0);
    ASSERT_TRUE(store->add_history(row(id, 1, "aaaa", 100)));
    EXPECT_EQ(store->command_history("aaaa", 10)->size(), 1u);
    SQLite::Database raw(path_, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
}

// This test verifies that the learned figures of a task are stored with it.
TEST_F(HistoryTest, LearnedFiguresRoundTrip) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    TaskRow t;
    t.spec.name = "learned";
    t.spec.command = {"x"};
    t.spec.learned.need_mib = 13236;
    t.spec.learned.margin_mib = 1024;
    t.spec.learned.lower_bound_mib = 6000;
    t.spec.learned.runs = 2;
    t.spec.learned.duration_s = 600.5;
    t.spec.learned.activity = 0.75;
    t.spec.learned.basis = "history: 2 run(s)";
    auto id = store->insert_task(t);
    ASSERT_TRUE(id);
    auto read = store->task(*id);
    ASSERT_TRUE(read && read->has_value());
    const Learned& l = (*read)->spec.learned;
    EXPECT_EQ(l.need_mib, 13236);
    EXPECT_EQ(l.margin_mib, 1024);
    EXPECT_EQ(l.lower_bound_mib, 6000);
    EXPECT_EQ(l.runs, 2);
    EXPECT_EQ(l.duration_s, 600.5);
    EXPECT_EQ(l.activity, 0.75);
    EXPECT_EQ(l.basis, "history: 2 run(s)");
}

}  // namespace
}  // namespace carma::store
