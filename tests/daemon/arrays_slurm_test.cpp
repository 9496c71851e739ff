// Issue 22, items 1 and 2, end to end: arrays named as Slurm names them (ID_INDEX in the API and
// the CLI, --after ARRAY_ID for every member), sbatch's dependency types, --output/--error files
// written as the task's user, and --mail-type through a sendmail.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/daemon_fixture.h"
#include "http_support.h"
#include "users.h"

namespace carma {
namespace {

using namespace daemon_test;  // the fixture, as_user, eventually, read_text, fs, json, 1s
using test_support::root_and_user;

class ArraysSlurmTest : public DaemonTest {
protected:
    // `carma COMMAND --socket S ARGS` as the test's user: exit status and stdout (and stderr
    // when it failed).
    std::pair<int, std::string> carma(const std::string& command, const std::string& args) {
        const std::string cmd = std::string(CARMA_BIN) + " " + command + " --socket " + socket_ +
                                " " + args + " > " + dir_ + "/cli.out 2> " + dir_ + "/cli.err";
        const int rc = std::system(cmd.c_str());
        return {rc, read_text(dir_ + "/cli.out") +
                        (rc != 0 ? read_text(dir_ + "/cli.err") : std::string())};
    }

    // An array 0..n-1 whose member INDEX sleeps INDEX seconds and then leaves a mark done.INDEX
    // in `marks`; its answer (the first member, with array_tasks).
    json marking_array(const std::string& marks, int n) {
        fs::create_directories(marks);
        auto r = client().submit(
            {{"command",
              {"/bin/sh", "-c", "sleep $CARMA_ARRAY_INDEX; touch done.$CARMA_ARRAY_INDEX"}},
             {"workdir", marks},
             {"array", fmt::format("0-{}", n - 1)}});
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? *r : json::object();
    }

    // What a task that ended without starting says about why.
    std::string message(TaskId id) { return task(id).value("message", ""); }
};

// This test verifies Slurm's ID_INDEX wherever a task is named: the API's paths
// (GET/POST/DELETE /v1/tasks/ID_INDEX), `carma show`, and `--after ID_INDEX`; and that
// `--after ARRAY_ID` waits for every member, not only the first (before, the dependent of a
// 4-member array started once member 0 had ended, while 1-3 still ran, and `--after 12_3` was
// refused). Views name members ID_INDEX: GET /v1/gpus, the view and accounting.
TEST_F(ArraysSlurmTest, IdIndexEverywhereAndAfterTheWholeArray) {
    start("exclusive");
    const std::string marks = dir_ + "/marks";
    const json array = marking_array(marks, 4);
    const TaskId a = array["id"];
    ASSERT_EQ(array["array_tasks"].size(), 4u);
    const TaskId member3 = array["array_tasks"][3];

    // The dependent of the whole array finds every member's mark; the dependent of 12_1 only
    // waits for that one.
    const std::string all_marks = "test -f done.0 -a -f done.1 -a -f done.2 -a -f done.3";
    const TaskId after_all = submit(
        {{"command", {"/bin/sh", "-c", all_marks}}, {"workdir", marks}, {"after", {a}}});
    const TaskId after_one = submit({{"command", {"/bin/sh", "-c", "test -f done.1"}},
                                     {"workdir", marks},
                                     {"after", {fmt::format("{}_1", a)}}});
    EXPECT_NE(message(after_all).find(fmt::format("waits for task(s) {}_* to succeed", a)),
              std::string::npos)
        << message(after_all);
    const json dependent = task(after_all);
    EXPECT_EQ(dependent["dependencies"],
              (json::array({{{"type", "afterok"}, {"task", fmt::format("{}_*", a)}}})));

    // The member by ID_INDEX through the API and the CLI.
    auto shown = client().task(*parse_task_ref(fmt::format("{}_3", a)));
    ASSERT_TRUE(shown) << shown.error().message;
    EXPECT_EQ((*shown)["id"], member3);
    auto [rc, text] = carma("show", fmt::format("{}_3", a));
    EXPECT_EQ(rc, 0) << text;
    EXPECT_NE(text.find(fmt::format("task {}_3 (", a)), std::string::npos) << text;
    auto missing = client().task(*parse_task_ref(fmt::format("{}_9", a)));
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find(fmt::format("array {} has no index 9", a)),
              std::string::npos)
        << missing.error().message;
    auto bad_after = client().submit({{"command", {"/bin/true"}},
                                      {"workdir", "/tmp"},
                                      {"after", {fmt::format("{}_9", a)}}});
    ASSERT_FALSE(bad_after);
    EXPECT_NE(bad_after.error().message.find("has no index 9"), std::string::npos)
        << bad_after.error().message;

