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

    // An array 0..n-1 whose member INDEX sleeps 4 x INDEX seconds (the last one runs long
    // enough to be seen running however slowly the test goes) and then leaves a mark done.INDEX
    // in `marks`; its answer (the first member, with array_tasks).
    json marking_array(const std::string& marks, int n) {
        fs::create_directories(marks);
        auto r = client().submit(
            {{"command",
              {"/bin/sh", "-c", "sleep $((CARMA_ARRAY_INDEX * 4)); touch done.$CARMA_ARRAY_INDEX"}},
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

    // While member 3 runs, every view names it ID_INDEX. (Its state turns running before its
    // launch completes and the daemon lists it on its GPU: looked at until it is there.)
    ASSERT_TRUE(eventually([&] { return state(member3) == "running"; }));
    const auto labelled = [&] {
        auto gpus = client().gpus();
        for (const json& g : gpus ? (*gpus)["gpus"] : json::array()) {
            for (const json& l : g["task_labels"]) {
                if (l == fmt::format("{}_3", a)) {
                    return true;
                }
            }
        }
        return false;
    };
    EXPECT_TRUE(eventually(labelled)) << client().gpus()->dump();
    const auto in_view = [&] {
        auto view = client().view();
        for (const json& t : view ? (*view)["running"] : json::array()) {
            if (t["id"] == member3 && t["array"]["index"] == 3) {
                return true;
            }
        }
        return false;
    };
    EXPECT_TRUE(eventually(in_view)) << client().view()->dump();

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
// whole array holds once every member ended and one failed. singleton waits for the earlier
// tasks of the same user and name.
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

    // singleton: it waits for every earlier unfinished task of the same user and name, and not
    // for one of another name; an array cannot be one.
    const TaskId first = submit(
        {{"name", "train"}, {"command", {"/bin/sh", "-c", "sleep 2"}}, {"workdir", "/tmp"}});
    const TaskId other_name = submit(
        {{"name", "eval"}, {"command", {"/bin/sh", "-c", "sleep 2"}}, {"workdir", "/tmp"}});
    auto [rc2, text2] = carma("submit", "--json -J train --dependency=singleton -- /bin/true");
    ASSERT_EQ(rc2, 0) << text2;
    const TaskId single = json::parse(text2)["id"].get<TaskId>();
    EXPECT_EQ(task(single)["dependencies"],
              json::parse(fmt::format(R"([{{"type": "afterany", "task": "{}"}}])", first)));
    const json single_done = wait_final(single);
    EXPECT_EQ(single_done["state"], "succeeded");
    const json first_done = wait_final(first);
    EXPECT_GE(single_done["attempt_list"][0]["started_at"].get<double>(),
              first_done["finished_at"].get<double>());
    EXPECT_EQ(wait_final(other_name)["state"], "succeeded");
    auto [rc3, text3] = carma("submit", "-J train --array 0-1 --dependency=singleton -- /bin/true");
    EXPECT_NE(rc3, 0);
    EXPECT_NE(text3.find("singleton with an array"), std::string::npos) << text3;
}

// This test verifies -o/-e as a user who is not root: the shim writes the task's stdout and
// stderr into the user's files, created by and owned by the user, beside CARMA's own logs; %j,
// %A and %a are filled; a later attempt appends. A file the user may not write (though root may)
// fails the attempt with the reason and is left as it was, and a link the user planted at the
// path towards a file of root's is refused rather than followed.
TEST_F(ArraysSlurmTest, OutputFilesAreWrittenAsTheUser) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to write --output files as another user"));
    const std::string home = dir_ + "/alice";
    fs::create_directories(home);
    ASSERT_EQ(::chown(home.c_str(), alice->pw_uid, alice->pw_gid), 0);
    // A file of root's in the user's own directory: the directory passes the check at submit
    // (output_paths_test.cpp), the file cannot be opened as the user at launch.
    const std::string taken = home + "/taken.out";
    std::ofstream(taken) << "root's file\n";
    fs::permissions(taken, fs::perms::owner_read | fs::perms::owner_write |
                               fs::perms::group_read | fs::perms::others_read);
    const std::string secret = dir_ + "/root-secret";
    std::ofstream(secret) << "root's\n";
    start("exclusive");
    const std::string submit = reachable_copy(CARMA_BIN) + " submit --socket " + socket_ +
                               " --json --export=NONE ";
    const std::string echo = " -- /bin/sh -c 'echo out-line; echo err-line >&2'";
    const int rc = as_user(*alice, [&] {
        if (::chdir(home.c_str()) != 0) {
            return 1;
        }
        ::symlink(secret.c_str(), (home + "/link.out").c_str());
        const std::vector<std::string> cmds = {
            submit + "-o 'both-%j.log'" + echo + " >both.json",
            submit + "-o 'sep-%A_%a.out' -e 'sep-%A_%a.err' --array 0-1" + echo + " >sep.json",
            submit + "-o taken.out" + echo + " >denied.json",
            submit + "-o link.out" + echo + " >link.json",
        };
        int failures = 0;
        for (const std::string& c : cmds) {
            failures += std::system(c.c_str()) != 0 ? 1 : 0;
        }
        return failures;
    });
    ASSERT_EQ(rc, 0);
    auto id_of = [&](const char* file) {
        return json::parse(read_text(home + "/" + file))["id"].get<TaskId>();
    };
    const TaskId both = id_of("both.json");
    EXPECT_EQ(wait_final(both)["state"], "succeeded");
    const std::string both_file = home + fmt::format("/both-{}.log", both);
    const std::string both_text = read_text(both_file);
    EXPECT_NE(both_text.find("out-line\n"), std::string::npos) << both_text;
    EXPECT_NE(both_text.find("err-line\n"), std::string::npos) << "-o alone takes stderr too";
    struct stat st {};
    ASSERT_EQ(::stat(both_file.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, alice->pw_uid) << "created as the user, not as root";
    // CARMA's own copies are there as before.
    EXPECT_EQ(client().logs(both, {})->text, "out-line\n");
    EXPECT_EQ(client().logs(both, api::LogRequest{api::LogStream::Stderr, std::nullopt, 0})->text,
              "err-line\n");

    const json sep = json::parse(read_text(home + "/sep.json"));
    const TaskId a = sep["id"];
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(wait_final(sep["array_tasks"][i].get<TaskId>())["state"], "succeeded");
        EXPECT_EQ(read_text(home + fmt::format("/sep-{}_{}.out", a, i)), "out-line\n");
        EXPECT_EQ(read_text(home + fmt::format("/sep-{}_{}.err", a, i)), "err-line\n");
    }

    const json denied = wait_final(id_of("denied.json"));
    EXPECT_NE(denied["state"], "succeeded");
    EXPECT_NE(denied["message"].get<std::string>().find("Permission denied"), std::string::npos)
        << denied.dump(2);
    EXPECT_NE(denied["message"].get<std::string>().find(taken), std::string::npos)
        << denied.dump(2);
    EXPECT_EQ(read_text(taken), "root's file\n");

    const json linked = wait_final(id_of("link.json"));
    EXPECT_NE(linked["state"], "succeeded");
    EXPECT_NE(linked["message"].get<std::string>().find("symbolic link"), std::string::npos)
        << linked.dump(2);
    EXPECT_EQ(read_text(secret), "root's\n");
}

// This test verifies that an ordinary user's `carma cancel --state held` acts on the user's own
// tasks (it used to fail on every task of root's: "belongs to root"), while naming root's tasks
// with --user still asks the daemon, which refuses.
TEST_F(ArraysSlurmTest, OrdinaryUsersBulkCancelTakesTheirOwnTasks) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to cancel as a user who is not root"));
    start("exclusive");
    const TaskId roots = submit({{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"hold", true}});
    const std::string carma_bin = reachable_copy(CARMA_BIN);
    const std::string home = dir_ + "/alice";
    fs::create_directories(home);
    ASSERT_EQ(::chown(home.c_str(), alice->pw_uid, alice->pw_gid), 0);
    const std::string out = home + "/cli.out";
    auto as_alice = [&](const std::string& command, const std::string& args) {
        const int rc = as_user(*alice, [&] {
            return std::system((carma_bin + " " + command + " --socket " + socket_ + " " + args +
                                " >" + out + " 2>&1")
                                   .c_str()) == 0
                       ? 0
                       : 1;
        });
        return std::pair{rc, read_text(out)};
    };
    auto [rc, text] = as_alice("submit", "--json --hold --export=NONE --workdir /tmp -- /bin/true");
    ASSERT_EQ(rc, 0) << text;
    const TaskId alices = json::parse(text)["id"].get<TaskId>();

    auto [rc2, text2] = as_alice("cancel", "--state held");
    EXPECT_EQ(rc2, 0) << text2;
    EXPECT_EQ(state(alices), "cancelled");
    EXPECT_EQ(state(roots), "held");

    auto [rc3, text3] = as_alice("cancel", "--user root --state held");
    EXPECT_NE(rc3, 0);
    EXPECT_NE(text3.find("belongs to root"), std::string::npos) << text3;
    EXPECT_EQ(state(roots), "held");
}

