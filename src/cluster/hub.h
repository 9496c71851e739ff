#pragma once
// The server's side of scheduling over several nodes: where the agents (`carma agent`, one per
// node) report, and what the daemon sees them through.
//
// Agents POST a report every sampling period (cluster/wire.h) over HTTP with the shared token as
// a bearer; the answer carries the commands queued for that node. Nothing of a connection is
// state: an agent or the server that restarts just reports or answers again, and commands queued
// while a node was away wait for it.
//
// GPUs: each node's GPUs get the server's own indices ("slots") the first time the node reports;
// the mapping is kept in <state_dir>/nodes.json so a restarted server numbers them the same (the
// store's attempts name GPUs by these indices). A slot whose node is not reporting samples as an
// error, which takes it out of placement through the daemon's usual health rule.
//
// A node whose agent is gone is waited for: its tasks may well still run. Only once its Slurm
// allocation is gone (asked through `allocation_state`, e.g. squeue) is the node lost, and the
// daemon records its attempts as lost and queues their tasks again.

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/authenticator.h"
#include "cluster/wire.h"
#include "core/result.h"
#include "device/gpu_backend.h"
#include "exec/launch.h"
#include "http/listener_limits.h"

namespace carma::cluster {

enum class AllocationState { Running, Gone, Unknown };

// An expected attempt missing from this many reports in a row (each listed without error) is
// gone even if the agent never confirms it (Command::Kind::Check).
inline constexpr int kMissingReports = 10;
// How long a stored end waits for the rest of its logs before the agent is told to forget it.
inline constexpr double kForgetWaitS = 30;

// The agents' port's handler threads for its connection caps: every connection of both pools,
// and room for the ones being dropped, so no kind of connection can hold every thread.
inline std::size_t agent_port_threads(const http::ListenerLimits& l) {
    return l.max_authenticated_connections + l.max_unauthenticated_connections + 28;
}

// An agent opens one connection per report and its reports are small (a few KiB, at most 256 KiB
// of logs): the deadlines are for a network, not for a trickle, and a node needs one connection
// at a time (a few, for one that restarts).
inline constexpr std::size_t kAgentConnections = 256;
inline constexpr std::size_t kAgentConnectionsPerNode = 4;
inline constexpr int kAgentHeadTimeoutS = 5;
inline constexpr int kAgentRequestTimeoutS = 15;

inline http::ListenerLimits agent_port_limits() {
    http::ListenerLimits l;
    l.max_body_bytes = 8 << 20;
    l.refuse_long_body_unread = true;
    l.read_timeout_s = 5;
    l.head_timeout_s = kAgentHeadTimeoutS;
    l.request_timeout_s = kAgentRequestTimeoutS;
    l.keep_alive_s = 5;
    l.max_head_bytes = 8 << 10;
    l.max_unauthenticated_connections = 16;
    l.max_authenticated_connections = kAgentConnections;
    l.max_connections_per_identity = kAgentConnectionsPerNode;
    l.max_threads = agent_port_threads(l);
    return l;
}

struct HubOptions {
    std::string host = "127.0.0.1";
    int port = 0;           // 0: any free port (tests)
    // How agents prove who they are, and the answers that they come from the server
    // (cluster/authenticator.h). Unset: token mode keyed by `token` (the master token).
    std::shared_ptr<auth::ServerAuth> auth;
    std::string token;
    std::string state_dir;  // nodes.json
    double node_timeout_s = 30;    // gone this long: out of placement, its allocation asked
    // A launch the node does not answer in time fails; no shorter than the agent's own wait
    // for the shim to start the task, or a slow start would be stopped as a stray.
    double launch_timeout_s = exec::kStartDeadlineS + 5;
    // How often agents should report: the daemon's sampling period, told in every answer so
    // the agents follow the server's --time-scale without being told it themselves.
    double report_period_s = 1;
    // Whether a Slurm job still holds its nodes; the default asks `squeue`.
    std::function<AllocationState(const std::string& job)> allocation_state;
    // The nodes of a Slurm job's allocation, nothing when Slurm cannot say; the default asks
    // `squeue` and `scontrol show hostnames`. In MUNGE mode a report is taken only from a node
    // Slurm says is in the job it names: munged vouches for the agent's uid, Slurm for its node.
    std::function<std::optional<std::set<std::string>>(const std::string& job)> allocation_nodes;
    // MUNGE mode: the IPv4 addresses (dotted) a node's name stands for, nothing when they
    // cannot be found; the default is slurm_node_addresses. A report is taken only from a host
    // munged vouches is one of them (the credential's origin address): the node's name is bound
    // to where the credential was made, not only self-asserted.
    std::function<std::optional<std::set<std::string>>(const std::string& node)> node_addresses;
    // The agents' port against senders that are not agents, and against a node's key used to
    // flood it (agent_port_limits()): a report's body at most 8 MiB (413, unread), its head
    // 8 KiB within 5 s, the whole request within 15 s (a connection that trickles its bytes is
    // closed with 408), 5 s per read; 16 connections without credentials (the oldest dropped
    // for a newcomer), 256 agents' connections in all and 4 per node (429 beyond: one node's
    // key cannot take the others' slots), a thread per connection of both (300). The daemon
    // sets the caps and deadlines from its configuration (agent_connections,
    // agent_connections_per_node, agent_head_timeout_s, agent_request_timeout_s).
    http::ListenerLimits limits = agent_port_limits();
    // Reports per node: a burst of report_burst, then report_rate_per_s on average (0: 20
    // times the rate report_period_s asks for, at least 10 a second); beyond it, 429.
    double report_burst = 20;
    double report_rate_per_s = 0;
};

// `squeue -h -j JOB -o %T`: Running while Slurm lists the job running (or completing), Gone when
// it does not know the job or lists it in a final state, Unknown when squeue cannot be asked.
AllocationState squeue_allocation_state(const std::string& job);
std::optional<std::set<std::string>> squeue_allocation_nodes(const std::string& job);
// A node's addresses as Slurm knows them: `scontrol show node -o NODE`'s NodeAddr (the node's
// name itself when scontrol cannot say), resolved to its IPv4 addresses; nothing when neither
// resolves.
std::optional<std::set<std::string>> slurm_node_addresses(const std::string& node);

// What the server knows of one attempt on a node.
struct RemoteAttempt {
    enum class State { Running, Ended, Vanished, Unknown };
    State state = State::Unknown;  // Unknown: its node is not reporting now
    std::optional<exec::ExitRecord> exit;
    std::set<pid_t> members;
    std::string stderr_tail;
};

struct NodeInfo {
    std::string node;
    // up | draining | ending | gone (Slurm, silent) | unreachable (no Slurm, silent) | lost
    std::string state;
    std::string slurm_job;
    std::string host;  // where its agent runs, as the agent says
    std::string backend;
    uid_t uid = 0;
    std::vector<int> gpus;  // the server's indices of its GPUs
    double first_seen = 0;  // unix time
    double last_seen = 0;   // unix time of its last report; 0 = not since the server started
    int attempts = 0;       // attempts its agent supervises now
};

class Hub {
public:
    // Reads nodes.json (the GPU numbering of nodes seen before); listens only on listen().
    static Result<std::unique_ptr<Hub>> create(HubOptions options);
    ~Hub();
    Hub(const Hub&) = delete;
    Hub& operator=(const Hub&) = delete;

