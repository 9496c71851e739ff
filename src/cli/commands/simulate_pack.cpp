// carma simulate --cluster NODES.csv --trace PODS.csv --protocol fgd: packs a production pod list
// onto a heterogeneous cluster under each packing policy (sim/pack_protocol.h) and compares the
// GPU allocation ratios, the FGD paper's KPI.

#include "cli/commands/simulate_pack.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common/die.h"
#include "sim/openb.h"
#include "sim/pack_protocol.h"
#include "sim/pack_replay.h"

namespace carma::cli {

namespace {

std::vector<PackPolicy> pack_policies(const std::string& list) {
    std::vector<std::string> names;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item == "all") {
            for (const std::string& n : pack_policy_names()) {
                names.push_back(n);
            }
        } else if (!item.empty()) {
            names.push_back(item);
        }
    }
    if (names.empty()) {
        die("--policy needs at least one packing policy, or 'all'");
    }
    std::vector<PackPolicy> out;
    for (const std::string& n : names) {
        out.push_back(or_die(find_pack_policy(n)));
    }
    return out;
}

nlohmann::json to_json(const sim::PackExperiment& e) {
    nlohmann::json runs = nlohmann::json::array();
    for (const sim::PackRun& r : e.runs) {
        nlohmann::json curve = nlohmann::json::object();
        for (const auto& [k, v] : r.allocation_ratio_at) {
            curve[std::to_string(k)] = v;
        }
        runs.push_back({{"policy", r.policy},
                        {"allocation_ratio_at", curve},
                        {"placed", r.placed},
                        {"failed", r.failed},
                        {"failed_gpu_pods", r.failed_gpu},
                        {"gpus_unallocated", r.gpus_unallocated},
                        {"gpus_fragmented", r.gpus_fragmented},
                        {"gpus_stranded", r.gpus_stranded},
                        {"cpu_cores_stranded", r.cpu_cores_stranded},
                        {"seconds", r.seconds}});
    }
    return {{"protocol", "fgd"},
            {"cluster", e.cluster},
            {"trace", e.trace},
            {"nodes", e.nodes},
            {"nodes_without_gpus_left_out", e.nodes_without_gpus_left_out},
            {"gpus", e.gpus},
            {"inflate", e.config.inflate},
            {"seed", e.config.seed},
            {"original_pods", e.original_pods},
            {"inflated_pods", e.inflated_pods},
            {"typical_shapes", e.typical_shapes},
            {"policies", runs}};
}

std::string format_table(const sim::PackExperiment& e) {
    const int top = static_cast<int>(std::nearbyint(e.config.inflate * 100.0));
    std::string out = fmt::format(
        "cluster {}: {} GPU nodes, {} GPUs ({} nodes without GPUs left out)\n"
        "trace {}: {} pods, {} more drawn to reach {:.0f} % of the GPUs, seed {}\n\n",
        e.cluster, e.nodes, e.gpus, e.nodes_without_gpus_left_out, e.trace, e.original_pods,
        e.inflated_pods, e.config.inflate * 100.0, e.config.seed);
    out += fmt::format("{:<12} {:>9} {:>9} {:>8} {:>8} {:>12} {:>12} {:>8}\n", "policy",
                       "alloc@100", fmt::format("alloc@{}", top), "placed", "failed",
                       "unallocated", "fragmented", "seconds");
    for (const sim::PackRun& r : e.runs) {
        auto at = [&](int k) {
            auto it = r.allocation_ratio_at.find(k);
            return it == r.allocation_ratio_at.end() ? std::string("-")
                                                     : fmt::format("{:.2f}", it->second);
        };
        out += fmt::format("{:<12} {:>9} {:>9} {:>8} {:>8} {:>12.1f} {:>12.1f} {:>8.2f}\n",
                           r.policy, at(100), at(top), r.placed, r.failed, r.gpus_unallocated,
                           r.gpus_fragmented, r.seconds);
    }
    return out;
}

nlohmann::json replay_json(const sim::ReplayRun& r) {
    return {{"policy", r.policy},
            {"gpus_per_pod", r.whole_gpus ? "whole" : "as asked"},
            {"pods", r.pods},
            {"never_scheduled_left_out", r.never_scheduled},
            {"never_fit_left_out", r.never_fit},
            {"censored", r.censored},
            {"makespan_s", r.makespan_s},
            {"wait_p50_s", r.wait_p50_s},
            {"wait_p95_s", r.wait_p95_s},
            {"wait_mean_s", r.wait_mean_s},
            {"completion_p50_s", r.completion_p50_s},
            {"completion_p95_s", r.completion_p95_s},
            {"gpu_hours", r.gpu_hours}};
}

