// Fair share in the daemon (issue 23), with two users made by useradd: usage charged to whoever
// ran, a light user's task going before a heavy user's older ones, --exclusive keeping a GPU to
// itself, what a user may not ask for, and GET /v1/share.

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "daemon/daemon_fixture.h"
#include "http_support.h"
#include "users.h"

namespace carma {
namespace {

using namespace daemon_test;  // the fixture, as_user, eventually, read_text, fs, json
using test_support::root_and_user;
using test_support::socket_request;

class FairShareDaemonTest : public DaemonTest {
protected:
    // `carma COMMAND --socket S ARGS` as `user`, in a directory of the user's: exit status and
    // what it printed.
    std::pair<int, std::string> carma_as(const passwd& user, const std::string& command,
                                         const std::string& args) {
        const std::string home = dir_ + "/" + user.pw_name;
        fs::create_directories(home);
        EXPECT_EQ(::chown(home.c_str(), user.pw_uid, user.pw_gid), 0);
        const std::string out = home + "/cli.out";
        const int rc = as_user(user, [&] {
            return std::system((carma_ + " " + command + " --socket " + socket_ + " " + args +
                                " >" + out + " 2>&1")
                                   .c_str()) == 0
                       ? 0
                       : 1;
        });
        return {rc, read_text(out)};
    }

    // A fake job of `profile` for `seconds` of model time, submitted by `user`; its id.
    TaskId fake_as(const passwd& user, const std::string& profile, int seconds,
                   const std::string& flags = "") {
        auto [rc, text] = carma_as(user, "submit",
                                   fmt::format("--json --export=NONE --workdir /tmp {} -- {} "
                                               "--profile {} --duration-s {}",
                                               flags, fakejob_, profile, seconds));
        EXPECT_EQ(rc, 0) << text;
        return rc == 0 ? json::parse(text)["id"].get<TaskId>() : 0;
    }

    double started(TaskId id) { return task(id)["attempt_list"][0]["started_at"].get<double>(); }

    // Two users made by useradd, and a daemon that preempts (an attempt may be stopped after a
    // minute of model time) on two GPUs; `flags` start it again.
    void start_preempting(std::optional<passwd>& alice, std::optional<passwd>& bob,
                          std::vector<std::string>& flags) {
        ASSERT_NO_FATAL_FAILURE(
            root_and_user("carma-test-alice", alice, "for two fair-share users"));
        ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-bob", bob, "for two fair-share users"));
        flags = {"--exclude-gpus", "2,3", "--config",
                 write_config(dir_, "preemption: true\npreempt_min_run: 1m\n")};
        start("carma", flags);
        carma_ = reachable_copy(CARMA_BIN);
        fakejob_ = reachable_copy(CARMA_FAKEJOB_PATH);
    }

    // Preemption's scenario on two GPUs (`flags` start the daemon): alice's two --exclusive tasks
    // hold them, `kept` without --requeue and `opted_in` with it, a task that checkpoints (its
    // first attempt leaves a file and runs until stopped, ignoring the SIGTERM until the shim's
    // SIGKILL after the fixture's 2-s grace, so that a test can kill the daemon before it ends;
    // the next attempt finds the file and is done); then bob's `light`, which can start nowhere.
    struct Preemption {
        TaskId kept = 0, opted_in = 0, light = 0;
    };
    Preemption preemption_scenario(const passwd& alice, const passwd& bob) {
        Preemption p;
        p.kept = fake_as(alice, "resnet3", 1500, "--exclusive");
        const std::string checkpoint = dir_ + "/" + alice.pw_name + "/checkpoint";
        auto [rc, text] = carma_as(
            alice, "submit",
            fmt::format("--json --export=NONE --workdir /tmp --exclusive --requeue -- /bin/sh -c "
                        "'test -e {0} && exit 0; /bin/touch {0}; trap \"/bin/sleep 30\" TERM; "
                        "/bin/sleep 600 & wait'",
                        checkpoint));
        EXPECT_EQ(rc, 0) << text;
        p.opted_in = rc == 0 ? json::parse(text)["id"].get<TaskId>() : 0;
        EXPECT_TRUE(eventually([&] {
            return state(p.kept) == "running" && state(p.opted_in) == "running";
        })) << daemon_log();
        p.light = fake_as(bob, "dlrm", 60);
        return p;
    }

    // The events of a kind so far (`preempting` on the attempt stopped).
    json events_of(const char* kind = "preempting") {
        json found = json::array();
        for (const json& e : events()) {
            if (e["kind"] == kind) {
                found.push_back(e);
            }
        }
        return found;
    }
    json preempting() { return events_of(); }

