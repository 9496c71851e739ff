#pragma once
// Private to src/cluster/hub*.cpp: what the hub keeps of each node and its state, under one
// mutex. The hub's files: hub.cpp (the Hub's calls the daemon makes: GPUs, samples, launches,
// attempts, nodes), hub_serve.cpp (the agents' port: admission on the head, the signed answer),
// hub_report.cpp (taking a report into the node table, remote logs), hub_slurm.cpp (what
// Slurm says of allocations, the monitor thread) and hub_nodes_file.cpp (nodes.json).

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/hub.h"
#include "core/rate_limit.h"
#include "exec/clock.h"
#include "http/listener.h"

namespace carma::cluster {

// What the server holds of one remote attempt's logs (<state_dir>/remote-logs/NODE/NAME/).
struct RemoteLogs {
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    bool stdout_done = false;
    bool stderr_done = false;
    bool complete() const { return stdout_done && stderr_done; }
};

struct Hub::Node {
    std::string name;
    std::string host;      // of the agent now reporting as this node
    std::string instance;  // likewise: another live instance is a second agent of the same name
    std::string slurm_job;
    std::string backend;
    uid_t uid = 0;
    std::vector<int> slots;  // by the node's own GPU index
    std::vector<device::GpuSample> samples;  // node-local indices
    std::map<std::string, AttemptReport> attempts;
    std::vector<Command> pending;
    std::set<std::string> expected;   // attempts the daemon knows run here
    std::set<std::string> stop_sent;  // strays already told to stop
    std::set<std::string> forget_sent;  // strays that ended, told to forget
    // Expected attempts missing from its reports: consecutive reports (without a scan error)
    // each was missing from; gone once the agent confirms it or after kMissingReports.
    std::map<std::string, int> missing;
    std::set<std::string> vanished;
    std::map<std::string, RemoteLogs> logs;
    // Ends the daemon stored while logs were still coming: forgotten once they are in (or
    // after kForgetWaitS).
    std::map<std::string, double> forget_after_logs;  // name -> steady time of the request
    std::string scan_error;
    double first_seen_unix = 0;
    double last_seen_unix = 0;
    double last_seen_steady = 0;  // 0: not since the server started
    bool draining = false;
    bool ending = false;
    bool lost = false;
};


struct Hub::Impl {
    HubOptions options;
    mutable std::mutex mu;
    std::condition_variable replied;
    std::map<std::string, Node> nodes;
    std::vector<device::GpuInfo> slots;  // by the server's index
    std::map<std::uint64_t, std::optional<LaunchReply>> waiting;  // launches awaiting replies
    std::uint64_t next_launch = 0;
    std::unique_ptr<http::Listener> http;  // made by listen()
    std::mutex limiter_mu;
    std::optional<RateLimiter> report_limiter;
    std::thread http_thread;
    std::thread monitor_thread;
    bool stopping = false;
    std::condition_variable monitor_wake;

    // The agents' port (hub_serve.cpp).
    // Whether the node may send another report now (a token bucket per node: HubOptions::
    // report_burst, then report_rate_per_s); else false with the seconds until it may.
    bool allow_report(const std::string& node, double* retry_after_s);

    std::string nodes_file() const { return options.state_dir + "/nodes.json"; }

    // Slurm's word on which nodes a job holds, asked at most every kAllocationCacheS per job.
    static constexpr double kAllocationCacheS = 10;
    std::mutex allocation_mu;
    std::map<std::string, std::pair<double, std::set<std::string>>> allocations;

    // MUNGE mode: munged vouched for the sender's uid; the node it names must be in the Slurm
    // job it names. Not under mu (squeue may take a while).
    Result<void> node_in_allocation(const AgentReport& report);

    // MUNGE mode, on a request's head: the host munged says encoded its credential
    // (origin_addr) must be one of the node's addresses (HubOptions::node_addresses, asked at
    // most every kAllocationCacheS per node): a node's name is bound to where it reports from.
    // Forbidden naming both when it is not, or when the node's address cannot be found.
    Result<void> node_at_origin(const auth::RequestHead& head);
    std::map<std::string, std::pair<double, std::optional<std::set<std::string>>>> addresses;

    // nodes.json: which server GPU index each node's GPUs have, kept across restarts because
    // the store's attempts name them (hub_nodes_file.cpp).
    Result<void> load_slots();
    void save_slots() const;

    // Reported within a few of its periods (and 2 s of network slack): its samples are current
    // and it can be sent work.
    bool reporting(const Node& n) const {
        return n.last_seen_steady > 0 &&
               exec::steady_now() - n.last_seen_steady <= 3 * options.report_period_s + 2;
    }

    bool fresh(const Node& n) const {
        return n.last_seen_steady > 0 &&
               exec::steady_now() - n.last_seen_steady <= options.node_timeout_s;
    }

    std::filesystem::path log_dir(const std::string& node, const std::string& name) const {
        return std::filesystem::path(options.state_dir) / "remote-logs" / node / name;
    }

    // Appends the chunks that continue what the server holds; a chunk from another offset (a
    // repeat after a lost answer) is dropped, and the next answer says where to go on from.
    void take_logs(Node& node, const AttemptReport& a);

    // Under mu. `identity`: the node the report's credentials belong to ("" when the sender
    // proved only that it holds the shared secret).
    Result<nlohmann::json> take_report(AgentReport report, const std::string& identity);

    // A request's authentication header, before its body is read: who sent it (its nonce is
    // taken, so the same header never passes twice), or why it is refused (401; 503 when
    // munged cannot be asked).
    struct Refusal {
        int status = 401;
        std::string message;
    };
    std::variant<auth::RequestHead, Refusal> admit(const std::string& header);

    struct Reply {
        int status = 200;
        std::string auth_header;  // set on a 200: the answer proves it comes from the server
        std::string body;
        std::string content_type = "application/json";
    };
    static Reply error_reply(int status, const std::string& message);
    static int status_of(ErrorCode code);

    // One admitted report: its body checked against its head, its node against its
    // credentials, then taken; the answer signed for the request's nonce.
    Reply serve(const auth::RequestHead& head, const std::string& body);

    // The daemon has stored the attempt's end: the node is told to forget it.
    void forget_now(Node& node, const std::string& name);

    // The monitor thread: a node silent past its timeout, or ending, whose Slurm job no longer
    // holds it is lost (hub_slurm.cpp).
    void monitor();
};

}  // namespace carma::cluster
