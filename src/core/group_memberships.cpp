#include "core/group_memberships.h"

#include <utility>

namespace carma {

GroupMemberships::GroupMemberships(double lifetime_s)
    : lifetime_s_(lifetime_s > 0 ? lifetime_s : 1) {}

bool GroupMemberships::stale(const std::string& user, double now) const {
    const auto at = looked_up_at_.find(user);
    // A clock that went back (it should not) counts as stale too.
    return at == looked_up_at_.end() || !(now - at->second < lifetime_s_) || now < at->second;
}

void GroupMemberships::put(const std::string& user, std::vector<std::string> groups, double now) {
    groups_[user] = std::move(groups);
    looked_up_at_[user] = now;
}

}  // namespace carma