    std::string carma_;
    std::string fakejob_;
};

// This test verifies fair-share preemption in the daemon (`preemption: true`), on two GPUs that
// alice's two --exclusive tasks hold: bob's task, which can start nowhere, makes CARMA stop the
// one of alice's that opted in (--requeue) and never the other; the daemon is killed during the
// stop (the task takes its time to stop) and started again, and the stopped attempt still ends
// `preempted`; its task is queued again and succeeds on its next attempt (the task saw its
// checkpoint); bob's task runs before alice's other task ends; the events say who was stopped
// for whom, on both tasks.
TEST_F(FairShareDaemonTest, PreemptionStopsAnOptedInTaskOfTheOverServedUser) {
    std::optional<passwd> alice;
    std::optional<passwd> bob;
    std::vector<std::string> flags;
    ASSERT_NO_FATAL_FAILURE(start_preempting(alice, bob, flags));

    const auto [kept, opted_in, light] = preemption_scenario(*alice, *bob);
    EXPECT_EQ(task(opted_in)["requeue"], true);

    ASSERT_TRUE(eventually([&] { return !preempting().empty(); }, 60s)) << daemon_log();
    stop(SIGKILL);
    start("carma", flags);

    const json light_done = wait_final(light);
    EXPECT_EQ(light_done["state"], "succeeded") << daemon_log();
    const json stopped = wait_final(opted_in);
    EXPECT_EQ(stopped["state"], "succeeded") << stopped.dump(2);
    ASSERT_EQ(stopped["attempt_list"].size(), 2u) << stopped.dump(2);
    EXPECT_EQ(stopped["attempt_list"][0]["outcome"], "preempted");
    EXPECT_EQ(stopped["attempt_list"][1]["outcome"], "succeeded");
    EXPECT_GE(started(light), stopped["attempt_list"][0]["ended_at"].get<double>() - 1)
        << "bob's task took the place the stop freed";
    const json kept_done = wait_final(kept);
    EXPECT_EQ(kept_done["state"], "succeeded");
    EXPECT_EQ(kept_done["attempt_list"].size(), 1u) << "a task without --requeue is never stopped";
    EXPECT_LT(started(light), kept_done["finished_at"].get<double>())
        << "bob waited for alice's tasks to end: nothing was preempted";
    const json said = preempting();
    ASSERT_EQ(said.size(), 1u) << said.dump(2);
    // The end was collected by the daemon started again, which knew it for a preemption only
    // from the store.
    std::int64_t restarted = 0, ended = 0;
    for (const json& e : events()) {
        if (e["kind"] == "daemon-started") {
            restarted = e["id"].get<std::int64_t>();
        } else if (e["kind"] == "preempted" && e["task"] == opted_in) {
            ended = e["id"].get<std::int64_t>();
        }
    }
    EXPECT_GT(ended, restarted) << events().dump(2);
    EXPECT_EQ(said[0]["task"], opted_in);
    EXPECT_NE(said[0]["message"].get<std::string>().find(
                  fmt::format("so that task {} of carma-test-bob can start", light)),
              std::string::npos)
        << said.dump(2);
    const json room = events_of("room-made");
    ASSERT_EQ(room.size(), 1u) << room.dump(2);
    EXPECT_EQ(room[0]["task"], light);
    EXPECT_NE(room[0]["message"].get<std::string>().find(
                  fmt::format("of task {} of carma-test-alice is being stopped", opted_in)),
              std::string::npos)
        << room.dump(2);
}

// This test verifies that preemption cannot be farmed (issue 44, break 3): bob, who has used
// nothing, submits an --exclusive bait, waits until alice's --requeue task is being stopped for
// it, cancels the bait and submits the next. Before, each bait was a new waiting task with a stop
// of its own, and alice's task was stopped again for every one. Now bob's stops are at most
// preempt_max_stops (2 here) per window, whatever tasks they are for: the third bait stops
// nothing and says why; each cancelled bait charges bob the GPU time its stop lost, in its events
// and in his usage (`carma share`).
TEST_F(FairShareDaemonTest, BaitingPreemptionIsBoundedAndChargesTheBaiter) {
    std::optional<passwd> alice;
    std::optional<passwd> bob;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-alice", alice, "for two fair-share users"));
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-bob", bob, "for two fair-share users"));
    start("carma", {"--exclude-gpus", "2,3", "--config",
                    write_config(dir_, "preemption: true\npreempt_min_run: 1m\n"
                                       "preempt_max_stops: 2\npreempt_stops_window: 10h\n")});
    carma_ = reachable_copy(CARMA_BIN);
    fakejob_ = reachable_copy(CARMA_FAKEJOB_PATH);
    const TaskId kept = fake_as(*alice, "resnet3", 3000, "--exclusive");
    // It ignores SIGTERM, so that its stop takes the kill grace (2 s): bob cancels each bait
    // while it still waits, as the attack did.
    auto [rc, text] = carma_as(*alice, "submit",
                               "--json --export=NONE --workdir /tmp --exclusive --requeue -- "
                               "/bin/sh -c 'trap \"\" TERM; /bin/sleep 3000'");
    ASSERT_EQ(rc, 0) << text;
    const TaskId victim = json::parse(text)["id"].get<TaskId>();
    ASSERT_TRUE(eventually([&] { return state(kept) == "running" && state(victim) == "running"; }))
        << daemon_log();

    std::vector<TaskId> baits;
    for (int i = 0; i < 4; ++i) {
        const TaskId bait = fake_as(*bob, "dlrm", 60, "--exclusive");
        baits.push_back(bait);
        std::string outcome;
        ASSERT_TRUE(eventually(
            [&] {
                for (const json& e : events()) {
                    if (e["task"] == bait &&
                        (e["kind"] == "room-made" || e["kind"] == "preemption-budget")) {
                        outcome = e["kind"].get<std::string>();
                        return true;
                    }
                }
                return false;
            },
            60s))
            << daemon_log();
        auto [cancelled, said] = carma_as(*bob, "cancel", std::to_string(bait));
        ASSERT_EQ(cancelled, 0) << said;
        if (outcome == "preemption-budget") {
            break;
        }
        // alice's task ends preempted, is queued again and runs again.
        ASSERT_TRUE(eventually(
            [&] {
                const json t = task(victim);
                return t["state"] == "running" && t["attempt_list"].size() == baits.size() + 1;
            },
            60s))
            << task(victim).dump(2);
    }
    EXPECT_EQ(baits.size(), 3u) << "the third bait was the first to stop nothing";
    EXPECT_EQ(preempting().size(), 2u) << preempting().dump(2);
    const json spent = events_of("preemption-budget");
    ASSERT_EQ(spent.size(), 1u) << spent.dump(2);
    EXPECT_EQ(spent[0]["task"], baits.back());
    EXPECT_NE(spent[0]["message"].get<std::string>().find("preempt_max_stops"),
              std::string::npos)
        << spent.dump(2);
    const json charged = events_of("preemption-charged");
    ASSERT_EQ(charged.size(), 2u) << charged.dump(2);
    for (std::size_t i = 0; i < charged.size(); ++i) {
        EXPECT_EQ(charged[i]["task"], baits[i]);
        EXPECT_NE(charged[i]["message"].get<std::string>().find("carma-test-bob is charged"),
                  std::string::npos)
            << charged.dump(2);
    }
    // bob ran nothing, yet is charged the work his baits destroyed.
    auto share = client().share();
    ASSERT_TRUE(share);
    bool listed = false;
    for (const json& u : (*share)["users"]) {
        if (u["user"] == "carma-test-bob") {
            listed = true;
            EXPECT_GT(u["usage_gpu_hours"].get<double>(), 0) << u.dump();
            EXPECT_EQ(u["preemption_stops"], 2) << u.dump();
        }
    }
    EXPECT_TRUE(listed) << share->dump(2);
    EXPECT_EQ(state(kept), "running");
    EXPECT_EQ(task(victim)["attempt_list"].size(), 3u) << "alice's task was stopped twice";
}

// This test verifies that a cancel during a preemption's stop wins, across a restart: the task
// that was being stopped to be queued again ends cancelled, its attempt `cancelled`.
TEST_F(FairShareDaemonTest, ACancelDuringAPreemptionEndsTheTaskAcrossARestart) {
    std::optional<passwd> alice;
    std::optional<passwd> bob;
    std::vector<std::string> flags;
    ASSERT_NO_FATAL_FAILURE(start_preempting(alice, bob, flags));
    const auto [kept, opted_in, light] = preemption_scenario(*alice, *bob);
    ASSERT_TRUE(eventually([&] { return !preempting().empty(); }, 60s)) << daemon_log();
    ASSERT_TRUE(client().cancel(opted_in));
    stop(SIGKILL);
    start("carma", flags);

    const json done = wait_final(opted_in);
    EXPECT_EQ(done["state"], "cancelled") << done.dump(2) << events().dump(1);
    ASSERT_EQ(done["attempt_list"].size(), 1u) << done.dump(2);
    EXPECT_EQ(done["attempt_list"][0]["outcome"], "cancelled");
    EXPECT_EQ(wait_final(light)["state"], "succeeded");
    EXPECT_EQ(state(kept), "running");
    EXPECT_EQ(preempting().size(), 1u) << "the attempt being cancelled was stopped again";
}

// This test verifies, on one GPU under `carma`: alice's --exclusive task runs alone (bob's small
// task, which carma would otherwise place beside it, waits for its end), charged the whole GPU
// now (`charge_now`, which the factor counts an hour ahead); bob, who has used
// nothing, goes before alice's tasks that were queued earlier; usage is charged to whoever ran
// (the whole GPU for an exclusive task) and shown by GET /v1/share and `carma share`, with the
// charged GPU time in accounting, and the page's view shows the same standings; a negative nice
// is refused to a user who is not root.
TEST_F(FairShareDaemonTest, LightUserGoesFirstAndExclusiveRunsAlone) {
    std::optional<passwd> alice;
    std::optional<passwd> bob;
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-alice", alice, "for two fair-share users"));
    ASSERT_NO_FATAL_FAILURE(root_and_user("carma-test-bob", bob, "for two fair-share users"));
    start("carma", {"--exclude-gpus", "1,2,3"});
    carma_ = reachable_copy(CARMA_BIN);
    fakejob_ = reachable_copy(CARMA_FAKEJOB_PATH);

    const TaskId first = fake_as(*alice, "resnet3", 240, "--exclusive");
    ASSERT_TRUE(eventually([&] { return state(first) == "running"; })) << daemon_log();
    // While it runs, alice is charged the whole GPU now, which her factor counts an hour ahead.
    json standing_now;
    EXPECT_TRUE(eventually([&] {
        auto share = client().share();
        if (!share) {
            return false;
        }
        standing_now = *share;
        for (const json& u : (*share)["users"]) {
            if (u["user"] == "carma-test-alice") {
                return u["charge_now"].get<double>() > 0.99;
            }
        }
        return false;
    })) << standing_now.dump(2);
    EXPECT_EQ(standing_now["horizon_s"], 3600.0);
    const TaskId second = fake_as(*alice, "resnet3", 120);
    const TaskId third = fake_as(*alice, "resnet3", 120);
    const TaskId light = fake_as(*bob, "dlrm", 60);

    EXPECT_EQ(wait_final(light)["state"], "succeeded");
    const json first_done = wait_final(first);
    EXPECT_EQ(first_done["exclusive"], true);
    EXPECT_GE(started(light), first_done["finished_at"].get<double>())
        << "a task ran beside an --exclusive one";
    EXPECT_EQ(wait_final(second)["state"], "succeeded");
    EXPECT_EQ(wait_final(third)["state"], "succeeded");
    EXPECT_LT(started(light), started(second)) << "bob, who used nothing, goes first";

    // The exclusive attempt paid for the whole GPU: about its run time on the model's clock.
    const json charged_attempt = first_done["attempt_list"][0];
    ASSERT_TRUE(charged_attempt["charged_gpu_s"].is_number()) << first_done.dump(2);
    EXPECT_GT(charged_attempt["charged_gpu_s"].get<double>(), 120.0) << first_done.dump(2);

    // A held task each keeps both users in the view's per-user counts, and charges nothing.
    fake_as(*alice, "resnet3", 60, "--hold");
    fake_as(*bob, "resnet3", 60, "--hold");
    auto share = client().share();
    ASSERT_TRUE(share) << share.error().message;
    auto page_view = client().view();
    ASSERT_TRUE(page_view) << page_view.error().message;
    EXPECT_EQ((*share)["fair_share"], true);
    std::map<std::string, json> by_user;
    for (const json& u : (*share)["users"]) {
        by_user[u["user"].get<std::string>()] = u;
    }
    ASSERT_TRUE(by_user.contains("carma-test-alice")) << share->dump(2);
    ASSERT_TRUE(by_user.contains("carma-test-bob")) << share->dump(2);
    EXPECT_GT(by_user["carma-test-alice"]["usage_gpu_hours"].get<double>(),
              by_user["carma-test-bob"]["usage_gpu_hours"].get<double>());
    EXPECT_LT(by_user["carma-test-alice"]["factor"].get<double>(),
              by_user["carma-test-bob"]["factor"].get<double>());
    // The page's share bars and `carma top` read the same standing as `carma share`.
    int shown = 0;
    for (const json& u : (*page_view)["queue_users"]) {
        const std::string name = u["user"].get<std::string>();
        if (!by_user.contains(name)) {
            continue;
        }
        ++shown;
        for (const char* field : {"factor", "shares_norm", "usage_norm"}) {
            EXPECT_NEAR(u[field].get<double>(), by_user[name][field].get<double>(), 1e-6)
                << name << " " << field << "\n" << u.dump() << "\n" << by_user[name].dump();
        }
    }
    EXPECT_EQ(shown, 2) << page_view->dump(2);

    auto [rc, table] = carma_as(*bob, "share", "");
    EXPECT_EQ(rc, 0) << table;
    EXPECT_NE(table.find("carma-test-alice"), std::string::npos) << table;
    auto [rc2, acct] = carma_as(*bob, "acct", "--format id,charged");
    EXPECT_EQ(rc2, 0) << acct;
    EXPECT_NE(acct.find("CHARGED"), std::string::npos) << acct;

    auto [rc3, refused] = carma_as(*alice, "submit",
                                   "--nice=-5 --export=NONE --workdir /tmp -- /bin/true");
    EXPECT_NE(rc3, 0);
    EXPECT_NE(refused.find("only root may give a negative nice"), std::string::npos) << refused;
}

// This test verifies that stored usage the daemon cannot read stops its start, saying why and
// what to do, instead of starting from none: the first save would have erased what every user
// was charged. Once the table reads again, the daemon starts with alice's 2 GPU-hours.
TEST_F(FairShareDaemonTest, UnreadableUsageStopsTheStart) {
    start("carma");
    stop(SIGTERM);
    const std::string database = dir_ + "/state/carma.db";
    {
        SQLite::Database db(database, SQLite::OPEN_READWRITE);
        db.exec("DELETE FROM usage");
        db.exec(
            "INSERT INTO usage (user, gpu_s, at_s) "
            "VALUES ('alice', 7200, CAST(strftime('%s', 'now') AS REAL))");
        db.exec("ALTER TABLE usage RENAME COLUMN gpu_s TO gpu_seconds");
    }
    const std::string cmd = std::string(CARMA_BIN) + " serve --policy carma --gpus " +
                            "emulated:4xA100-40GB --state-dir " + dir_ + "/state --socket " +
                            socket_ + " >" + dir_ + "/refused.log 2>&1";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    const std::string refused = read_text(dir_ + "/refused.log");
    EXPECT_NE(refused.find("cannot read the fair-share usage from " + database), std::string::npos)
        << refused;
    EXPECT_NE(refused.find("integrity_check"), std::string::npos) << refused;
    {
        SQLite::Database db(database, SQLite::OPEN_READWRITE);
        db.exec("ALTER TABLE usage RENAME COLUMN gpu_seconds TO gpu_s");
    }
    start("carma");
    auto share = client().share();
    ASSERT_TRUE(share);
    double alice_h = 0;
    for (const json& u : (*share)["users"]) {
        if (u["user"] == "alice") {
            alice_h = u["usage_gpu_hours"].get<double>();
        }
    }
    EXPECT_NEAR(alice_h, 2.0, 0.01) << share->dump(2);
}

// This test verifies that a task asking for more GPUs than limits.max_gpus_per_user lets any
// user hold is refused at submission, naming the limit and what to ask for: queued, it would
// have waited forever. One within the limit is taken.
TEST_F(FairShareDaemonTest, MoreGpusThanAnyUserMayHoldIsRefused) {
    start("carma", {"--config", write_config(dir_, "limits: {max_gpus_per_user: 2}\n")});
    const json body = {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"gpus", 3}};
    const auto refused = socket_request(socket_, "POST", "/v1/tasks", body.dump());
    EXPECT_EQ(refused.status, 422) << refused.body;
    EXPECT_NE(refused.body.find("the task asks for 3 GPUs but limits.max_gpus_per_user lets one "
                                "user hold at most 2 at once, so it could never start; ask for "
                                "at most 2 (--gpus 2)"),
              std::string::npos)
        << refused.body;
    json within = body;
    within["gpus"] = 2;
    EXPECT_EQ(socket_request(socket_, "POST", "/v1/tasks", within.dump()).status, 201);
}

}  // namespace
}  // namespace carma
