#include "sim/pack_protocol.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace carma::sim {

namespace {

std::uint64_t name_hash(std::string_view name) {  // FNV-1a: a policy's own tie-break stream
    std::uint64_t h = 1469598103934665603ULL;
    for (char c : name) {
        h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    }
    return h;
}

double round2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

}  // namespace

std::vector<NodeSpec> gpu_nodes_of(const ClusterSpec& cluster, std::size_t& left_out) {
    std::vector<NodeSpec> out;
    left_out = 0;
    for (const NodeSpec& n : cluster.nodes) {
        if (n.gpus > 0) {
            out.push_back(n);
        } else {
            ++left_out;
        }
    }
    return out;
}

Result<PackWorkload> fgd_workload(const std::vector<NodeSpec>& gpu_nodes, const PodList& pods,
                                  GpuModelTable& models, const PackProtocolConfig& config) {
    if (!(config.inflate > 0) || config.inflate > 100) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--inflate {} must be above 0 and at most 100 (1.3: the GPU "
                                "request reaches 130 % of the capacity)",
                                config.inflate));
    }
    std::int64_t capacity = 0;
    for (const NodeSpec& n : gpu_nodes) {
        models.intern(n.gpu_model);
        capacity += std::int64_t{n.gpus} * kMilliPerGpu;
    }
    if (capacity == 0) {
        return fail(ErrorCode::InvalidArgument,
                    "the cluster has no GPUs; the FGD protocol measures GPU allocation, so give "
                    "a node list with GPU nodes");
    }
    // In name order first, so a seed means the same sequence whatever order the file has.
    std::vector<const Pod*> by_name;
    for (const Pod& p : pods.pods) {
        by_name.push_back(&p);
    }
    std::stable_sort(by_name.begin(), by_name.end(),
                     [](const Pod* a, const Pod* b) { return a->task.name < b->task.name; });
    RequestKinds kinds;
    std::vector<PackRequest> requests;
    for (const Pod* p : by_name) {
        PackRequest r = pack_request(p->task, models);
        kinds.number(r);
        requests.push_back(std::move(r));
    }
    PackWorkload w;
    w.typical = typical_shapes(requests, config.popularity);
    w.original = requests.size();
    w.kinds = kinds.count();

    std::mt19937_64 rng(config.seed);
    w.arrivals = requests;
    shuffle_with(w.arrivals, rng);
    std::int64_t asked = 0;
    for (const PackRequest& r : w.arrivals) {
        asked += r.total_gpu_milli();
    }
    const double target = config.inflate * static_cast<double>(capacity);
    // More than the target already: drop pods at random until it holds, as FGD's tuning does.
    while (static_cast<double>(asked) > target && !w.arrivals.empty()) {
        const std::size_t at = uniform_below(rng, w.arrivals.size());
        asked -= w.arrivals[at].total_gpu_milli();
        w.arrivals.erase(w.arrivals.begin() + static_cast<std::ptrdiff_t>(at));
    }
    const bool any_gpu = std::any_of(requests.begin(), requests.end(),
                                     [](const PackRequest& r) { return r.gpus > 0; });
    while (any_gpu) {
        const PackRequest& drawn = requests[uniform_below(rng, requests.size())];
        if (static_cast<double>(asked + drawn.total_gpu_milli()) > target) {
            break;
        }
        asked += drawn.total_gpu_milli();
        w.arrivals.push_back(drawn);
    }
    w.tie_rank = tie_order(gpu_nodes.size(), rng);
    return w;
}

std::map<int, double> allocation_curve(const std::vector<std::pair<double, double>>& records,
                                       int max_percent) {
    std::map<int, std::pair<double, int>> at;  // rounded arrived percent -> (sum, count)
    for (const auto& [arrived, allocated] : records) {
        auto& slot = at[static_cast<int>(std::nearbyint(arrived))];
        slot.first += round2(allocated);
        slot.second += 1;
    }
    std::map<int, double> curve;
    for (int k = 0; k <= max_percent; ++k) {
        double sum = 0;
        int count = 0;
        if (auto it = at.find(k); it != at.end()) {
            sum = it->second.first;
            count = it->second.second;
        } else {
            for (int near = k - 1; near <= k + 1; ++near) {
                if (auto n = at.find(near); n != at.end()) {
                    sum += n->second.first;
                    count += n->second.second;
                }
            }
        }
        if (count > 0) {
            curve[k] = round2(sum / count);
        }
    }
    return curve;
}

PackRun run_pack_policy(const std::vector<NodeSpec>& gpu_nodes, const GpuModelTable& models,
                        const PackWorkload& workload, const PackPolicy& policy,
                        const PackProtocolConfig& config) {
    std::vector<PackNode> nodes;
    std::int64_t capacity = 0;
    for (const NodeSpec& spec : gpu_nodes) {
        nodes.push_back(make_pack_node(spec, models.find(spec.gpu_model)));
        capacity += std::int64_t{spec.gpus} * kMilliPerGpu;
    }
    std::mt19937_64 rng(config.seed ^ name_hash(policy.name));
    PackContext ctx{workload.typical, &rng, workload.tie_rank};
    PackScoreCache cache(nodes.size(), workload.kinds);
    PackRun run;
    run.policy = policy.name;
    std::int64_t arrived = 0;
    std::int64_t allocated = 0;
    std::vector<std::pair<double, double>> records;
    records.reserve(workload.arrivals.size());
    const double percent = 100.0 / static_cast<double>(capacity);
    for (const PackRequest& r : workload.arrivals) {
        arrived += r.total_gpu_milli();
        const PackPlacement p = choose_placement(nodes, r, policy, ctx, &cache);
        if (p.node >= 0) {
            pack_take(nodes[static_cast<std::size_t>(p.node)], r, p.gpus);
            allocated += r.total_gpu_milli();
            ++run.placed;
        } else {
            ++run.failed;
            run.failed_gpu += r.gpus > 0 ? 1 : 0;
        }
        records.emplace_back(static_cast<double>(arrived) * percent,
                             static_cast<double>(allocated) * percent);
    }
    run.allocation_ratio_at =
        allocation_curve(records, static_cast<int>(std::nearbyint(config.inflate * 100.0)));
    run.gpus_unallocated = static_cast<double>(capacity - allocated) / kMilliPerGpu;
    for (const PackNode& n : nodes) {
        const int free = n.gpu_free_total();
        run.gpus_fragmented += fragment_milli(n, workload.typical) / kMilliPerGpu;
        if (free == 0) {
            run.cpu_cores_stranded += static_cast<double>(n.cpu_milli_free) / 1000.0;
            continue;
        }
        const bool usable = std::any_of(
            workload.typical.begin(), workload.typical.end(), [&](const TypicalShape& t) {
                return t.request.gpus > 0 && t.request.cpu_milli <= n.cpu_milli_free &&
                       t.request.mem_mib <= n.mem_free;
            });
        if (!usable) {
            run.gpus_stranded += static_cast<double>(free) / kMilliPerGpu;
        }
    }
    return run;
}

}  // namespace carma::sim
