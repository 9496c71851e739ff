// The one runner of external programs (exec/run_program.h): what it returns of a program that
// ran, of one that could not start, and of one that outlived its time, with its children.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/run_program.h"
#include "support.h"

namespace carma::exec {
namespace {

using testing::HasSubstr;

// This test verifies that a program's stdout, stderr and exit status come back apart, and its
// input reaches its stdin.
TEST(RunProgram, OutputErrorStatusAndInput) {
    ProgramOptions o;
    o.input = "from stdin\n";
    auto run = run_program({"sh", "-c", "cat; echo err >&2; exit 3"}, o);
    ASSERT_TRUE(run) << run.error().message;
    ASSERT_TRUE(run->started());
    EXPECT_FALSE(run->timed_out);
    EXPECT_FALSE(run->succeeded());
    EXPECT_EQ(run->out, "from stdin\n");
    EXPECT_EQ(run->err, "err\n");
    EXPECT_EQ(run->how_it_ended(o.timeout_s), "exited with status 3");

    auto ok = run_program({"/bin/true"});
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_TRUE(ok->succeeded());
}

// This test verifies that stderr can join stdout in the order written, and that the given
// environment is the program's whole environment.
TEST(RunProgram, OneStreamAndOwnEnvironment) {
    ProgramOptions o;
    o.stderr_to_stdout = true;
    o.env = std::vector<std::string>{"ONLY=this"};
    auto run = run_program({"/bin/sh", "-c", "echo one; echo two >&2; echo \"$ONLY ${HOME:-none}\""},
                           o);
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_EQ(run->out, "one\ntwo\nthis none\n");
    EXPECT_EQ(run->err, "");
}

// This test verifies that a program that is not there is a run that did not start, naming why,
// not an error of the runner.
TEST(RunProgram, MissingProgramDidNotStart) {
    auto run = run_program({"carma-no-such-program-anywhere"});
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_FALSE(run->started());
    EXPECT_EQ(run->start_error, ENOENT);
    EXPECT_FALSE(run->succeeded());
    EXPECT_THAT(run->how_it_ended(60), HasSubstr("did not start: No such file or directory"));
}

// This test verifies that a program past its time is killed with its process group, so a child
// it left behind does not live on, and that the output written so far comes back.
TEST(RunProgram, TimeoutKillsTheProcessGroup) {
    char tmpl[] = "/tmp/carma-run-program-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string pid_file = std::string(tmpl) + "/child";
    ProgramOptions o;
    o.timeout_s = 0.5;
    auto run = run_program(
        {"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file + "; echo started; wait"}, o);
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_TRUE(run->timed_out);
    EXPECT_FALSE(run->succeeded());
    EXPECT_EQ(run->out, "started\n");
    EXPECT_EQ(run->how_it_ended(o.timeout_s), "did not finish within 0.5 s and was killed");
    const pid_t child = static_cast<pid_t>(std::stoi(test_support::read_text(pid_file)));
    EXPECT_TRUE(test_support::eventually([&] { return ::kill(child, 0) != 0 && errno == ESRCH; }))
        << "the program's child " << child << " outlived the timeout";
    std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace carma::exec