// This test verifies --mail-type: refused at submit with the reason when the server has no
// sendmail; with one (a fake that keeps what it is given), a task is mailed when it begins and
// ends, and an array without ARRAY_TASKS once, when its last member ends.
TEST_F(ArraysSlurmTest, MailThroughSendmail) {
    start("exclusive", {"--sendmail", dir_ + "/no-such-sendmail"});
    auto refused = client().submit(
        {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"mail_type", "END"}});
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("needs a local sendmail"), std::string::npos)
        << refused.error().message;
    stop(SIGTERM);

    const std::string mails = dir_ + "/mails";
    fs::create_directories(mails);
    const std::string sendmail = dir_ + "/sendmail";
    std::ofstream(sendmail) << "#!/bin/sh\n"
                               "f=" << mails << "/$(date +%s%N).$$\n"
                               "echo \"$@\" > $f.args\ncat > $f.mail\n";
    fs::permissions(sendmail, fs::perms::owner_all);
    start("exclusive", {"--sendmail", sendmail});
    const TaskId one = submit({{"name", "train"},
                               {"command", {"/bin/sh", "-c", "exit 2"}},
                               {"workdir", "/tmp"},
                               {"mail_type", "BEGIN,FAIL"},
                               {"mail_user", "alice@lab"}});
    EXPECT_EQ(task(one)["mail_user"], "alice@lab");
    EXPECT_EQ(wait_final(one)["state"], "failed");
    auto arr = client().submit({{"name", "sweep"},
                                {"command", {"/bin/true"}},
                                {"workdir", "/tmp"},
                                {"array", "0-2"},
                                {"mail_type", "END"}});
    ASSERT_TRUE(arr);
    for (const json& id : (*arr)["array_tasks"]) {
        wait_final(id.get<TaskId>());
    }
    auto mail_texts = [&] {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(mails)) {
            if (e.path().extension() == ".mail") {
                out.push_back(read_text(e.path()));
            }
        }
        return out;
    };
    ASSERT_TRUE(eventually([&] { return mail_texts().size() >= 3; }, 30s))
        << mail_texts().size();
    std::this_thread::sleep_for(500ms);  // a mail too many would come now
    const std::vector<std::string> texts = mail_texts();
    EXPECT_EQ(texts.size(), 3u);
    int began = 0, failed = 0, array_ended = 0;
    for (const std::string& t : texts) {
        began += t.find(fmt::format("Subject: CARMA task {} (train) began", one)) !=
                 std::string::npos;
        failed += t.find(fmt::format("Subject: CARMA task {} (train) ended failed", one)) !=
                  std::string::npos;
        array_ended += t.find(fmt::format("Subject: CARMA array {} (sweep) ended",
                                          (*arr)["id"].get<TaskId>())) != std::string::npos &&
                       t.find("3 member(s): 3 succeeded") != std::string::npos;
        if (t.find("(train)") != std::string::npos) {
            EXPECT_NE(t.find("To: alice@lab\n"), std::string::npos) << t;
        }
    }
    EXPECT_EQ(began, 1);
    EXPECT_EQ(failed, 1);
    EXPECT_EQ(array_ended, 1);
}

}  // namespace
}  // namespace carma
