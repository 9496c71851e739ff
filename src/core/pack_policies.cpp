#include "core/pack_policies.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace carma {

namespace {

// Kubernetes' score range, which the FGD simulator's plugins use as integers.
constexpr std::int64_t kMaxScore = 100;
// The largest node the FGD paper's cluster has (128 cores, 8 GPUs): DotProd and BestFit
// normalise free and asked resources by it, Clustering the GPUs left.
constexpr double kSpecCpuMilli = 128000;
constexpr double kSpecGpuMilli = 8000;

// ---- shapes and fragmentation ----

using ShapeKey = std::tuple<std::int64_t, int, int, std::vector<int>>;

ShapeKey key_of(const PackRequest& r) {
    return {r.cpu_milli, r.milli_per_gpu, r.gpus, r.models};
}

}  // namespace

std::vector<TypicalShape> typical_shapes(std::span<const PackRequest> requests, double popularity) {
    std::map<ShapeKey, std::pair<double, PackRequest>> counts;
    for (const PackRequest& r : requests) {
        auto [it, fresh] = counts.try_emplace(key_of(r), 0.0, r);
        it->second.first += 1;
    }
    std::vector<TypicalShape> shapes;
    shapes.reserve(counts.size());
    for (const auto& [key, entry] : counts) {
        shapes.push_back({entry.second, entry.first});
    }
    // Most common first; among equals the larger shape first, so the cut is deterministic.
    std::stable_sort(shapes.begin(), shapes.end(), [](const TypicalShape& a, const TypicalShape& b) {
        if (a.share != b.share) {
            return a.share > b.share;
        }
        return key_of(b.request) < key_of(a.request);
    });
    const double total = static_cast<double>(requests.size());
    double covered = 0;
    std::size_t kept = 0;
    while (kept < shapes.size() && covered < popularity * total) {
        covered += shapes[kept].share;
        ++kept;
    }
    shapes.resize(kept);
    for (TypicalShape& s : shapes) {
        s.share /= covered > 0 ? covered : 1;
    }
    return shapes;
}

double fragment_milli(const PackNode& node, std::span<const TypicalShape> typical) {
    const int idle = node.gpu_free_total();
    if (idle == 0) {
        return 0;
    }
    double fragmented = 0;
    for (const TypicalShape& t : typical) {
        const PackRequest& r = t.request;
        if (r.gpus == 0 || !model_allowed(node, r) || r.cpu_milli > node.cpu_milli_free) {
            fragmented += t.share * idle;
            continue;
        }
        int room = 0;
        int too_small = 0;
        for (int g = 0; g < node.gpus; ++g) {
            const int free = node.gpu_free[static_cast<std::size_t>(g)];
            if (free >= r.milli_per_gpu) {
                ++room;
            } else {
                too_small += free;
            }
        }
        fragmented += t.share * (room >= r.gpus ? too_small : idle);
    }
    return fragmented;
}

