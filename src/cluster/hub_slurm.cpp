// What Slurm says of the nodes' allocations (squeue, scontrol; cached, bounded in time): whether
// a job still runs, which nodes it holds and where each node is (MUNGE mode takes a report only
// from a node of the job it names, made on that node's address), and the monitor thread that
// declares a silent node of a gone job lost.

#include "cluster/hub.h"
#include "cluster/hub_impl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "exec/run_program.h"

namespace carma::cluster {

using nlohmann::json;

namespace {

// Runs argv without a shell; its stdout, or nullopt when it could not run, failed or took longer
// than a Slurm controller that answers ever does.
std::optional<std::string> run_capture(const std::vector<std::string>& argv) {
    exec::ProgramOptions o;
    o.timeout_s = 30;
    auto run = exec::run_program(argv, o);
    if (!run || !run->succeeded()) {
        return std::nullopt;
    }
    return std::move(run->out);
}

}  // namespace

AllocationState squeue_allocation_state(const std::string& job) {
    // squeue of a job Slurm has forgotten fails ("Invalid job id specified") or prints nothing.
    auto out = run_capture({"squeue", "-h", "-j", job, "-o", "%T"});
    if (!out) {
        auto any = run_capture({"squeue", "-h", "-o", "%i"});
        return any ? AllocationState::Gone : AllocationState::Unknown;
    }
    const std::string state = std::string(out->substr(0, out->find('\n')));
    if (state == "RUNNING" || state == "COMPLETING" || state == "PENDING" ||
        state == "CONFIGURING" || state == "SUSPENDED") {
        return AllocationState::Running;
    }
    return AllocationState::Gone;
}

std::optional<std::set<std::string>> squeue_allocation_nodes(const std::string& job) {
    auto list = run_capture({"squeue", "-h", "-j", job, "-o", "%N"});
    if (!list) {
        return std::nullopt;
    }
    const std::string node_list = list->substr(0, list->find('\n'));
    std::set<std::string> out;
    if (node_list.empty()) {
        return out;
    }
    auto names = run_capture({"scontrol", "show", "hostnames", node_list});
    if (!names) {
        return std::nullopt;
    }
    std::size_t at = 0;
    while (at < names->size()) {
        const std::size_t end = std::min(names->find('\n', at), names->size());
        if (end > at) {
            out.insert(names->substr(at, end - at));
        }
        at = end + 1;
    }
    return out;
}

std::optional<std::set<std::string>> slurm_node_addresses(const std::string& node) {
    std::string host = node;
    if (auto shown = run_capture({"scontrol", "show", "node", "-o", node})) {
        const std::size_t at = shown->find(" NodeAddr=");
        if (at != std::string::npos) {
            const std::size_t from = at + 10;
            const std::string addr =
                shown->substr(from, shown->find_first_of(" \n", from) - from);
            if (!addr.empty()) {
                host = addr;
            }
        }
    }
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
        return std::nullopt;
    }
    std::set<std::string> out;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        char text[INET_ADDRSTRLEN] = {};
        const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
        if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) {
            out.insert(text);
        }
    }
    ::freeaddrinfo(found);
    return out.empty() ? std::nullopt : std::optional(std::move(out));
}

Result<void> Hub::Impl::node_at_origin(const auth::RequestHead& head) {
    const double t = exec::steady_now();
    std::optional<std::set<std::string>> known;
    bool cached = false;
    {
        std::lock_guard lock(allocation_mu);
        auto it = addresses.find(head.node);
        if (it != addresses.end() && t - it->second.first < kAllocationCacheS) {
            known = it->second.second;
            cached = true;
        }
    }
    if (!cached) {
        known = options.node_addresses ? options.node_addresses(head.node)
                                       : slurm_node_addresses(head.node);
        std::lock_guard lock(allocation_mu);
        if (addresses.size() > 1024) {
            addresses.clear();
        }
        addresses[head.node] = {t, known};
    }
    if (!known) {
        return fail(ErrorCode::Forbidden,
                    fmt::format("node {}'s address cannot be found (scontrol show node {}, then "
                                "its name in DNS): with MUNGE the server takes a node's reports "
                                "only from its own address, and this one came from {}",
                                head.node, head.node, head.origin_addr));
    }
    if (!known->contains(head.origin_addr)) {
        std::string list;
        for (const std::string& a : *known) {
            list += (list.empty() ? "" : ", ") + a;
        }
        return fail(ErrorCode::Forbidden,
                    fmt::format("node {}'s report was made on {} (munged's origin address), not "
                                "on node {} ({}): a report for another node than the one it "
                                "comes from is refused; if it is that node, its munged "
                                "announces another address (start it with --origin=ADDRESS, "
                                "the node's NodeAddr)",
                                head.node, head.origin_addr, head.node, list));
    }
    return {};
}

Result<void> Hub::Impl::node_in_allocation(const AgentReport& report) {
    if (report.slurm_job.empty()) {
        return fail(ErrorCode::Forbidden,
                    fmt::format("node {} names no Slurm job: with MUNGE the server takes "
                                "reports only from nodes of a Slurm allocation (start the "
                                "agent inside one, e.g. `carma slurm up`)",
                                report.node));
    }
    const double t = exec::steady_now();
    {
        std::lock_guard lock(allocation_mu);
        auto it = allocations.find(report.slurm_job);
        if (it != allocations.end() && t - it->second.first < kAllocationCacheS &&
            it->second.second.contains(report.node)) {
            return {};
        }
    }
    auto held = options.allocation_nodes ? options.allocation_nodes(report.slurm_job)
                                          : squeue_allocation_nodes(report.slurm_job);
    if (!held) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot ask Slurm which nodes job {} holds (squeue, "
                                "scontrol); node {}'s report waits",
                                report.slurm_job, report.node));
    }
    const bool in = held->contains(report.node);
    {
        std::lock_guard lock(allocation_mu);
        if (allocations.size() > 1024) {
            allocations.clear();
        }
        allocations[report.slurm_job] = {t, std::move(*held)};
    }
    if (!in) {
        return fail(ErrorCode::Forbidden,
                    fmt::format("node {} is not in Slurm job {}'s allocation: its report is "
                                "refused",
                                report.node, report.slurm_job));
    }
    return {};
}

void Hub::Impl::monitor() {
    std::unique_lock lock(mu);
    while (!stopping) {
        monitor_wake.wait_for(lock, std::chrono::seconds(2));
        if (stopping) {
            break;
        }
        std::vector<std::pair<std::string, std::string>> to_ask;
        for (const auto& [name, node] : nodes) {
            if (!node.lost && !node.slurm_job.empty() && node.last_seen_steady > 0 &&
                (!fresh(node) || node.ending)) {
                to_ask.emplace_back(name, node.slurm_job);
            }
        }
        if (to_ask.empty()) {
            continue;
        }
        lock.unlock();
        std::vector<AllocationState> answers;
        for (const auto& [name, job] : to_ask) {
            answers.push_back(options.allocation_state ? options.allocation_state(job)
                                                       : squeue_allocation_state(job));
        }
        lock.lock();
        for (std::size_t i = 0; i < to_ask.size(); ++i) {
            auto it = nodes.find(to_ask[i].first);
            if (it == nodes.end() || answers[i] != AllocationState::Gone ||
                it->second.slurm_job != to_ask[i].second || fresh(it->second)) {
                continue;
            }
            it->second.lost = true;
            spdlog::warn("node {}: its agent is gone and Slurm job {} no longer holds the "
                         "node; its GPUs are out of placement and its attempts are lost",
                         it->first, it->second.slurm_job);
        }
    }
}

}  // namespace carma::cluster
