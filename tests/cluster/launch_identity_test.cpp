#include "cluster/launch_identity.h"

#include <gtest/gtest.h>

namespace carma::cluster {
namespace {

const std::map<gid_t, std::string> kPrivileged = {{6, "disk"}, {42, "shadow"}, {27, "sudo"}};

// This test verifies the red team's launch (issue 44, break 5): uid 65534 with gid 0 or with the
// supplementary groups [0, 6, 42] is refused by a root agent, naming the group and
// --allow-root-tasks; so is uid 0, as before. An ordinary identity runs, and --allow-root-tasks
// lifts the rule.
TEST(LaunchIdentityTest, PrivilegedGroupsAreRefusedByARootAgent) {
    auto refused = [](LaunchIdentity who, bool allow = false) {
        return refuse_launch_identity(who, 0, allow, kPrivileged);
    };
    const auto primary = refused({65534, 0, {}});
    ASSERT_TRUE(primary);
    EXPECT_NE(primary->find("privileged group 0 (root)"), std::string::npos) << *primary;
    EXPECT_NE(primary->find("--allow-root-tasks"), std::string::npos) << *primary;
    const auto extra = refused({65534, 65534, {0, 6, 42}});
    ASSERT_TRUE(extra);
    EXPECT_NE(extra->find("supplementary group 0 (root)"), std::string::npos) << *extra;
    const auto shadow = refused({1000, 1000, {100, 42}});
    ASSERT_TRUE(shadow);
    EXPECT_NE(shadow->find("42 (shadow)"), std::string::npos) << *shadow;
    EXPECT_TRUE(refused({1000, 6, {}}));
    const auto root = refused({0, 0, {}});
    ASSERT_TRUE(root);
    EXPECT_NE(root->find("uid 0 (root)"), std::string::npos) << *root;
    EXPECT_FALSE(refused({1000, 1000, {100, 1000}}));
    EXPECT_FALSE(refused({65534, 0, {0, 6, 42}}, true));
    EXPECT_FALSE(refused({0, 0, {}}, true));
}

// This test verifies that an agent that is not root runs only its own user's tasks, with its
// own groups (the launcher drops the request's), whatever the request says.
TEST(LaunchIdentityTest, AnUnprivilegedAgentRunsOnlyItsOwnUser) {
    EXPECT_FALSE(refuse_launch_identity({1000, 1000, {0}}, 1000, false, kPrivileged));
    const auto other = refuse_launch_identity({1001, 1001, {}}, 1000, false, kPrivileged);
    ASSERT_TRUE(other);
    EXPECT_NE(other->find("cannot run a task of uid 1001"), std::string::npos) << *other;
}

}  // namespace
}  // namespace carma::cluster