namespace {

// ---- the policies' scores ----

std::int64_t score_none(const PackNode&, const PackRequest&, const PackContext&) { return 0; }

// DotProd (Grandl et al.'s Tetris alignment, as the FGD simulator scores it with dimensions
// merged and normalised by the largest node): the less the request's vector aligns with what the
// node has free, the higher the score.
std::int64_t score_dotprod(const PackNode& n, const PackRequest& r, const PackContext&) {
    const double dot = (static_cast<double>(n.cpu_milli_free) / kSpecCpuMilli) *
                           (static_cast<double>(r.cpu_milli) / kSpecCpuMilli) +
                       (n.gpu_free_total() / kSpecGpuMilli) *
                           (static_cast<double>(r.total_gpu_milli()) / kSpecGpuMilli);
    return static_cast<std::int64_t>(static_cast<double>(kMaxScore) * (1.0 - dot / 2.0));
}

// Clustering: GPU requests of one shape together. A node holding only this shape scores in
// (75, 100], one holding it among others (50, 75], an empty node (25, 50], one holding other
// shapes (0, 25]; within each band, the fewer GPUs left the higher.
std::int64_t score_clustering(const PackNode& n, const PackRequest& r, const PackContext&) {
    const int tag = affinity_tag(r);
    if (tag < 0) {
        return 0;
    }
    int shapes_here = 0;
    for (int c : n.tasks_by_tag) {
        shapes_here += c > 0 ? 1 : 0;
    }
    const std::int64_t quarter = kMaxScore / 4;
    const std::int64_t within =
        quarter * (static_cast<std::int64_t>(kSpecGpuMilli) - n.gpu_free_total()) /
        static_cast<std::int64_t>(kSpecGpuMilli);
    if (n.tasks_by_tag[static_cast<std::size_t>(tag)] > 0) {
        return within + (shapes_here == 1 ? 3 : 2) * quarter;
    }
    return within + (shapes_here == 0 ? quarter : 0);
}

// Packing: partly used GPUs first, then partly used nodes, then empty nodes; tighter is better
// within each tier.
std::int64_t score_packing(const PackNode& n, const PackRequest& r, const PackContext&) {
    if (r.gpus == 0) {
        return 0;
    }
    const int fully_free = n.fully_free_gpus();
    if (fully_free == n.gpus) {
        return std::max<std::int64_t>(kMaxScore / 3 - fully_free, fully_free);
    }
    std::array<int, kMaxPackGpusPerNode> order{};
    for (int g = 0; g < n.gpus; ++g) {
        order[static_cast<std::size_t>(g)] = g;
    }
    std::stable_sort(order.begin(), order.begin() + n.gpus, [&](int a, int b) {
        return n.gpu_free[static_cast<std::size_t>(a)] < n.gpu_free[static_cast<std::size_t>(b)];
    });
    int wanted = r.gpus;
    int fresh_used = 0;
    std::int64_t free_percent_on_used = 0;
    for (int i = 0; i < n.gpus && wanted > 0; ++i) {
        const int free = n.gpu_free[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
        if (free >= r.milli_per_gpu) {
            --wanted;
            fresh_used += free == kMilliPerGpu ? 1 : 0;
            free_percent_on_used += std::int64_t{free} * 100 / kMilliPerGpu;
        }
    }
    if (fresh_used > 0) {
        return std::max<std::int64_t>(kMaxScore / 2 - fresh_used, kMaxScore / 3);
    }
    return std::max<std::int64_t>(kMaxScore - free_percent_on_used / 10, kMaxScore / 2);
}

// BestFit: the least CPU and GPU left over after placing, equally weighted.
// What the node has left after placing, as half its CPU and half its GPUs over the largest
// node's: 0 for a node filled exactly.
double left_over(const PackNode& n, const PackRequest& r) {
    return static_cast<double>(n.cpu_milli_free - r.cpu_milli) / kSpecCpuMilli * 0.5 +
           static_cast<double>(n.gpu_free_total() - r.total_gpu_milli()) / kSpecGpuMilli * 0.5;
}

std::int64_t score_bestfit(const PackNode& n, const PackRequest& r, const PackContext&) {
    return static_cast<std::int64_t>((1.0 - left_over(n, r)) * static_cast<double>(kMaxScore));
}

PackNode after_cpu(const PackNode& n, const PackRequest& r) {
    PackNode next = n;
    next.cpu_milli_free -= r.cpu_milli;
    next.mem_free -= r.mem_mib;
    return next;
}

// The node after a request that takes whole GPUs (or none): which fully free GPUs it takes does
// not change the node's fragmentation.
PackNode after_whole(const PackNode& n, const PackRequest& r) {
    PackNode next = after_cpu(n, r);
    for (int g : exclusive_gpus(n, r)) {
        next.gpu_free[static_cast<std::size_t>(g)] -= r.milli_per_gpu;
    }
    return next;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::int64_t fgd_points(double before, double after) {
    return static_cast<std::int64_t>(sigmoid((before - after) / 1000.0) *
                                     static_cast<double>(kMaxScore));
}

// For a share: the GPU whose use grows the node's fragmentation least, with the growth. FGD
// compares growths as its 0..100 points and takes the lowest-numbered GPU on a tie; `exact`
// compares the growths themselves and takes the GPU with least free share on a tie. GPUs with the
// same free share are the same choice.
std::pair<int, double> least_fragmenting_gpu(const PackNode& n, const PackRequest& r,
                                             std::span<const TypicalShape> typical,
                                             bool exact = false) {
    const double before = fragment_milli(n, typical);
    int best = -1;
    double best_growth = 0;
    std::array<int, kMaxPackGpusPerNode> tried{};
    int tried_count = 0;
    for (int g = 0; g < n.gpus; ++g) {
        const int free = n.gpu_free[static_cast<std::size_t>(g)];
        if (free < r.milli_per_gpu ||
            std::find(tried.begin(), tried.begin() + tried_count, free) !=
                tried.begin() + tried_count) {
            continue;
        }
        tried[static_cast<std::size_t>(tried_count++)] = free;
        PackNode next = after_cpu(n, r);
        next.gpu_free[static_cast<std::size_t>(g)] -= r.milli_per_gpu;
        const double growth = fragment_milli(next, typical) - before;
        const bool better =
            best < 0 ||
            (exact ? growth < best_growth ||
                         (growth == best_growth &&
                          free < n.gpu_free[static_cast<std::size_t>(best)])
                   : fgd_points(0, growth) > fgd_points(0, best_growth));
        if (better) {
            best = g;
            best_growth = growth;
        }
    }
    return {best, best_growth};
}

// FGD: the node (and GPU) whose fragmentation grows least, through a sigmoid onto 0..100.
std::int64_t score_fgd(const PackNode& n, const PackRequest& r, const PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return fgd_points(0, least_fragmenting_gpu(n, r, ctx.typical).second);
    }
    return fgd_points(fragment_milli(n, ctx.typical),
                      fragment_milli(after_whole(n, r), ctx.typical));
}

// carma: FGD's measure, with what FGD leaves to chance decided by fit. Growths within one of
// FGD's points (about 40 thousandths of a GPU) still tie, which keeps FGD's habit of filling the
// same nodes first; among them the tighter fit wins (least CPU and GPU left, as bestfit), where
// FGD takes the node first in its random order. A share goes to the GPU that fragments least,
// compared exactly, and on a tie to the one with least room.
constexpr std::int64_t kFitResolution = std::int64_t{1} << 20;

std::int64_t carma_score(double growth, const PackNode& n, const PackRequest& r) {
    const auto fit = static_cast<std::int64_t>(
        std::clamp(1.0 - left_over(n, r) / 2.0, 0.0, 1.0) * static_cast<double>(kFitResolution - 1));
    return fgd_points(0, growth) * kFitResolution + fit;
}

std::int64_t score_carma(const PackNode& n, const PackRequest& r, const PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return carma_score(least_fragmenting_gpu(n, r, ctx.typical, true).second, n, r);
    }
    const double growth = fragment_milli(after_whole(n, r), ctx.typical) -
                          fragment_milli(n, ctx.typical);
    return carma_score(growth, n, r);
}

// ---- GPU choice ----

std::vector<int> gpus_best_fit(const PackNode& n, const PackRequest& r, PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return {share_gpu(n, r, GpuChoice::best_fit, *ctx.rng)};
    }
    return exclusive_gpus(n, r);
}

