// Group memberships for "@group" shares (core/group_memberships.h), looked up again once they
// are older than their lifetime (issue 44, item 8: they were cached until restart).

#include <gtest/gtest.h>

#include "core/fair_share.h"
#include "core/group_memberships.h"

namespace carma {
namespace {

// This test verifies, on an injected clock, that a user removed from a group loses the group's
// shares once the lookup that still listed it is lifetime_s old, and not before: a lookup is
// trusted for its lifetime, then asked again, and the share table follows what it says.
TEST(GroupMembershipsTest, ARemovedMemberLosesTheGroupsSharesWithinTheLifetime) {
    GroupMemberships groups(300);
    const std::map<std::string, double> configured{{"@phd", 6}};
    const std::set<std::string> users{"alice", "bob"};
    EXPECT_TRUE(groups.stale("alice", 0));
    groups.put("alice", {"alice", "phd"}, 0);
    groups.put("bob", {"bob", "phd"}, 0);
    EXPECT_DOUBLE_EQ(build_share_table(configured, groups.groups(), users).at("alice"), 3);

    // alice leaves the group at 10 s; the system's answer changes, the lookup is still trusted.
    EXPECT_FALSE(groups.stale("alice", 10));
    EXPECT_FALSE(groups.stale("alice", 299));
    // Once 300 s old, it is asked again, and alice has the default share while bob has them all.
    ASSERT_TRUE(groups.stale("alice", 300));
    groups.put("alice", {"alice"}, 300);
    const ShareTable after = build_share_table(configured, groups.groups(), users);
    EXPECT_DOUBLE_EQ(after.at("alice"), 1);
    EXPECT_DOUBLE_EQ(after.at("bob"), 6);
    EXPECT_FALSE(groups.stale("alice", 301));
    EXPECT_TRUE(groups.stale("bob", 300)) << "each user's lookup ages on its own";
    EXPECT_TRUE(groups.stale("alice", 100)) << "a clock that went back asks again";
}

}  // namespace
}  // namespace carma
