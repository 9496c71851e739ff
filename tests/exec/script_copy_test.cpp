// A batch script's copy (LaunchRequest::script), as sbatch keeps one: the shim runs the text
// taken at submit, not the file as it is when the attempt starts, for the daemon's user and for
// a task's user who cannot enter the attempt directory.

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/launch.h"
#include "exec/launch_wait.h"
#include "support.h"
#include "users.h"

namespace carma::exec {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
    return test_support::read_text(path.string());
}

class ScriptCopyTest : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/carma-script-copy-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        root_ = pattern;
        ::chmod(root_.c_str(), 0755);  // the other user reads the script's file path only
        script_file_ = root_ / "train.sh";
        std::ofstream(script_file_) << "echo from the file\n";
    }
    void TearDown() override {
        if (HasFailure()) {
            std::cerr << "shim.log:\n" << read_file(root_ / "attempt" / kShimLogFile);
        }
        std::error_code ec;
        fs::remove_all(root_, ec);
    }

    // `sh train.sh one` with the copy `text` in place of train.sh.
    LaunchRequest request(const std::string& text) const {
        LaunchRequest r;
        r.argv = {"sh", script_file_.string(), "one"};
        r.workdir = root_.string();
        r.env = {{"PATH", "/usr/bin:/bin"}};
        r.attempt_dir = (root_ / "attempt").string();
        r.script = text;
        r.script_arg = 1;
        return r;
    }

    std::optional<ExitRecord> run(const LaunchRequest& r) { return launch_and_wait(r); }

    std::string attempt_file(std::string_view name) const {
        return (root_ / "attempt" / name).string();
    }

    fs::path root_;
    fs::path script_file_;
};

constexpr const char* kCopy = "echo \"from the copy $1\"\necho \"$0\"\n";

// This test verifies that the copy runs in place of the script's file, with the task's own
// arguments after it and $0 naming the descriptor it is read through, and that the attempt
// directory keeps the copy as the record of what ran.
TEST_F(ScriptCopyTest, TheCopyRunsInPlaceOfTheFile) {
    auto record = run(request(kCopy));
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    const std::string out = read_file(attempt_file(kStdoutFile));
    EXPECT_TRUE(out.starts_with("from the copy one\n/dev/fd/")) << out;
    EXPECT_EQ(out.find("from the file"), std::string::npos) << out;
    EXPECT_EQ(read_file(attempt_file(kScriptFile)), kCopy);
    EXPECT_EQ(read_file(script_file_), "echo from the file\n");  // the user's file is untouched
}

// This test verifies that a task running as another user, who cannot enter the attempt
// directory, still reads the copy through its descriptor.
TEST_F(ScriptCopyTest, AnotherUserReadsTheCopy) {
    std::optional<passwd> user;
    ASSERT_NO_FATAL_FAILURE(
        test_support::root_and_user("carma-test-script", user, "to run a task as another user"));
    LaunchRequest r = request(kCopy);
    r.switch_user = true;
    r.uid = user->pw_uid;
    r.gid = user->pw_gid;
    r.groups = {user->pw_gid};
    auto record = run(r);
    ASSERT_TRUE(record);
    ASSERT_TRUE(record->started) << record->error;
    EXPECT_EQ(record->exit_code, 0) << read_file(attempt_file(kStderrFile));
    EXPECT_TRUE(read_file(attempt_file(kStdoutFile)).starts_with("from the copy one\n"))
        << read_file(attempt_file(kStdoutFile));
}

// This test verifies that a copy whose argument is the program itself, or past the command's
// end, is refused before anything starts, naming the argument.
TEST_F(ScriptCopyTest, AnArgumentOutsideTheCommandIsRefused) {
    for (std::size_t arg : {std::size_t{0}, std::size_t{3}}) {
        LaunchRequest r = request(kCopy);
        r.script_arg = arg;
        auto handle = launch(r, CARMA_SHIM_PATH);
        ASSERT_FALSE(handle) << arg;
        EXPECT_EQ(handle.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(handle.error().message.find("script's argument " + std::to_string(arg)),
                  std::string::npos)
            << handle.error().message;
        EXPECT_FALSE(fs::exists(r.attempt_dir));
    }
}

// This test verifies that the copy travels in the request the shim and the agents read, and
// that a request without one reads back without one.
TEST_F(ScriptCopyTest, TheCopyTravelsInTheRequest) {
    auto text = request_to_json(request(kCopy));
    ASSERT_TRUE(text) << text.error().message;
    auto back = request_from_json(*text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->script, kCopy);
    EXPECT_EQ(back->script_arg, 1u);
    auto plain = request_from_json(*request_to_json(request("")));
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(plain->script, "");
}

}  // namespace
}  // namespace carma::exec
