#pragma once
// Whom a root agent will run a launch as. Whoever holds one node's key (or poses as the server)
// can send any launch, so a root agent refuses identities that are root in all but name: uid 0,
// gid 0, or a privileged group among the supplementary ones (disk reads raw devices, shadow the
// password hashes, sudo and adm administer). A red team's launch of uid 65534 with groups
// [0, 6, 42] printed /etc/shadow while the agent checked the uid only. `--allow-root-tasks` lifts
// the rule; the list of groups is the agent's `--privileged-groups`. Pure.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace carma::cluster {

// The default `--privileged-groups`, by name (resolved on the node: a name it lacks is skipped).
inline const std::vector<std::string> kDefaultPrivilegedGroups = {"root", "disk", "shadow",
                                                                  "sudo", "adm"};

struct LaunchIdentity {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary
};

// Why the agent (running as `agent_uid`) must not run the launch, with what to do; nothing when
// it may. `privileged`: gid -> name of the groups refused (gid 0 is refused whatever it holds).
std::optional<std::string> refuse_launch_identity(const LaunchIdentity& who, uid_t agent_uid,
                                                  bool allow_root_tasks,
                                                  const std::map<gid_t, std::string>& privileged);

}  // namespace carma::cluster
