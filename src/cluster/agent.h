#pragma once
// `carma agent`: one per node. Owns the node's GPUs (device/backend_choice.h, as the daemon), samples them,
// starts and supervises attempts under carma-shim exactly as the single-server daemon does, and
// reports all of it to the CARMA server every period (cluster/wire.h, cluster/hub.h), running
// the launch and stop commands the server answers with.
//
// Restart safety as the daemon's: attempts run under detached supervisors in
// <state_dir>/attempts/<name>, and a restarted agent reports every attempt directory the server
// has not yet told it to forget, so nothing that ran or ended while it was away is lost. A server
// that cannot be reached is retried with backoff; the tasks keep running meanwhile.

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "cluster/authenticator.h"
#include "core/result.h"
#include "device/backend_choice.h"

namespace carma::cluster {

struct AgentOptions {
    std::string server_host;
    int server_port = 0;
    // Signs its reports and checks that answers come from the server (token or MUNGE).
    std::shared_ptr<auth::AgentAuth> auth;
    std::string node;       // default: $SLURMD_NODENAME, else the host name
    std::string slurm_job;  // default: $SLURM_JOB_ID
    // The node's GPUs, as for `carma serve`; its state_dir also holds the attempts.
    device::BackendChoice backend;
    std::string shim_path;  // the supervisor, carma-shim
    double kill_grace_s = 10;
    double period_s = 1;
    // On SIGTERM (Slurm ending the allocation): stop the attempts, report their ends, then exit.
    bool stop_tasks_on_exit = false;
    // A root agent runs tasks of uid 0 only when told so: otherwise whoever could pose as the
    // server would get root on every node.
    bool allow_root_tasks = false;
    // Groups a root agent's tasks may not have, primary or supplementary, by gid (gid 0 always):
    // cluster/launch_identity.h, the agent's --privileged-groups resolved on the node.
    std::map<gid_t, std::string> privileged_groups;
};

// Runs until `stop`; returns the process's exit status. Errors at start (no GPUs, a bad state
// directory) are returned; a server that cannot be reached is not one.
Result<int> run_agent(const AgentOptions& options, const std::atomic<bool>& stop);

}  // namespace carma::cluster
