// Issue 22, item 3, end to end: failures say why. The last meaningful line of a failed task's
// stderr is its message wherever the task is shown; a Python command's script is checked at
// submit as the submitter; the default name is the script's stem; a task file's warnings are
// kept in the task's events.

#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/daemon_fixture.h"

namespace carma {
namespace {

using namespace daemon_test;  // the fixture, eventually, read_text, fs, json

class FailuresTest : public DaemonTest {};

// This test verifies that a task that fails says why in its own words: its message (the queue's
// REASON, `carma show`), its accounting row (`carma acct`'s REASON) and the page's recent list
// carry the last line of its stderr, not only "exit code 1"; and that `python3 fail.py` is named
// "fail", after its script. Before, the reason was only in `carma logs --stderr`.
TEST_F(FailuresTest, TheLastStderrLineIsTheMessage) {
    start("exclusive");
    const std::string work = dir_ + "/work";
    fs::create_directories(work);
    std::ofstream(work + "/fail.py") << "import torchx_that_is_not_installed\n";
    const TaskId id = submit({{"command", {"python3", "fail.py"}}, {"workdir", work}});
    const json done = wait_final(id);
    EXPECT_EQ(done["state"], "failed");
    EXPECT_EQ(done["name"], "fail") << "named after its script, not after python3";
    const std::string why = "ModuleNotFoundError: No module named 'torchx_that_is_not_installed'";
    EXPECT_NE(done["message"].get<std::string>().find("exit code 1: " + why), std::string::npos)
        << done["message"];

    auto acct = client().acct({std::nullopt, std::nullopt, std::nullopt});
    ASSERT_TRUE(acct);
    bool accounted = false;
    for (const json& row : (*acct)["tasks"]) {
        accounted = accounted || (row["id"] == id &&
                                  row["message"].get<std::string>().find(why) != std::string::npos);
    }
    EXPECT_TRUE(accounted) << acct->dump();
    auto view = client().view();
    ASSERT_TRUE(view);
    bool recent = false;
    for (const json& t : (*view)["recent"]) {
        recent = recent || (t["id"] == id &&
                            t["message"].get<std::string>().find(why) != std::string::npos);
    }
    EXPECT_TRUE(recent) << (*view)["recent"].dump();
}

// This test verifies that `python3 SCRIPT` is refused at submit when the script is missing (the
// task would have been queued and failed with "can't open file"), naming the path, and that a
// script given with the interpreter's options and an absolute path is found.
TEST_F(FailuresTest, AMissingPythonScriptIsRefusedAtSubmit) {
    start("exclusive");
    const std::string work = dir_ + "/work";
    fs::create_directories(work);
    auto missing =
        client().submit({{"command", {"python3", "-u", "train.py"}}, {"workdir", work}});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("python script " + work + "/train.py does not exist"),
              std::string::npos)
        << missing.error().message;
    std::ofstream(work + "/ok.py") << "print('ok')\n";
    const TaskId ok = submit({{"command", {"python3", "-W", "ignore", work + "/ok.py"}},
                              {"workdir", "/tmp"}});
    EXPECT_EQ(wait_final(ok)["state"], "succeeded");
    // Modules and code run no file: nothing to check.
    const TaskId module = submit({{"command", {"python3", "-c", "print(1)"}}, {"workdir", work}});
    EXPECT_EQ(wait_final(module)["state"], "succeeded");
}

// This test verifies that what a task file's reader noticed (sent as `warnings`) is kept in the
// task's events.
TEST_F(FailuresTest, TaskFileWarningsAreKeptInTheEvents) {
    start("exclusive");
    const std::string warning = "gpt2_xl.rad:13: a second block (its command on line 15) after "
                                "the 12 lines of a .rad file is not read";
    const TaskId id = submit(
        {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"warnings", json::array({warning})}});
    auto events = client().events(api::EventQuery{std::nullopt, id, 100});
    ASSERT_TRUE(events);
    bool kept = false;
    for (const json& e : (*events)["events"]) {
        kept = kept || (e["kind"] == "warning" && e["message"] == warning);
    }
    EXPECT_TRUE(kept) << events->dump();
    auto bad = client().submit(
        {{"command", {"/bin/true"}}, {"workdir", "/tmp"}, {"warnings", "not a list"}});
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("'warnings'"), std::string::npos);
}

}  // namespace
}  // namespace carma
