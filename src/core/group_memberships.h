#pragma once
// Each user's Unix groups as fair share reads them ("@group" shares, core/fair_share.h), each
// looked up again once it is `lifetime_s` old (issue 44, item 8). Pure: the caller looks the
// groups up (getgrouplist) and passes its clock. Before, a user's groups were looked up once and
// kept until the daemon restarted, so a user removed from a group kept its shares for months.

#include <map>
#include <string>
#include <vector>

namespace carma {

class GroupMemberships {
  public:
    // `lifetime_s` > 0: how long a lookup is trusted.
    explicit GroupMemberships(double lifetime_s = 300);

    // Whether `user`'s groups must be looked up at `now`: never looked up, or looked up
    // lifetime_s or more ago.
    bool stale(const std::string& user, double now) const;
    // The groups of `user` as looked up at `now`.
    void put(const std::string& user, std::vector<std::string> groups, double now);
    // user -> groups, as build_share_table takes them.
    const std::map<std::string, std::vector<std::string>>& groups() const { return groups_; }

    double lifetime_s() const { return lifetime_s_; }
    // A reload: lookups are trusted this long from now on (those made keep their time).
    void set_lifetime(double lifetime_s) { lifetime_s_ = lifetime_s; }

  private:
    double lifetime_s_;
    std::map<std::string, std::vector<std::string>> groups_;
    std::map<std::string, double> looked_up_at_;
};

}  // namespace carma