std::vector<int> gpus_random(const PackNode& n, const PackRequest& r, PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return {share_gpu(n, r, GpuChoice::random, *ctx.rng)};
    }
    return exclusive_gpus(n, r);
}

std::vector<int> gpus_fgd(const PackNode& n, const PackRequest& r, PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return {least_fragmenting_gpu(n, r, ctx.typical).first};
    }
    return exclusive_gpus(n, r);
}

std::vector<int> gpus_carma(const PackNode& n, const PackRequest& r, PackContext& ctx) {
    if (r.shares_a_gpu()) {
        return {least_fragmenting_gpu(n, r, ctx.typical, true).first};
    }
    return exclusive_gpus(n, r);
}

std::vector<PackPolicy> registry() {
    return {
        {"random", "any node the request fits, uniformly; a random GPU for a share",
         score_none, gpus_random, false, true, false},
        {"dotprod", "least alignment of request and free (CPU, GPU), Tetris-style",
         score_dotprod, gpus_best_fit, false, false, true},
        {"clustering", "GPU requests of one shape together on the same nodes",
         score_clustering, gpus_best_fit, false, false, true},
        {"packing", "partly used GPUs, then partly used nodes, then empty ones",
         score_packing, gpus_best_fit, false, false, true},
        {"bestfit", "least CPU and GPU left over after placing",
         score_bestfit, gpus_best_fit, true, false, true},
        {"fgd", "least growth of fragmentation against the typical requests (FGD, ATC '23)",
         score_fgd, gpus_fgd, false, false, true},
        {"carma", "fgd's measure, its ties to the tighter fit and shares to the exact best GPU",
         score_carma, gpus_carma, false, false, true},
        {"carma-risk", "carma, with no share added to a GPU whose shares reach 80 % (risk filter)",
         score_carma, gpus_carma, false, false, true, kBusyShareMilli},
    };
}

}  // namespace

Result<PackPolicy> find_pack_policy(std::string_view name) {
    for (PackPolicy& p : registry()) {
        if (p.name == name) {
            return p;
        }
    }
    std::string known;
    for (const std::string& n : pack_policy_names()) {
        known += (known.empty() ? "" : ", ") + n;
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("unknown cluster packing policy '{}'; use one of {}", name, known));
}

std::vector<std::string> pack_policy_names() {
    std::vector<std::string> names;
    for (const PackPolicy& p : registry()) {
        names.push_back(p.name);
    }
    return names;
}

