// sbatch's -o/-e checked at submit (issue 45, item 4): a directory that does not exist, or that
// the submitter may not write in, is refused with the path and what to do, instead of a task
// that waits, fails at launch and fails its dependants.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/daemon_fixture.h"
#include "daemon/daemon_programs.h"

namespace carma::daemon_test {
namespace {

using ::testing::HasSubstr;
using test_support::root_and_user;

json with_output(const std::string& workdir, const std::string& output) {
    return json{{"command", {"/bin/true"}}, {"workdir", workdir}, {"name", "train"},
                {"output", output}};
}

// This test verifies that `-o logs/%x-%j.out` without logs/ is refused at submit, naming the
// directory and how to make it, and accepted once it exists.
TEST_F(DaemonTest, MissingOutputDirectoryIsRefusedAtSubmit) {
    start("exclusive");
    const std::string work = dir_ + "/exp";
    fs::create_directories(work);
    auto refused = client().submit(with_output(work, "logs/%x-%j.out"));
    ASSERT_FALSE(refused) << "accepted: " << refused->dump();
    EXPECT_THAT(refused.error().message, HasSubstr(work + "/logs does not exist"));
    EXPECT_THAT(refused.error().message, HasSubstr("mkdir -p " + work + "/logs"));
    auto id_coded = client().submit(with_output(work, "run-%j/out.log"));  // known once stored
    EXPECT_TRUE(id_coded) << id_coded.error().message;

    fs::create_directories(work + "/logs");
    auto accepted = client().submit(with_output(work, "logs/%x-%j.out"));
    ASSERT_TRUE(accepted) << accepted.error().message;
    const TaskId id = (*accepted)["id"].get<TaskId>();
    EXPECT_EQ(wait_final(id)["state"], "succeeded");
    EXPECT_TRUE(fs::exists(fmt::format("{}/logs/train-{}.out", work, id)));
}

// This test verifies that a user's `-o /root/out.log` (a directory they may not write in) is
// refused at submit, checked with their rights rather than the root daemon's, while their own
// directory is accepted.
TEST_F(DaemonTest, OutputDirectoryIsCheckedAsTheSubmitter) {
    std::optional<passwd> alice;
    ASSERT_NO_FATAL_FAILURE(
        root_and_user("carma-test-alice", alice, "to create a user and check paths as them"));
    start("exclusive");
    const std::string mine = dir_ + "/alice";
    fs::create_directories(mine);
    ASSERT_EQ(::chown(mine.c_str(), alice->pw_uid, alice->pw_gid), 0);
    const std::string out = dir_ + "/answers";
    fs::create_directories(out);
    fs::permissions(out, fs::perms::all);
    const int rc = as_user(*alice, [&] {
        api::ApiClient c(socket_);
        auto root_dir = c.submit(with_output("/tmp", "/root/out.log"));
        auto error_dir = c.submit(json{{"command", {"/bin/true"}}, {"workdir", mine},
                                       {"output", "out.log"}, {"error", "/root/err.log"}});
        auto own = c.submit(with_output(mine, "%x.out"));
        std::ofstream(out + "/root") << (root_dir ? "accepted" : root_dir.error().message);
        std::ofstream(out + "/error") << (error_dir ? "accepted" : error_dir.error().message);
        std::ofstream(out + "/own") << (own ? "accepted" : own.error().message);
        return 0;
    });
    ASSERT_EQ(rc, 0);
    EXPECT_THAT(read_text(out + "/root"),
                HasSubstr("--output /root/out.log: directory /root is not writable by you"));
    EXPECT_THAT(read_text(out + "/error"),
                HasSubstr("--error /root/err.log: directory /root is not writable by you"));
    EXPECT_EQ(read_text(out + "/own"), "accepted");
}

}  // namespace
}  // namespace carma::daemon_test
