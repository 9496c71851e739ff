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

TEST_F(ArgCheckTest, ValidLinesAndTheTasksOwnArgumentsPass) {
    EXPECT_EQ(check({"submit", "--gpus", "2", "--mem=12GiB", "-g", "1", "--", "python",
                     "--not-ours"}),
              "");
    EXPECT_EQ(check({"submit", "task.yaml"}), "");
    EXPECT_EQ(check({"queue", "--all", "--socket", "/s"}), "");
    EXPECT_EQ(check({"--help"}), "");
}

}  // namespace
}  // namespace carma::cli