PackScoreCache::PackScoreCache(std::size_t nodes, int kinds)
    : kinds_(std::max(kinds, 1)),
      version_plus_one_(nodes * static_cast<std::size_t>(kinds_), 0),
      score_(nodes * static_cast<std::size_t>(kinds_), 0) {}

bool PackScoreCache::lookup(std::size_t node, int kind, std::uint32_t version,
                            std::int64_t& score) const {
    if (kind < 0 || kind >= kinds_) {
        return false;
    }
    const std::size_t at = node * static_cast<std::size_t>(kinds_) + static_cast<std::size_t>(kind);
    if (version_plus_one_[at] != version + 1) {
        return false;
    }
    score = score_[at];
    return true;
}

void PackScoreCache::store(std::size_t node, int kind, std::uint32_t version,
                           std::int64_t score) {
    if (kind < 0 || kind >= kinds_) {
        return;
    }
    const std::size_t at = node * static_cast<std::size_t>(kinds_) + static_cast<std::size_t>(kind);
    version_plus_one_[at] = version + 1;
    score_[at] = score;
}

namespace {

// The node as a share sees it under the risk filter: busy GPUs have no room.
const PackNode& as_share_sees(const PackNode& node, const PackRequest& r, int busy_milli,
                              PackNode& scratch) {
    if (busy_milli <= 0 || !r.shares_a_gpu()) {
        return node;
    }
    bool busy = false;
    for (int g = 0; g < node.gpus; ++g) {
        busy = busy || kMilliPerGpu - node.gpu_free[static_cast<std::size_t>(g)] >= busy_milli;
    }
    if (!busy) {
        return node;
    }
    scratch = node;
    for (int g = 0; g < node.gpus; ++g) {
        auto& free = scratch.gpu_free[static_cast<std::size_t>(g)];
        if (kMilliPerGpu - free >= busy_milli) {
            free = 0;
        }
    }
    return scratch;
}

}  // namespace

PackPlacement choose_placement(std::span<const PackNode> nodes, const PackRequest& request,
                               const PackPolicy& policy, PackContext& ctx, PackScoreCache* cache) {
    std::vector<std::pair<std::size_t, std::int64_t>> fitting;
    PackNode scratch;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const PackNode& node = as_share_sees(nodes[i], request, policy.busy_milli, scratch);
        if (!pack_fits(node, request)) {
            continue;
        }
        std::int64_t s = 0;
        if (!policy.random_node) {
            const bool use_cache = cache != nullptr && policy.cacheable;
            if (!use_cache || !cache->lookup(i, request.kind, nodes[i].version, s)) {
                s = policy.score(node, request, ctx);
                if (use_cache) {
                    cache->store(i, request.kind, nodes[i].version, s);
                }
            }
        }
        fitting.emplace_back(i, s);
    }
    PackPlacement out;
    if (fitting.empty()) {
        return out;
    }
    if (policy.normalize) {
        std::int64_t lo = fitting.front().second;
        std::int64_t hi = lo;
        for (const auto& f : fitting) {
            lo = std::min(lo, f.second);
            hi = std::max(hi, f.second);
        }
        for (auto& f : fitting) {
            f.second = hi == lo ? 0 : (f.second - lo) * kMaxScore / (hi - lo);
        }
    }
    if (policy.random_node) {
        out.node = static_cast<int>(fitting[uniform_below(*ctx.rng, fitting.size())].first);
        out.gpus = policy.gpus(
            as_share_sees(nodes[static_cast<std::size_t>(out.node)], request, policy.busy_milli,
                          scratch),
            request, ctx);
        return out;
    }
    // The best score; a tie goes to the lower rank, or without ranks to a uniform draw
    // (reservoir sampling over the fitting nodes in order).
    const bool ranked = ctx.tie_rank.size() == nodes.size();
    std::int64_t best = 0;
    std::uint64_t ties = 0;
    for (const auto& [index, s] : fitting) {
        if (ties == 0 || s > best) {
            best = s;
            ties = 1;
            out.node = static_cast<int>(index);
        } else if (s == best) {
            ++ties;
            const bool wins =
                ranked ? ctx.tie_rank[index] < ctx.tie_rank[static_cast<std::size_t>(out.node)]
                       : uniform_below(*ctx.rng, ties) == 0;
            if (wins) {
                out.node = static_cast<int>(index);
            }
        }
    }
    out.gpus = policy.gpus(
        as_share_sees(nodes[static_cast<std::size_t>(out.node)], request, policy.busy_milli,
                      scratch),
        request, ctx);
    return out;
}

}  // namespace carma
