#include "sim/pack_replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>

#include <fmt/format.h>

namespace carma::sim {

namespace {

struct Job {
    PackRequest request;
    double arrive_s = 0;
    double run_s = 0;
    double start_s = 0;
    double end_s = 0;
    int node = -1;
    std::vector<int> gpus;
};

// Nearest-rank percentile of a sorted sample.
double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) {
        return 0;
    }
    const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

}  // namespace

Result<ReplayRun> replay_timed(const std::vector<NodeSpec>& node_specs, const PodList& pods,
                               const PackPolicy& policy, const ReplayConfig& config) {
    GpuModelTable models;
    std::vector<PackNode> nodes;
    for (const NodeSpec& spec : node_specs) {
        nodes.push_back(make_pack_node(spec, spec.gpus > 0 ? models.intern(spec.gpu_model) : -1));
    }
    const std::vector<PackNode> empty = nodes;
    ReplayRun run;
    run.policy = policy.name;
    run.whole_gpus = config.whole_gpus;

    RequestKinds kinds;
    std::vector<Job> jobs;
    for (const Pod& pod : pods.pods) {
        if (!pod.times || !pod.times->scheduled_s || !pod.times->deleted_s ||
            *pod.times->deleted_s < *pod.times->scheduled_s) {
            ++run.never_scheduled;
            continue;
        }
        Job job;
        job.request = pack_request(pod.task, models);
        if (config.whole_gpus && job.request.shares_a_gpu()) {
            job.request.milli_per_gpu = kMilliPerGpu;
        }
        const bool can_fit = std::any_of(empty.begin(), empty.end(), [&](const PackNode& n) {
            return pack_fits(n, job.request);
        });
        if (!can_fit) {
            ++run.never_fit;
            continue;
        }
        kinds.number(job.request);
        job.arrive_s = pod.times->created_s;
        job.run_s = *pod.times->deleted_s - *pod.times->scheduled_s;
        run.censored += pod.phase == "Running" ? 1 : 0;
        jobs.push_back(std::move(job));
    }
    if (jobs.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: no pod has the creation, scheduled and deletion times a timed "
                                "replay needs (of {} pods, {} were never scheduled and {} fit no "
                                "node)",
                                pods.name, pods.pods.size(), run.never_scheduled, run.never_fit));
    }
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const Job& a, const Job& b) { return a.arrive_s < b.arrive_s; });
    std::vector<PackRequest> requests;
    for (const Job& j : jobs) {
        requests.push_back(j.request);
    }
    const std::vector<TypicalShape> typical = typical_shapes(requests);
    std::mt19937_64 rng(config.seed);
    const std::vector<std::uint32_t> rank = tie_order(nodes.size(), rng);
    PackContext ctx{typical, &rng, rank};
    PackScoreCache cache(nodes.size(), kinds.count());

    using End = std::pair<double, std::size_t>;  // (time, job)
    std::priority_queue<End, std::vector<End>, std::greater<>> ends;
    std::deque<std::size_t> waiting;
    std::size_t next = 0;
    while (next < jobs.size() || !ends.empty() || !waiting.empty()) {
        if (ends.empty() && next >= jobs.size()) {
            // Jobs wait with nothing running and nothing to come: they fit an empty cluster, so
            // this cannot happen; stop rather than loop.
            return fail(ErrorCode::Internal,
                        fmt::format("timed replay: {} pods wait on an idle cluster", waiting.size()));
        }
        double now = next < jobs.size() ? jobs[next].arrive_s : ends.top().first;
        if (!ends.empty()) {
            now = std::min(now, ends.top().first);
        }
        while (!ends.empty() && ends.top().first <= now) {
            Job& j = jobs[ends.top().second];
            pack_release(nodes[static_cast<std::size_t>(j.node)], j.request, j.gpus);
            ends.pop();
        }
        while (next < jobs.size() && jobs[next].arrive_s <= now) {
            waiting.push_back(next++);
        }
        for (auto it = waiting.begin(); it != waiting.end();) {
            Job& j = jobs[*it];
            const PackPlacement p = choose_placement(nodes, j.request, policy, ctx, &cache);
            if (p.node < 0) {
                ++it;
                continue;
            }
            j.node = p.node;
            j.gpus = p.gpus;
            j.start_s = now;
            j.end_s = now + j.run_s;
            pack_take(nodes[static_cast<std::size_t>(p.node)], j.request, j.gpus);
            ends.emplace(j.end_s, *it);
            it = waiting.erase(it);
        }
    }
    std::vector<double> waits;
    std::vector<double> completions;
    double first = jobs.front().arrive_s;
    double last = first;
    for (const Job& j : jobs) {
        waits.push_back(j.start_s - j.arrive_s);
        completions.push_back(j.end_s - j.arrive_s);
        last = std::max(last, j.end_s);
        run.gpu_hours += static_cast<double>(j.request.total_gpu_milli()) / kMilliPerGpu *
                         j.run_s / 3600.0;
    }
    run.pods = jobs.size();
    run.makespan_s = last - first;
    double sum = 0;
    for (double w : waits) {
        sum += w;
    }
    run.wait_mean_s = sum / static_cast<double>(waits.size());
    std::sort(waits.begin(), waits.end());
    std::sort(completions.begin(), completions.end());
    run.wait_p50_s = percentile(waits, 0.50);
    run.wait_p95_s = percentile(waits, 0.95);
    run.completion_p50_s = percentile(completions, 0.50);
    run.completion_p95_s = percentile(completions, 0.95);
    return run;
}

}  // namespace carma::sim