    // Starts taking reports (after the daemon has restored its attempts, so an attempt it knows
    // is never mistaken for a stray one).
    Result<void> listen();
    std::string address() const;  // "HOST:PORT" agents connect to
    auth::Mode auth_mode() const;

    std::vector<device::GpuInfo> gpus() const;
    std::vector<device::GpuSample> samples() const;  // one per slot, errors for silent nodes

    // Starts an attempt on a node: queued for its agent, answered with its next report. The
    // request's attempt_dir is the directory's name; the agent puts it under its state dir.
    Result<exec::LaunchHandle> launch(const std::string& node, exec::LaunchRequest request);
    // An attempt the server knows runs there (restored after a restart).
    void expect(const std::string& node, const std::string& name);
    RemoteAttempt attempt(const std::string& node, const std::string& name) const;
    void stop(const std::string& node, const std::string& name);
    // Its end is stored: the agent may stop reporting it.
    void forget(const std::string& node, const std::string& name);

    std::vector<NodeInfo> nodes() const;
    // Nodes of the Slurm job (or the named node) take no new task; returns their names.
    std::vector<std::string> drain(const std::string& node, const std::string& slurm_job);
    // Why nothing may be placed on the node now, "" when it may take tasks.
    std::string unschedulable_reason(const std::string& node) const;
    bool lost(const std::string& node) const;
    // The agent said it is stopping its tasks because its allocation ends.
    bool ending(const std::string& node) const;
    std::string slurm_job(const std::string& node) const;
    // The uid its agent runs as (from its reports); nullopt for a node not known.
    std::optional<uid_t> agent_uid(const std::string& node) const;

    // Handles one report as the HTTP route does; returns the answer's JSON. `identity`: the node
    // the sender's credentials belong to, "" when they do not name one.
    Result<nlohmann::json> handle_report(const nlohmann::json& body,
                                         const std::string& identity = "");

    // Where the server keeps an attempt's logs as its agent streams them ("" for a name that is
    // not an attempt's): the daemon reads remote logs there, never at a path a node reported.
    std::string log_file(const std::string& node, const std::string& name,
                         bool stderr_stream) const;
    // `carma nodes lost NAME`: a node whose agent is silent is given up; its attempts end as
    // lost and their tasks are queued again. Refused while its agent reports.
    Result<void> declare_lost(const std::string& node);

private:
    struct Node;
    struct Impl;
    explicit Hub(HubOptions options);
    std::unique_ptr<Impl> impl_;
};

// The daemon's view of the nodes' GPUs as one backend. gpus() is a snapshot the daemon
// refreshes under its own lock (the API's threads read it), so a node that registers between
// two ticks never changes the list under a reader.
class HubBackend final : public device::GpuBackend {
public:
    explicit HubBackend(std::shared_ptr<Hub> hub) : hub_(std::move(hub)) { refresh(); }
    std::string name() const override { return "cluster"; }
    const std::vector<device::GpuInfo>& gpus() const override { return gpus_; }
    Result<std::vector<device::GpuSample>> sample() override { return hub_->samples(); }
    // Takes in the slots of nodes that registered since; returns whether there are new ones.
    // It replaces the list gpus() returns: whoever calls it and whoever reads gpus() must hold
    // one lock (the daemon's).
    bool refresh();
    Hub& hub() { return *hub_; }

private:
    std::shared_ptr<Hub> hub_;
    std::vector<device::GpuInfo> gpus_;
};

}  // namespace carma::cluster
