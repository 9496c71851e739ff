#include "core/policy.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/gpu_clauses.h"
#include "core/agent_user.h"
#include "core/gpu_share.h"
#include "core/mps_share.h"
#include "core/text.h"

namespace carma {

namespace {

struct KnowledgeName {
    const char* canonical;
    std::vector<const char*> aliases;
    MemoryKnowledge knowledge;
};

struct ScoreName {
    const char* canonical;
    std::vector<const char*> aliases;
    Score score;
};

const std::vector<KnowledgeName>& knowledge_names() {
    static const std::vector<KnowledgeName> names = {
        {"oracle", {"oracle", "profiled"}, MemoryKnowledge::Oracle},
        {"OR", {"or", "only-recovery", "none", "nomem"}, MemoryKnowledge::None},
        {"EST", {"est", "estimate", "estimator"}, MemoryKnowledge::Estimate},
    };
    return names;
}

const std::vector<ScoreName>& score_names() {
    static const std::vector<ScoreName> names = {
        {"FF", {"ff", "first-fit", "firstfit"}, Score::FirstFit},
        {"BF", {"bf", "best-fit", "bestfit"}, Score::BestFit},
        {"MAGM",
         {"magm", "most-available-memory", "most-available-gpu-memory", "most-gmem-available"},
         Score::MostAvailableMemory},
        {"LUG", {"lug", "least-utilised", "least-utilized", "least-utilised-gpu",
                 "least-utilized-gpu"},
         Score::LeastUtilised},
        {"RR", {"rr", "round-robin", "roundrobin"}, Score::RoundRobin},
    };
    return names;
}

PolicySpec make_spec(const KnowledgeName& k, const ScoreName& s, bool risk_filter) {
    PolicySpec p;
    p.collocate = true;
    p.knowledge = k.knowledge;
    p.score = s.score;
    // Round robin never looks at utilisation (spec §2.2, OR-RR).
    p.risk_filter = risk_filter && s.score != Score::RoundRobin;
    p.name = std::string(k.canonical) + "-" + s.canonical;
    if (!risk_filter && s.score != Score::RoundRobin) {
        p.name += "-norisk";
    }
    return p;
}

}  // namespace

std::string_view to_string(Score s) {
    switch (s) {
        case Score::FirstFit: return "first-fit";
        case Score::BestFit: return "best-fit";
        case Score::MostAvailableMemory: return "most-available-memory";
        case Score::LeastUtilised: return "least-utilised";
        case Score::RoundRobin: return "round-robin";
        case Score::LeastSlowdown: return "least-slowdown";
    }
    return "?";
}

namespace {

// "carma" and its ablations: each suffix changes one ingredient, in any order, each at most once
// (-fifo and -longfirst both change the order, so they exclude each other).
std::optional<PolicySpec> carma_policy(const std::string& name) {
    if (name != "carma" && !name.starts_with("carma-")) {
        return std::nullopt;
    }
    PolicySpec p;
    p.name = "carma";
    p.collocate = true;
    p.knowledge = MemoryKnowledge::Learned;
    p.score = Score::LeastSlowdown;
    p.risk_filter = false;  // the predicted gain decides instead (CarmaConfig::min_gain)
    p.carma = true;
    p.backfill = true;
    p.order = RunTimeOrder::ShortestFirst;
    std::string rest = name.substr(5);
    while (!rest.empty()) {
        bool matched = false;
        for (std::string_view suffix : {"-nobackfill", "-fifo", "-longfirst", "-magm", "-risk"}) {
            if (!rest.starts_with(suffix)) {
                continue;
            }
            const bool reorders = suffix == "-fifo" || suffix == "-longfirst";
            if (p.name.find(suffix) != std::string::npos ||
                (reorders && p.order != RunTimeOrder::ShortestFirst)) {
                return std::nullopt;  // each ingredient at most once
            }
            if (suffix == "-nobackfill") {
                p.backfill = false;
            } else if (suffix == "-fifo") {
                p.order = RunTimeOrder::Arrival;
            } else if (suffix == "-longfirst") {
                p.order = RunTimeOrder::LongestFirst;
            } else if (suffix == "-magm") {
                p.score = Score::MostAvailableMemory;
            } else {
                p.risk_filter = true;
            }
            p.name += suffix;
            rest = rest.substr(suffix.size());
            matched = true;
            break;
        }
        if (!matched) {
            return std::nullopt;
        }
    }
    return p;
}

}  // namespace

Result<PolicySpec> find_policy(std::string_view raw) {
    std::string name = to_lower(raw);
    if (auto carma = carma_policy(name)) {
        return *carma;
    }
    if (name == "exclusive") {
        return PolicySpec{"exclusive", false, MemoryKnowledge::None, Score::FirstFit, false};
    }
    bool risk = true;
    for (const char* suffix : {"-norisk", "-no-risk"}) {
        const std::string sfx = suffix;
        if (name.size() > sfx.size() && name.ends_with(sfx)) {
            name.resize(name.size() - sfx.size());
            risk = false;
        }
    }
    // Bare score names are the [OLD] v1 spellings: round-robin had no memory information.
    for (const ScoreName& s : score_names()) {
        for (const char* alias : s.aliases) {
            if (name == alias && s.score == Score::RoundRobin) {
                return make_spec(knowledge_names()[1], s, risk);
            }
        }
    }
    for (const KnowledgeName& k : knowledge_names()) {
        for (const char* kalias : k.aliases) {
            const std::string prefix = std::string(kalias) + "-";
            if (!name.starts_with(prefix)) {
                continue;
            }
            const std::string rest = name.substr(prefix.size());
            for (const ScoreName& s : score_names()) {
                for (const char* salias : s.aliases) {
                    if (rest == salias) {
                        return make_spec(k, s, risk);
                    }
                }
            }
        }
    }
    return fail(ErrorCode::NotFound,
                fmt::format("unknown policy '{}'; known: "
                            "carma[-nobackfill][-fifo|-longfirst][-magm][-risk], "
                            "exclusive and <oracle|OR|EST>-<FF|BF|MAGM|LUG|RR>[-norisk], e.g. "
                            "oracle-MAGM, OR-RR, EST-LUG, or 'all'",
                            raw));
}

std::vector<std::string> paper_policy_names() {
    return {"exclusive", "oracle-FF", "oracle-BF", "oracle-MAGM", "oracle-LUG",
            "OR-RR",     "OR-MAGM",   "OR-LUG",    "EST-MAGM",    "EST-LUG"};
}

std::vector<std::string> registered_policy_names() {
    std::vector<std::string> out = {"carma", "exclusive"};
    for (const KnowledgeName& k : knowledge_names()) {
        for (const ScoreName& s : score_names()) {
            out.push_back(std::string(k.canonical) + "-" + s.canonical);
        }
    }
    return out;
}

FilterOutcome filter_gpu(const PolicySpec& policy, const GpuView& gpu,
                         const MemoryRequirement& requirement, const RiskThresholds& risk) {
    if (!gpu.schedulable) {
        return FilterOutcome::Unschedulable;
    }
    if (gpu.locked) {
        return FilterOutcome::WarmingUp;
    }
    if (holds_task_alone(gpu, policy.carma)) {
        return FilterOutcome::HeldAlone;
    }
    const bool screens_memory =
        !(policy.score == Score::RoundRobin && policy.knowledge == MemoryKnowledge::None);
    if (screens_memory && gpu.stats.available_mib < requirement.min_available_mib) {
        return FilterOutcome::NotEnoughMemory;
    }
    if (policy.risk_filter && is_high_risk(gpu.stats, risk, gpu.has_processes)) {
        return FilterOutcome::HighRisk;
    }
    return FilterOutcome::Pass;
}

std::string explain_filter(FilterOutcome outcome, const GpuView& gpu,
                           const MemoryRequirement& requirement, const RiskThresholds& risk) {
    switch (outcome) {
        case FilterOutcome::Pass: return {};
        case FilterOutcome::Unschedulable: return gpu.unschedulable_reason;
        case FilterOutcome::WarmingUp:
            return "warming up (a task placed there has not settled yet)";
        case FilterOutcome::HeldAlone:
            return "a task there runs exclusive (--exclusive, or --max-slowdown under a policy "
                   "that predicts no slowdown)";
        case FilterOutcome::NotEnoughMemory:
            return fmt::format("{} available < {} ({})", format_mib(gpu.stats.available_mib),
                               format_mib(requirement.min_available_mib), requirement.basis);
        case FilterOutcome::HighRisk:
            return "high collocation risk: " + describe_risk(gpu.stats, risk);
    }
    return {};
}

bool holds_task_alone(const GpuView& gpu, bool predicts_slowdown) {
    return std::any_of(gpu.residents.begin(), gpu.residents.end(), [&](const ResidentView& r) {
        return r.exclusive || (r.max_slowdown.has_value() && !predicts_slowdown);
    });
}

bool spans_nodes(std::span<const GpuView> gpus) {
    return std::any_of(gpus.begin(), gpus.end(),
                       [&](const GpuView& g) { return g.node != gpus.front().node; });
}

Selection select_gpus(const PolicySpec& policy, const TaskSpec& task,
                      std::span<const GpuView> gpus, const PlacementConfig& config,
                      std::size_t rr_cursor) {
    Selection sel;
    sel.rr_cursor = rr_cursor;
    const auto wanted = static_cast<std::size_t>(std::max(task.gpus, 1));
    const MemoryRequirement requirement =
        memory_requirement(task, policy.knowledge, config.memory);

    std::vector<const GpuView*> passing;
    GpuClauses rejections;
    auto consider = [&](const GpuView& g) {
        if (!agent_admits(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, *agent_refusal(task, g));
            }
            return;
        }
        if (mps_user_blocks(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, explain_mps_user(task, g));
            }
            return;
        }
        if (share_blocks(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, *share_refusal(task, g));
            }
            return;
        }
        const FilterOutcome outcome = filter_gpu(policy, g, requirement, config.risk);
        if (outcome == FilterOutcome::Pass) {
            passing.push_back(&g);
        } else if (config.explain) {
            rejections.add(g.index, g.node, explain_filter(outcome, g, requirement, config.risk));
        }
    };
    auto any = [](std::size_t) { return true; };
    auto node_of = [&](std::size_t k) -> const std::string& { return passing[k]->node; };
    auto take = [&](std::size_t k) { sel.gpus.push_back(passing[k]->index); };
    NodePick pick;

    if (policy.score == Score::RoundRobin) {
        // One pass of the global cursor at most, taking GPUs that pass, until one node has enough.
        const std::size_t n = gpus.size();
        std::size_t cursor = rr_cursor;
        for (std::size_t step = 0; step < n && !pick.found; ++step) {
            consider(gpus[cursor % n]);
            cursor = (cursor + 1) % n;
            if (passing.size() >= wanted) {
                pick = pick_on_one_node(passing.size(), wanted, any, node_of, take);
            }
        }
        if (pick.found) {
            sel.rr_cursor = cursor;
            return sel;
        }
    } else {
        for (const GpuView& g : gpus) {
            consider(g);
        }
        auto by = [&](auto key) {
            std::stable_sort(passing.begin(), passing.end(),
                             [&](const GpuView* a, const GpuView* b) { return key(*a) < key(*b); });
        };
        switch (policy.score) {
            case Score::FirstFit: break;
            case Score::BestFit:
                by([](const GpuView& g) { return static_cast<double>(g.stats.available_mib); });
                break;
            case Score::MostAvailableMemory:
                by([](const GpuView& g) { return -static_cast<double>(g.stats.available_mib); });
                break;
            case Score::LeastUtilised:
                // SM activity where known, else the utilisation rate; a GPU with neither is
                // idle here (the blind risk rule keeps busy ones out) and sorts first.
                by([](const GpuView& g) {
                    const SeriesStats& busy =
                        g.stats.smact.known > 0 ? g.stats.smact : g.stats.util;
                    return g.stats.order_statistics ? busy.risk : busy.mean;
                });
                break;
            case Score::RoundRobin: break;
            case Score::LeastSlowdown: break;  // carma's own path (core/carma.h) scores this
        }
        pick = pick_on_one_node(passing.size(), wanted, any, node_of, take);
        if (pick.found) {
            return sel;
        }
    }
    if (!config.explain) {
        sel.pending_reason = "no placement";
        return sel;
    }
    const std::string joined = rejections.text();
    if (passing.size() >= wanted) {
        // Enough GPUs pass, but spread over nodes.
        sel.pending_reason = fmt::format(
            "{} needs {} GPU(s) on one node, {} pass {} but at most {} on one node{}{}", task.name,
            wanted, passing.size(), policy.name, pick.most_on_one_node,
            joined.empty() ? "" : ": ", joined);
        return sel;
    }
    sel.pending_reason = fmt::format("{} needs {} GPU(s), {} pass {}: {}", task.name, wanted,
                                     passing.size(), policy.name,
                                     joined.empty() ? "not enough GPUs" : joined);
    return sel;
}

}  // namespace carma
