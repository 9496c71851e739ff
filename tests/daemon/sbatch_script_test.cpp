// Issue 45, item 3, end to end: `carma submit SCRIPT` runs an sbatch script as written (its
// #SBATCH lines under the command line's flags, no run bit needed), and `--array=0-5%2` runs at
// most two members at once.

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/daemon_fixture.h"

namespace carma {
namespace {

using namespace daemon_test;  // the fixture, eventually, read_text, fs, json, 1s

class SbatchScriptTest : public DaemonTest {
protected:
    // `carma submit --socket S ARGS` in `cwd`: exit status, stdout and stderr.
    struct Run {
        int rc = 0;
        std::string out, err;
    };
    Run submit_cli(const std::string& cwd, const std::string& args) {
        const std::string cmd = fmt::format("cd {} && {} submit --socket {} {} > {}/cli.out 2> "
                                            "{}/cli.err",
                                            cwd, CARMA_BIN, socket_, args, dir_, dir_);
        const int rc = std::system(cmd.c_str());
        return {rc, read_text(dir_ + "/cli.out"), read_text(dir_ + "/cli.err")};
    }
};

// This test verifies that a script without the run bit is submitted as sbatch would: run by its
// #! interpreter, named after its file unless -J says otherwise, its #SBATCH lines read with the
// command line's options (-J, -t, -o, -c, --mem, --gres=gpu:N) and the command line's flags
// winning; --partition is named on stderr with what CARMA does instead; -J on two lines takes
// the later, as sbatch, with a note (it was a CLI11 error naming no line). Before, `carma submit
// train.sbatch` was "command 'train.sbatch' not found".
TEST_F(SbatchScriptTest, ScriptRunsWithItsDirectives) {
    start("exclusive");
    const std::string work = dir_ + "/work";
    fs::create_directories(work);
    {
        std::ofstream s(work + "/train.sbatch");
        s << "#!/bin/bash\n"
             "#SBATCH -J first\n"
             "#SBATCH --partition=gpu\n"
             "#SBATCH --gres=gpu:2 -c 1 --mem=1GiB\n"
             "#SBATCH -t 10\n"
             "#SBATCH -o out-%x-%j.txt\n"
             "#SBATCH -J sweep\n"
             "echo \"ran with $CUDA_VISIBLE_DEVICES and $1\"\n";
    }
    ::chmod((work + "/train.sbatch").c_str(), 0644);
    const Run r = submit_cli(work, "--json -t 20 train.sbatch hello --lr 0.1");
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("train.sbatch:3: #SBATCH --partition=gpu: not used"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("without partitions"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("train.sbatch:7: #SBATCH -J sweep: --name was also given on line 2; the "
                         "later line wins"),
              std::string::npos)
        << r.err;
    const json submitted = json::parse(r.out);
    const TaskId id = submitted["id"];
    const json t = task(id);
    EXPECT_EQ(t["name"], "sweep");
    EXPECT_EQ(t["gpus"], 2);
    EXPECT_EQ(t["cpus"], 1);  // CI machines have 1 core for tasks
    EXPECT_EQ(t["host_mem_mib"], 1024);
    EXPECT_EQ(t["time_limit_s"], 20 * 60);  // the command line's -t wins over the script's
    EXPECT_EQ(t["output"], "out-%x-%j.txt");
    EXPECT_EQ(t["command"][0], "/bin/bash");
    EXPECT_EQ(t["command"][1], work + "/train.sbatch");
    EXPECT_EQ(t["command"][2], "hello");
    EXPECT_EQ(t["command"][3], "--lr");  // the script's, as with sbatch: no `--` needed
    ASSERT_TRUE(eventually([&] { return state(id) == "succeeded"; })) << task(id).dump();
    const std::string out = read_text(fmt::format("{}/out-sweep-{}.txt", work, id));
    EXPECT_NE(out.find("and hello"), std::string::npos) << out;

    // Without -J the task is named after the script's file, as sbatch names it.
    {
        std::ofstream s(work + "/plain.sh");
        s << "echo plain\n";
    }
    const Run plain = submit_cli(work, "--json plain.sh");
    ASSERT_EQ(plain.rc, 0) << plain.out << plain.err;
    EXPECT_EQ(json::parse(plain.out)["name"], "plain.sh");
    // Without a #! line, bash runs it (the daemon resolves it on the task's PATH).
    EXPECT_TRUE(json::parse(plain.out)["command"][0].get<std::string>().ends_with("bash"))
        << plain.out;

    // A file that is neither runnable nor a script gets chmod advice, not PATH advice.
    {
        std::ofstream s(work + "/tool");
        s << "\x7f" "ELF\n";
    }
    const Run noexec = submit_cli(work, "./tool");
    EXPECT_NE(noexec.rc, 0);
    EXPECT_NE(noexec.err.find("chmod +x ./tool"), std::string::npos) << noexec.err;
    EXPECT_EQ(noexec.err.find("PATH"), std::string::npos) << noexec.err;
}

// This test verifies that a script runs as it was when it was submitted, as sbatch keeps a copy:
// an edit while the task waits (here held) changes later submissions only. The task's view
// gives the copy's size, and its owner sees the text. Before, the edited file ran.
TEST_F(SbatchScriptTest, AnEditAfterSubmitDoesNotChangeTheTask) {
    start("exclusive");
    const std::string work = dir_ + "/work";
    fs::create_directories(work);
    const std::string first = "#!/bin/sh\n#SBATCH -J copy\necho \"version one, $1\"\n";
    std::ofstream(work + "/train.sh") << first;
    const Run r = submit_cli(work, "--json --hold -g 0 train.sh arg");
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    const TaskId id = json::parse(r.out)["id"];
    std::ofstream(work + "/train.sh") << "#!/bin/sh\necho version two\n";
    const json held = task(id);
    EXPECT_EQ(held["script"]["arg"], 1) << held.dump();
    EXPECT_EQ(held["script"]["bytes"], first.size()) << held.dump();
    EXPECT_EQ(held["script"]["text"], first) << held.dump();
    const std::string show = fmt::format("{} show --socket {} {} --script > {}/show.out", CARMA_BIN,
                                         socket_, id, dir_);
    ASSERT_EQ(std::system(show.c_str()), 0);
    EXPECT_EQ(read_text(dir_ + "/show.out"), first);
    ASSERT_TRUE(client().hold(TaskRef::of(id), false));
    ASSERT_TRUE(eventually([&] { return state(id) == "succeeded"; })) << task(id).dump();
    auto log = client().logs(id, api::LogRequest{});
    ASSERT_TRUE(log) << log.error().message;
    EXPECT_EQ(log->text, "version one, arg\n");
}

// This test verifies sbatch's throttle: of `--array=0-5%2`, at most two members are let in at
// once (waiting in the queue or running), the others wait with the throttle named, and all six
// run in the end. Before, "0-5%2" was refused with a garbled message.
TEST_F(SbatchScriptTest, ArrayThrottleRunsAtMostN) {
    start("exclusive");
    auto r = client().submit({{"command", {"/bin/sh", "-c", "sleep 1"}},
                              {"workdir", dir_},
                              {"gpus", 0},
                              {"array", "0-5%2"}});
    ASSERT_TRUE(r) << r.error().message;
    std::vector<TaskId> ids = (*r)["array_tasks"].get<std::vector<TaskId>>();
    ASSERT_EQ(ids.size(), 6u);
    EXPECT_EQ(task(ids[5])["array"]["max_running"], 2) << task(ids[5]).dump();
    // The members beyond two wait with the throttle as their reason, in the queue and the view.
    EXPECT_NE(task(ids[5]).value("message", "").find("at most 2 members"), std::string::npos)
        << task(ids[5]).dump();
    auto v = client().view();
    ASSERT_TRUE(v) << v.error().message;
    std::size_t throttled = 0;
    for (const json& q : (*v)["queue"]) {
        throttled += q.value("reason", "").find("at most 2 members") != std::string::npos;
    }
    EXPECT_GE(throttled, 1u) << v->dump();
    std::size_t most = 0;
    ASSERT_TRUE(eventually([&] {
        // One answer, so the states are of one moment: read one member at a time, a member
        // that ended and the one let in after it could both be counted as running.
        auto all = client().list_tasks(true);
        if (!all) {
            return false;
        }
        std::size_t running = 0, done = 0;
        for (const json& t : (*all)["tasks"]) {
            const std::string s = t.value("state", "");
            running += s == "running" ? 1 : 0;
            done += s == "succeeded" ? 1 : 0;
        }
        most = std::max(most, running);
        return done == ids.size();
    }, 120s));
    EXPECT_LE(most, 2u);
    EXPECT_GE(most, 1u);
}

// This test verifies that a task its owner cancels while it runs says who cancelled it, as
// Slurm's "CANCELLED by UID"; before, it said "exit code 143" (what SIGTERM left).
TEST_F(SbatchScriptTest, OwnersCancelSaysWho) {
    start("exclusive");
    const TaskId id = submit({{"command", {"/bin/sleep", "600"}}, {"workdir", dir_}, {"gpus", 0}});
    ASSERT_TRUE(eventually([&] { return state(id) == "running"; }));
    ASSERT_TRUE(client().cancel(id));
    ASSERT_TRUE(eventually([&] { return state(id) == "cancelled"; }, 60s));
    const std::string message = task(id).value("message", "");
    EXPECT_NE(message.find("cancelled by "), std::string::npos) << message;
    EXPECT_EQ(message.find("exit code"), std::string::npos) << message;
}

}  // namespace
}  // namespace carma