    // While member 3 runs, every view names it ID_INDEX.
    ASSERT_TRUE(eventually([&] { return state(member3) == "running"; }));
    auto gpus = client().gpus();
    ASSERT_TRUE(gpus);
    bool labelled = false;
    for (const json& g : (*gpus)["gpus"]) {
        for (const json& l : g["task_labels"]) {
            labelled = labelled || l == fmt::format("{}_3", a);
        }
    }
    EXPECT_TRUE(labelled) << gpus->dump();
    auto view = client().view();
    ASSERT_TRUE(view);
    bool in_view = false;
    for (const json& t : (*view)["running"]) {
        in_view = in_view || (t["id"] == member3 && t["array"]["index"] == 3);
    }
    EXPECT_TRUE(in_view) << (*view)["running"].dump();

    EXPECT_EQ(wait_final(after_one)["state"], "succeeded");
    const json done = wait_final(after_all);
    EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
    auto acct = client().acct({std::nullopt, std::nullopt, std::nullopt});
    ASSERT_TRUE(acct);
    bool accounted = false;
    for (const json& row : (*acct)["tasks"]) {
        accounted = accounted || (row["id"] == member3 && row["array"]["id"] == a);
    }
    EXPECT_TRUE(accounted);

    // Hold and release a member by ID_INDEX (POST /v1/tasks/ID_INDEX/release).
    auto held = client().submit(
        {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"array", "0-1"}, {"hold", true}});
    ASSERT_TRUE(held);
    const TaskId h = (*held)["id"];
    auto released = client().hold(*parse_task_ref(fmt::format("{}_1", h)), false);
    ASSERT_TRUE(released) << released.error().message;
    EXPECT_EQ((*released)["id"], (*held)["array_tasks"][1]);
    auto [rc2, text2] = carma("cancel", fmt::format("{}_0", h));
    EXPECT_EQ(rc2, 0) << text2;
    EXPECT_NE(text2.find(fmt::format("cancelled task {}_0", h)), std::string::npos) << text2;
}

// This test verifies sbatch's dependency types: afterany starts after an end of any kind,
// afternotok only after one that did not succeed, and a dependency that can never hold ends the
// task without starting, with the reason (as CARMA ends an afterok whose dependency failed):
// afternotok of a task that succeeded, afterok of an array with a failed member. afternotok of a
// whole array holds once every member ended and one failed.
TEST_F(ArraysSlurmTest, DependencyTypes) {
    start("exclusive");
    const TaskId fails = submit({{"command", {"/bin/sh", "-c", "sleep 1; exit 3"}},
                                 {"workdir", "/tmp"}});
    const TaskId works = submit({{"command", {"/bin/sh", "-c", "sleep 1"}}, {"workdir", "/tmp"}});
    auto dep = [&](const char* type, const std::string& on) {
        return submit({{"command", {"/bin/true"}},
                       {"workdir", "/tmp"},
                       {"dependencies", json::array({{{"type", type}, {"task", on}}})}});
    };
    const TaskId any_after_fail = dep("afterany", std::to_string(fails));
    const TaskId notok_after_fail = dep("afternotok", std::to_string(fails));
    const TaskId notok_after_ok = dep("afternotok", std::to_string(works));
    const TaskId ok_after_fail = dep("afterok", std::to_string(fails));
    EXPECT_EQ(wait_final(any_after_fail)["state"], "succeeded");
    EXPECT_EQ(wait_final(notok_after_fail)["state"], "succeeded");
    const json never = wait_final(notok_after_ok);
    EXPECT_EQ(never["state"], "failed");
    EXPECT_EQ(never["attempts"], 0);
    EXPECT_NE(never["message"].get<std::string>().find(
                  fmt::format("dependency task {} succeeded, and afternotok:{} waits for one "
                              "that did not; this task never started",
                              works, works)),
              std::string::npos)
        << never.dump();
    EXPECT_EQ(wait_final(ok_after_fail)["state"], "failed");

    // An array whose member 1 fails.
    auto arr = client().submit({{"command", {"/bin/sh", "-c", "test $CARMA_ARRAY_INDEX != 1"}},
                                {"workdir", "/tmp"},
                                {"array", "0-2"}});
    ASSERT_TRUE(arr);
    const TaskId a = (*arr)["id"];
    const TaskId ok_after_array = dep("afterok", std::to_string(a));
    const TaskId notok_after_array = dep("afternotok", std::to_string(a));
    const json ok = wait_final(ok_after_array);
    EXPECT_EQ(ok["state"], "failed");
    EXPECT_NE(ok["message"].get<std::string>().find(
                  fmt::format("dependency task {}_1 ended failed", a)),
              std::string::npos)
        << ok.dump();
    EXPECT_EQ(wait_final(notok_after_array)["state"], "succeeded");

    // sbatch's own spelling through the CLI, and what it refuses.
    auto [rc, text] = carma("submit", fmt::format("--json --dependency=afterany:{}:{} -- /bin/true",
                                                  fails, works));
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(wait_final(json::parse(text)["id"].get<TaskId>())["state"], "succeeded");
    auto [rc2, text2] = carma("submit", "--dependency=singleton -- /bin/true");
    EXPECT_NE(rc2, 0);
    EXPECT_NE(text2.find("singleton"), std::string::npos) << text2;
}

}  // namespace
}  // namespace carma