// The timed replay: each policy with shares as asked, then with a whole GPU per pod.
int run_timed_replay(const PackSimulateOptions& o, const sim::ClusterSpec& cluster,
                     const sim::PodList& pods, const std::vector<PackPolicy>& policies) {
    std::vector<sim::ReplayRun> runs;
    for (const PackPolicy& p : policies) {
        for (bool whole : {false, true}) {
            runs.push_back(
                or_die(sim::replay_timed(cluster.nodes, pods, p, sim::ReplayConfig{whole, o.seed})));
        }
    }
    if (o.json) {
        nlohmann::json list = nlohmann::json::array();
        for (const sim::ReplayRun& r : runs) {
            list.push_back(replay_json(r));
        }
        fmt::print("{}\n", nlohmann::json{{"protocol", "timed"},
                                          {"cluster", o.cluster},
                                          {"trace", o.trace},
                                          {"nodes", cluster.nodes.size()},
                                          {"seed", o.seed},
                                          {"policies", list}}
                               .dump(2));
        return 0;
    }
    const sim::ReplayRun& first = runs.front();
    fmt::print("cluster {}: {} nodes; trace {}: {} pods replayed on their own times ({} censored: "
               "still running at the trace's end), {} never scheduled and {} fitting no node "
               "left out\n\n",
               o.cluster, cluster.nodes.size(), o.trace, first.pods, first.censored,
               first.never_scheduled, first.never_fit);
    fmt::print("{:<12} {:<9} {:>12} {:>12} {:>12} {:>14} {:>14}\n", "policy", "GPUs", "makespan h",
               "wait p50 m", "wait p95 m", "complete p50 h", "complete p95 h");
    for (const sim::ReplayRun& r : runs) {
        fmt::print("{:<12} {:<9} {:>12.1f} {:>12.1f} {:>12.1f} {:>14.2f} {:>14.2f}\n", r.policy,
                   r.whole_gpus ? "whole" : "as asked", r.makespan_s / 3600, r.wait_p50_s / 60,
                   r.wait_p95_s / 60, r.completion_p50_s / 3600, r.completion_p95_s / 3600);
    }
    return 0;
}

}  // namespace

int run_pack_simulation(const PackSimulateOptions& o) {
    if (o.protocol != "fgd" && o.protocol != "timed") {
        die(fmt::format("--protocol '{}': the cluster protocols are fgd (pods arrive and never "
                        "leave; the KPI is the GPU allocation ratio) and timed (pods replayed on "
                        "their own times)",
                        o.protocol));
    }
    const std::string node_text = or_die(sim::read_text_file(o.cluster, "--cluster"));
    const sim::ClusterSpec cluster = or_die(sim::parse_openb_nodes(node_text, o.cluster));
    const std::string pod_text = or_die(sim::read_text_file(o.trace, "--trace"));
    if (!sim::is_openb_pod_list(pod_text)) {
        die(fmt::format("--trace {}: with --cluster the trace must be an openb pod list (header "
                        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)",
                        o.trace));
    }
    const sim::PodList pods = or_die(sim::parse_openb_pods(pod_text, o.trace));
    const std::vector<PackPolicy> policies = pack_policies(o.policies);
    if (o.protocol == "timed") {
        return run_timed_replay(o, cluster, pods, policies);
    }

    sim::PackProtocolConfig config;
    config.inflate = o.inflate;
    config.seed = o.seed;
    sim::PackExperiment e;
    e.cluster = o.cluster;
    e.trace = o.trace;
    e.config = config;
    const std::vector<NodeSpec> nodes = sim::gpu_nodes_of(cluster, e.nodes_without_gpus_left_out);
    e.nodes = nodes.size();
    for (const NodeSpec& n : nodes) {
        e.gpus += n.gpus;
    }
    GpuModelTable models;
    const sim::PackWorkload workload = or_die(sim::fgd_workload(nodes, pods, models, config));
    e.original_pods = workload.original;
    e.inflated_pods = workload.arrivals.size() > workload.original
                          ? workload.arrivals.size() - workload.original
                          : 0;
    e.typical_shapes = workload.typical.size();
    for (const PackPolicy& p : policies) {
        const auto start = std::chrono::steady_clock::now();
        sim::PackRun run = sim::run_pack_policy(nodes, models, workload, p, config);
        run.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        e.runs.push_back(std::move(run));
    }
    if (o.json) {
        fmt::print("{}\n", to_json(e).dump(2));
    } else {
        fmt::print("{}", format_table(e));
    }
    return 0;
}

}  // namespace carma::cli
