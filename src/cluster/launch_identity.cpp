#include "cluster/launch_identity.h"

#include <fmt/format.h>

namespace carma::cluster {

namespace {

std::optional<std::string> privileged_group(gid_t gid,
                                            const std::map<gid_t, std::string>& privileged) {
    if (gid == 0) {
        return "0 (root)";
    }
    if (auto it = privileged.find(gid); it != privileged.end()) {
        return fmt::format("{} ({})", gid, it->second);
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> refuse_launch_identity(const LaunchIdentity& who, uid_t agent_uid,
                                                  bool allow_root_tasks,
                                                  const std::map<gid_t, std::string>& privileged) {
    if (agent_uid != 0) {
        if (who.uid != agent_uid) {
            return fmt::format("the agent runs as uid {} and cannot run a task of uid {}; run the "
                               "agent as root or let that user's own allocation serve it",
                               agent_uid, who.uid);
        }
        return std::nullopt;  // it runs as the agent's own user, with the agent's own groups
    }
    if (allow_root_tasks) {
        return std::nullopt;
    }
    constexpr const char* kHint =
        ": whoever could pose as the server would get root on this node; start the agent with "
        "--allow-root-tasks to run such tasks";
    if (who.uid == 0) {
        return fmt::format("the agent refuses tasks of uid 0 (root){}", kHint);
    }
    if (auto g = privileged_group(who.gid, privileged)) {
        return fmt::format("the agent refuses a task of uid {} with the privileged group {}{}",
                           who.uid, *g, kHint);
    }
    for (gid_t extra : who.groups) {
        if (auto g = privileged_group(extra, privileged)) {
            return fmt::format("the agent refuses a task of uid {} with the privileged "
                               "supplementary group {} (see --privileged-groups){}",
                               who.uid, *g, kHint);
        }
    }
    return std::nullopt;
}

}  // namespace carma::cluster
