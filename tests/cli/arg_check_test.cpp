// Mistyped commands and options are named, with the nearest valid word.

#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/main/arg_check.h"

namespace carma::cli {
namespace {

class ArgCheckTest : public ::testing::Test {
protected:
    ArgCheckTest() {
        (void)add_submit_command(app_);
        (void)add_queue_command(app_);
    }
    std::string check(std::vector<std::string> args) {
        return unknown_argument_message(app_, args);
    }
    CLI::App app_{"carma"};
};

TEST_F(ArgCheckTest, UnknownCommandWithTheNearestOne) {
    EXPECT_EQ(check({"quee"}),
              "unknown command 'quee' (did you mean 'queue'?); `carma --help` lists them");
    EXPECT_EQ(check({"frobnicate"}), "unknown command 'frobnicate'; `carma --help` lists them");
}

TEST_F(ArgCheckTest, UnknownOptionWithTheNearestOne) {
    EXPECT_EQ(check({"submit", "--gpu", "1", "--", "echo", "hi"}),
              "unknown option '--gpu' for `carma submit` (did you mean '--gpus'?); "
              "`carma submit --help` lists them");
    EXPECT_EQ(check({"queue", "--jsn"}),
              "unknown option '--jsn' for `carma queue` (did you mean '--json'?); "
              "`carma queue --help` lists them");
}

// This test verifies that sbatch's options `carma submit` lacks are named with what CARMA has
// instead, not with the nearest spelling (`--nice` suggested '--name' before), and that the ones
// CARMA takes under sbatch's spelling pass.
TEST_F(ArgCheckTest, SlurmOptionsNameCarmasEquivalent) {
    const std::string priority = check({"submit", "--priority=10", "--", "python", "t.py"});
    EXPECT_EQ(priority.find("did you mean"), std::string::npos) << priority;
    EXPECT_NE(priority.find("--nice N"), std::string::npos) << priority;
    EXPECT_NE(check({"submit", "--gpus-per-task=2", "x.yaml"}).find("`-g N`"), std::string::npos);
    EXPECT_EQ(check({"submit", "--gres=gpu:2", "x.yaml"}), "");  // CARMA's own since issue 45
    EXPECT_NE(check({"submit", "--mem-per-gpu", "12G", "x.yaml"}).find("--gpu-mem SIZE"),
              std::string::npos);
    EXPECT_NE(check({"submit", "--mem-per-cpu", "4G", "x.yaml"}).find("-c N --mem"),
              std::string::npos);
    EXPECT_NE(check({"submit", "--partition", "gpu", "x.yaml"}).find("without partitions"),
              std::string::npos);
    const std::string p = check({"submit", "-p", "gpu", "x.yaml"});
    EXPECT_NE(p.find("sbatch's -p"), std::string::npos) << p;
    EXPECT_NE(p.find("after `--`"), std::string::npos) << p;
    EXPECT_NE(check({"submit", "--ntasks=4", "x.yaml"}).find("torchrun"), std::string::npos);
    EXPECT_NE(check({"submit", "--qos=high", "x.yaml"}).find("limits:"), std::string::npos);
    // Other commands keep the plain message.
    EXPECT_NE(check({"queue", "--partition", "x"}).find("`carma queue --help`"),
              std::string::npos);
    EXPECT_EQ(check({"submit", "-J", "n", "-t", "100", "-o", "o-%j", "-e", "e-%j", "-d",
                     "afterok:3", "-a", "0-3", "-D", "/tmp", "--job-name=x", "--time=1-2",
                     "--dependency=afterany:4", "--chdir=/tmp", "--mail-type=END",
                     "--mail-user=me", "--nice=10", "--exclusive", "--max-slowdown", "1.3",
                     "--requeue", "-c", "4", "--cpus-per-task=2", "--mem=8G", "--gpu-mem",
                     "12GiB", "--", "python", "-p", "--nice"}),
              "");
}

TEST_F(ArgCheckTest, ValidLinesAndTheTasksOwnArgumentsPass) {
    EXPECT_EQ(check({"submit", "--gpus", "2", "--mem=12GiB", "-g", "1", "--", "python",
                     "--not-ours"}),
              "");
    EXPECT_EQ(check({"submit", "task.yaml"}), "");
    // As sbatch: everything from the script on is the script's, `--` or not; an option's value
    // is not taken for the script.
    EXPECT_EQ(check({"submit", "-t", "10", "train.sbatch", "--lr", "0.1", "-p"}), "");
    EXPECT_EQ(check({"submit", "--max-slowdown", "1.3", "python", "t.py", "--nice"}), "");
    EXPECT_NE(check({"submit", "-t", "10", "--lr", "0.1", "train.sbatch"}).find("'--lr'"),
              std::string::npos);
    EXPECT_EQ(check({"queue", "--all", "--socket", "/s"}), "");
    EXPECT_EQ(check({"--help"}), "");
}

}  // namespace
}  // namespace carma::cli
