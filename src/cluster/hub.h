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

#include "cluster/wire.h"
#include "core/result.h"
#include "device/gpu_backend.h"
#include "exec/launch.h"

namespace carma::cluster {

enum class AllocationState { Running, Gone, Unknown };

struct HubOptions {
    std::string host = "127.0.0.1";
    int port = 0;           // 0: any free port (tests)
    std::string token;      // agents must present it
    std::string state_dir;  // nodes.json
    double node_timeout_s = 30;    // gone this long: out of placement, its allocation asked
    double launch_timeout_s = 10;  // a launch the node does not answer in time fails
    // How often agents should report: the daemon's sampling period, told in every answer so
    // the agents follow the server's --time-scale without being told it themselves.
    double report_period_s = 1;
    // Whether a Slurm job still holds its nodes; the default asks `squeue`.
    std::function<AllocationState(const std::string& job)> allocation_state;
};

// `squeue -h -j JOB -o %T`: Running while Slurm lists the job running (or completing), Gone when
// it does not know the job or lists it in a final state, Unknown when squeue cannot be asked.
AllocationState squeue_allocation_state(const std::string& job);

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
    std::string state;  // up | draining | ending | gone | lost
    std::string slurm_job;
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

    // For tests: handle one report as the HTTP route does; returns the answer's JSON.
    Result<nlohmann::json> handle_report(const nlohmann::json& body);

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
    bool refresh();
    Hub& hub() { return *hub_; }

private:
    std::shared_ptr<Hub> hub_;
    std::vector<device::GpuInfo> gpus_;
};

}  // namespace carma::cluster
