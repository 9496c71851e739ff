#include "core/carma.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "core/gpu_clauses.h"
#include "core/agent_user.h"
#include "core/gpu_share.h"
#include "core/mps_share.h"

namespace carma {

namespace {

// The learned activities of a GPU's tasks, in order, each handed to `take`. A GPU whose caller
// lists no residents but shows processes counts as one task as busy as its measured SM activity.
template <typename Take>
void for_each_activity(const GpuView& gpu, Take take) {
    if (gpu.residents.empty()) {
        if (gpu.has_processes) {
            take(gpu.stats.smact.known > 0 ? gpu.stats.smact.mean : gpu.stats.util.mean);
        }
        return;
    }
    for (const ResidentView& r : gpu.residents) {
        take(r.activity);
    }
    if (gpu.foreign_activity) {
        take(*gpu.foreign_activity);  // processes CARMA did not start compete too
    }
}

// Bit-for-bit equality: the cache must answer exactly what the predictor would.
bool same_bits(double a, double b) {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool gpu_idle(const GpuView& g) {
    return g.schedulable && !g.has_processes && !g.locked && g.residents.empty();
}

// Foreign memory is taken: a plan that counts only the residents' needs would put a task into
// memory another user's process holds.
MiB usable_mib(const GpuView& g) {
    return std::max<MiB>(0, g.total_mib - kFreeMemoryReserveMiB - g.foreign_mib);
}

double activity_of(const TaskSpec& task) { return task.learned.activity.value_or(0.6); }

// Whether a slowdown bound applies to placing `task` on `gpu`: its own or a resident's.
bool bounds_slowdown(const TaskSpec& task, const GpuView& gpu) {
    return task.max_slowdown.has_value() ||
           std::any_of(gpu.residents.begin(), gpu.residents.end(),
                       [](const ResidentView& r) { return r.max_slowdown.has_value(); });
}

// Which bound the predicted speeds with the newcomer (last) would break, in words; nothing when
// none. Slowdown = 1 / speed.
std::optional<std::string> slowdown_bound_broken(const TaskSpec& task, const GpuView& gpu,
                                                 std::span<const double> after) {
    const double own = 1.0 / std::max(after.back(), 1e-9);
    if (task.max_slowdown && own > *task.max_slowdown) {
        return fmt::format("{}'s predicted slowdown {:.2f} > its --max-slowdown {:g}", task.name,
                           own, *task.max_slowdown);
    }
    // after[j] is resident j's (unlisted processes come with no residents, hence no bound).
    const std::size_t listed = std::min(gpu.residents.size(), after.size() - 1);
    for (std::size_t j = 0; j < listed; ++j) {
        const ResidentView& r = gpu.residents[j];
        const double slowdown = 1.0 / std::max(after[j], 1e-9);
        if (r.max_slowdown && slowdown > *r.max_slowdown) {
            return fmt::format("task {}'s predicted slowdown would be {:.2f} > its --max-slowdown "
                               "{:g}",
                               r.task, slowdown, *r.max_slowdown);
        }
    }
    return std::nullopt;
}

}  // namespace

CarmaNeed carma_need(const TaskSpec& task, bool recovered, const PlacementConfig& config) {
    const Learned& l = task.learned;
    CarmaNeed out;
    if (recovered) {
        out.idle_only = true;
        out.basis = CarmaNeed::Basis::Recovered;
    } else if (task.exclusive) {
        out.idle_only = true;
        out.basis = CarmaNeed::Basis::Exclusive;
    } else if (l.need_mib) {
        out.need_mib = std::max(*l.need_mib, l.lower_bound_mib);
        out.margin_mib = l.margin_mib;
        out.min_available_mib = out.need_mib + out.margin_mib;
    } else if (config.memory_limits) {
        // Its memory limit protects the co-runners; the floor gives it a chance to run.
        out.basis = CarmaNeed::Basis::UnknownLimited;
        out.min_available_mib = std::max(config.memory.no_info_min_free_mib, l.lower_bound_mib);
    } else {
        out.idle_only = true;
        out.basis = CarmaNeed::Basis::Unknown;
    }
    return out;
}

std::string describe(const CarmaNeed& need) {
    switch (need.basis) {
        case CarmaNeed::Basis::Learned:
            return fmt::format("learned {} + {} margin", format_mib(need.need_mib),
                               format_mib(need.margin_mib));
        case CarmaNeed::Basis::Recovered: return "recovered from out-of-memory: runs alone";
        case CarmaNeed::Basis::Exclusive: return "exclusive: runs alone";
        case CarmaNeed::Basis::UnknownLimited:
            return fmt::format("memory need unknown, limited per task: {} free required",
                               format_mib(need.min_available_mib));
        case CarmaNeed::Basis::Unknown:
            return "memory need unknown: only an idle GPU cannot crash a co-runner";
    }
    return {};
}

std::string no_room_text(const CarmaNeed& need) {
    // A task that runs alone asks no memory of a busy GPU: "0 MiB available" would be false.
    if (need.idle_only) {
        return "no GPU is idle";
    }
    return fmt::format("no GPU has {} available", format_mib(need.min_available_mib));
}

MiB planned_available_mib(const GpuView& gpu) {
    if (gpu.residents.empty()) {
        return gpu.stats.available_mib;
    }
    MiB committed = 0;
    for (const ResidentView& r : gpu.residents) {
        committed += r.need_mib ? *r.need_mib : gpu.total_mib;
    }
    return std::max<MiB>(0, std::min(gpu.stats.available_mib, usable_mib(gpu) - committed));
}

void GpuPredictions::clear() {
    base_known_ = false;
    entries_.clear();
    after_.clear();
    std::fill(slots_.begin(), slots_.end(), 0);
}

namespace {

std::size_t slot_of(std::uint64_t bits, std::size_t slots) {
    // Fibonacci hashing: the top bits of the product, as many as the table has.
    const auto shift = static_cast<unsigned>(64 - std::countr_zero(slots));
    return static_cast<std::size_t>((bits * 0x9E3779B97F4A7C15ULL) >> shift);
}

}  // namespace

const GpuPredictions::Entry* GpuPredictions::find(std::uint64_t activity) const {
    if (slots_.empty()) {
        return nullptr;
    }
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = slot_of(activity, slots_.size());; s = (s + 1) & mask) {
        if (slots_[s] == 0) {
            return nullptr;
        }
        const Entry& e = entries_[slots_[s] - 1];
        if (e.activity == activity) {
            return &e;
        }
    }
}

void GpuPredictions::index(std::size_t entry) {
    auto place = [this](std::size_t k) {
        const std::size_t mask = slots_.size() - 1;
        std::size_t s = slot_of(entries_[k].activity, slots_.size());
        while (slots_[s] != 0) {
            s = (s + 1) & mask;
        }
        slots_[s] = static_cast<std::uint32_t>(k + 1);
    };
    if (2 * entries_.size() > slots_.size()) {
        slots_.assign(std::max<std::size_t>(16, 2 * slots_.size()), 0);
        for (std::size_t k = 0; k < entry; ++k) {
            place(k);
        }
    }
    place(entry);
}

GpuPredictions::Joined GpuPredictions::joined(const GpuView& gpu, double activity,
                                              const SpeedPredictor& predict) {
    // Checked, not trusted: a GPU whose tasks changed since the cache was filled starts afresh.
    // (Compared in place: this runs for every task examined on every GPU.)
    if (base_known_) {
        std::size_t k = 0;
        bool same = true;
        for_each_activity(gpu, [&](double a) {
            same = same && k < activities_.size() && same_bits(a, activities_[k]);
            ++k;
        });
        if (!same || k != activities_.size()) {
            clear();
        }
    }
    if (!base_known_) {
        activities_.clear();
        for_each_activity(gpu, [&](double a) { activities_.push_back(a); });
    }
    const std::size_t n = activities_.size();
    if (!base_known_) {
        before_.assign(n, 1.0);
        before_slowdown_ = 0;
        before_speed_ = 0;
        if (predict && n > 0) {
            predict(activities_, before_);
            for (std::size_t i = 0; i < n; ++i) {
                before_slowdown_ += 1.0 / std::max(before_[i], 1e-9);
                before_speed_ += before_[i];
            }
        }
        base_known_ = true;
    }
    const auto bits = std::bit_cast<std::uint64_t>(activity);
    if (const Entry* e = find(bits)) {
        return {e->sharing, before_, std::span<const double>(after_).subspan(e->at, n + 1)};
    }
    Entry e;
    e.activity = bits;
    e.at = after_.size();
    after_.resize(after_.size() + n + 1, 1.0);
    const std::span<double> after = std::span<double>(after_).subspan(e.at, n + 1);
    if (predict) {
        activities_.push_back(activity);
        predict(activities_, after);
        activities_.pop_back();
        double slowdown = 0;
        double speed = 0;
        for (const double v : after) {
            slowdown += 1.0 / std::max(v, 1e-9);
            speed += v;
        }
        e.sharing = {slowdown - before_slowdown_ - 1.0, speed - before_speed_};
    }
    entries_.push_back(e);
    index(entries_.size() - 1);
    return {e.sharing, before_, after};
}

SharingPrediction predict_sharing(const GpuView& gpu, double activity,
                                  const SpeedPredictor& predict, GpuPredictions* cache) {
    if (!predict) {
        return {};
    }
    if (cache) {
        return cache->joined(gpu, activity, predict).sharing;
    }
    GpuPredictions local;
    return local.joined(gpu, activity, predict).sharing;
}

FilterOutcome carma_gpu_open(const PolicySpec& policy, const GpuView& gpu,
                             const RiskThresholds& risk) {
    if (!gpu.schedulable) {
        return FilterOutcome::Unschedulable;
    }
    if (gpu.locked) {
        return FilterOutcome::WarmingUp;
    }
    if (holds_task_alone(gpu, true)) {
        return FilterOutcome::HeldAlone;
    }
    if (policy.risk_filter && is_high_risk(gpu.stats, risk, gpu.has_processes)) {
        return FilterOutcome::HighRisk;
    }
    return FilterOutcome::Pass;
}

Selection carma_select(const PolicySpec& policy, const TaskSpec& task, const CarmaNeed& need,
                       std::span<const GpuView> gpus, std::span<const char> open,
                       std::span<const char> allowed, const PlacementConfig& config,
                       const CarmaConfig& carma,
                       std::span<GpuPredictions> predictions,
                       std::span<const MiB> available_mib) {
    Selection sel;
    const auto wanted = static_cast<std::size_t>(std::max(task.gpus, 1));

    // Exclusive path: idle GPUs in index order, all on one node.
    auto node_at = [&](std::size_t i) -> const std::string& { return gpus[i].node; };
    const NodePick idle = pick_on_one_node(
        gpus.size(), wanted,
        [&](std::size_t i) {
            return allowed[i] && gpu_idle(gpus[i]) && agent_admits(task, gpus[i]);
        },
        node_at, [&](std::size_t i) { sel.gpus.push_back(gpus[i].index); });
    if (idle.found) {
        sel.exclusive = true;
        return sel;
    }
    if (need.idle_only) {
        if (config.explain) {
            sel.pending_reason =
                fmt::format("{} waits for {} idle GPU(s){} ({}){}", task.name, wanted,
                            wanted > 1 && spans_nodes(gpus) ? " on one node" : "",
                            describe(need), idle_gpus_refused_by_agents(task, gpus));
        } else {
            sel.pending_reason = "waits for idle GPUs";
        }
        return sel;
    }

    // Not zeroed (this runs for every task examined): only the first `count` are read.
    struct Candidate {
        long tier;      // quantised added slowdown (or -available for -magm)
        MiB leftover;   // available after placement
        std::size_t pos;
    };
    std::array<Candidate, 64> fixed;
    std::vector<Candidate> spill;
    std::size_t count = 0;
    GpuClauses rejections;
    const double activity = activity_of(task);
    std::vector<double> cautious, cautious_speeds;  // a bounded placement's activities, speeds
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        const GpuView& g = gpus[i];
        if (!agent_admits(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, *agent_refusal(task, g));
            }
            continue;
        }
        if (!allowed[i]) {
            if (config.explain) {
                rejections.add(g.index, g.node, "kept for a task ahead in the queue");
            }
            continue;
        }
        if (!open[i]) {
            if (config.explain) {
                const FilterOutcome why = carma_gpu_open(policy, g, config.risk);
                rejections.add(g.index, g.node, explain_filter(why, g, {}, config.risk));
            }
            continue;
        }
        if (mps_user_blocks(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, explain_mps_user(task, g));
            }
            continue;
        }
        if (share_blocks(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node, *share_refusal(task, g));
            }
            continue;
        }
        // Memory first: it is cheap, and it turns most GPUs down in a busy round.
        const MiB available = available_mib.empty() ? planned_available_mib(g) : available_mib[i];
        if (available < need.min_available_mib) {
            if (config.explain) {
                rejections.add(g.index, g.node,
                               fmt::format("{} available < {} ({})", format_mib(available),
                                           format_mib(need.min_available_mib), describe(need)));
            }
            continue;
        }
        const bool shared = !gpu_idle(g);
        SharingPrediction predicted;
        if (shared && bounds_slowdown(task, g)) {
            // A slowdown bound, the newcomer's or a resident's: every task's predicted speed.
            std::optional<GpuPredictions> local;
            GpuPredictions& cache = predictions.empty() ? local.emplace() : predictions[i];
            const GpuPredictions::Joined joined = cache.joined(g, activity, config.predict_speeds);
            predicted = joined.sharing;
            std::span<const double> after = joined.after;
            if (config.predict_cautious_speeds) {
                // Not cached: only bounded tasks and their GPUs come here.
                cautious.clear();
                for_each_activity(g, [&](double a) { cautious.push_back(a); });
                cautious.push_back(activity);
                cautious_speeds.assign(cautious.size(), 1.0);
                config.predict_cautious_speeds(cautious, cautious_speeds);
                after = cautious_speeds;
            }
            if (auto why = slowdown_bound_broken(task, g, after)) {
                if (config.explain) {
                    rejections.add(g.index, g.node, *why);
                }
                continue;
            }
        } else if (shared) {
            predicted = predict_sharing(g, activity, config.predict_speeds,
                                        predictions.empty() ? nullptr : &predictions[i]);
        }
        if (shared && predicted.gain <= carma.min_gain && !shared_by_shares(task, g)) {
            if (config.explain) {
                rejections.add(g.index, g.node,
                               fmt::format("sharing would add {:.2f} GPU of progress (not above "
                                           "{:.2f})",
                                           predicted.gain, carma.min_gain));
            }
            continue;
        }
        Candidate c;
        c.pos = i;
        c.leftover = available - need.min_available_mib;
        if (policy.score == Score::MostAvailableMemory) {
            c.tier = -static_cast<long>(available);
            c.leftover = 0;
        } else {
            c.tier = static_cast<long>(
                std::floor(std::max(0.0, predicted.added_slowdown) / kSlowdownTie));
        }
        if (count < fixed.size()) {
            fixed[count] = c;
        } else {
            if (spill.empty()) {
                spill.assign(fixed.begin(), fixed.end());
            }
            spill.push_back(c);
        }
        ++count;
    }
    if (count >= wanted) {
        std::span<Candidate> cands = spill.empty() ? std::span<Candidate>(fixed.data(), count)
                                                   : std::span<Candidate>(spill);
        std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
            if (a.tier != b.tier) {
                return a.tier < b.tier;
            }
            if (a.leftover != b.leftover) {
                return a.leftover < b.leftover;
            }
            return a.pos < b.pos;
        });
        const NodePick pick = pick_on_one_node(
            cands.size(), wanted, [](std::size_t) { return true; },
            [&](std::size_t k) -> const std::string& { return gpus[cands[k].pos].node; },
            [&](std::size_t k) { sel.gpus.push_back(gpus[cands[k].pos].index); });
        if (pick.found) {
            return sel;
        }
        if (config.explain) {
            sel.pending_reason = fmt::format(
                "{} needs {} GPU(s) on one node, {} pass {} but at most {} on one node{}{}",
                task.name, wanted, count, policy.name, pick.most_on_one_node,
                rejections.empty() ? "" : ": ", rejections.text());
            return sel;
        }
    }
    if (!config.explain) {
        sel.pending_reason = "no placement";
        return sel;
    }
    sel.pending_reason = fmt::format("{} needs {} GPU(s), {} pass {}: {}", task.name, wanted, count,
                                     policy.name,
                                     rejections.empty() ? "not enough GPUs" : rejections.text());
    return sel;
}

namespace {

// The moment a GPU of this readiness could take the head: "now" is its earliest (after the
// warm-up at most, while warming up).
double ready_at(const HeadReadiness& r, bool locked, double now, double settle_s) {
    const double earliest = locked ? now + settle_s : now;
    switch (r.when) {
        case HeadReadiness::When::Never: return kNeverS;
        case HeadReadiness::When::Now: return earliest;
        case HeadReadiness::When::AfterEnd: return std::max(earliest, std::max(now, r.end));
    }
    return kNeverS;
}

bool same_resident_ends(const ResidentView& a, const ResidentView& b) {
    auto bits = [](const std::optional<double>& v) {
        return v ? std::bit_cast<std::uint64_t>(*v) : std::uint64_t{0};
    };
    return a.task == b.task && a.need_mib == b.need_mib &&
           a.expected_end.has_value() == b.expected_end.has_value() &&
           bits(a.expected_end) == bits(b.expected_end);
}

}  // namespace

HeadReadiness head_readiness(const GpuView& g, bool risky, const CarmaNeed& need) {
    using When = HeadReadiness::When;
    HeadReadiness out;
    if (!g.schedulable) {
        out.unknown = std::numeric_limits<std::size_t>::max();
    } else if (g.residents.empty() && g.has_processes) {
        out.unknown = std::numeric_limits<std::size_t>::max() - 1;
    }
    for (const ResidentView& res : g.residents) {
        out.unknown += res.expected_end ? 0 : 1;
        out.committed += res.need_mib ? *res.need_mib : g.total_mib;
    }
    if (!g.schedulable) {
        return out;
    }
    if (g.residents.empty()) {
        // Processes nobody listed: when they end is unknown.
        out.when = g.has_processes ? When::Never : When::Now;
        return out;
    }
    const MiB usable = usable_mib(g);
    const bool idle_only = need.idle_only || need.min_available_mib > usable;
    MiB committed = out.committed;
    // A GPU that passes memory but not the risk filter needs a resident to end first.
    if (!idle_only && !risky && usable - committed >= need.min_available_mib &&
        g.stats.available_mib >= need.min_available_mib) {
        out.when = When::Now;
        return out;
    }
    // The residents in the order they free their memory: by expected end (unknown last), then
    // task.
    std::vector<const ResidentView*> order;
    order.reserve(g.residents.size());
    for (const ResidentView& r : g.residents) {
        order.push_back(&r);
    }
    std::sort(order.begin(), order.end(), [](const ResidentView* a, const ResidentView* b) {
        const double ea = a->expected_end.value_or(kNeverS);
        const double eb = b->expected_end.value_or(kNeverS);
        return ea != eb ? ea < eb : a->task < b->task;
    });
    for (std::size_t k = 0; k < order.size(); ++k) {
        const ResidentView* r = order[k];
        if (!r->expected_end) {
            return out;  // Never
        }
        committed -= r->need_mib ? *r->need_mib : g.total_mib;
        const bool last = k + 1 == order.size();
        if (last || (!idle_only && usable - committed >= need.min_available_mib)) {
            out.when = When::AfterEnd;
            out.end = *r->expected_end;
            return out;
        }
    }
    return out;
}

const HeadReadiness& HeadReadinessCache::get(const GpuView& g, bool risky,
                                             const CarmaNeed& need) {
    const bool same =
        known_ && schedulable_ == g.schedulable && has_processes_ == g.has_processes &&
        risky_ == risky && idle_only_ == need.idle_only && total_mib_ == g.total_mib &&
        foreign_mib_ == g.foreign_mib && available_mib_ == g.stats.available_mib &&
        min_available_mib_ == need.min_available_mib &&
        std::equal(residents_.begin(), residents_.end(), g.residents.begin(), g.residents.end(),
                   same_resident_ends);
    if (!same) {
        known_ = true;
        schedulable_ = g.schedulable;
        has_processes_ = g.has_processes;
        risky_ = risky;
        idle_only_ = need.idle_only;
        total_mib_ = g.total_mib;
        foreign_mib_ = g.foreign_mib;
        available_mib_ = g.stats.available_mib;
        min_available_mib_ = need.min_available_mib;
        residents_.assign(g.residents.begin(), g.residents.end());
        value_ = head_readiness(g, risky, need);
    }
    return value_;
}

HeadPlan plan_head(const TaskSpec& head, const CarmaNeed& need, std::span<const GpuView> gpus,
                   std::span<const char> open, double now, double settle_s,
                   std::span<HeadReadinessCache> readiness, std::span<const char> taken) {
    HeadPlan plan;
    plan.shadow.assign(gpus.size(), 0);
    const auto wanted = static_cast<std::size_t>(std::max(head.gpus, 1));
    struct Rank {
        double ready = kNeverS;
        std::size_t unknown = 0;
        MiB committed = 0;
        std::size_t pos = 0;
        bool operator<(const Rank& o) const {
            if (ready != o.ready) {
                return ready < o.ready;
            }
            if (unknown != o.unknown) {
                return unknown < o.unknown;
            }
            return committed != o.committed ? committed < o.committed : pos < o.pos;
        }
    };
    std::vector<Rank> ranks;
    ranks.reserve(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        const GpuView& g = gpus[i];
        // A non-root agent's node never starts the head: keeping its GPUs would only delay
        // others, and would take the head's place in the plan from GPUs it can use.
        if ((!taken.empty() && taken[i] != 0) || !agent_admits(head, g)) {
            continue;
        }
        const bool risky = g.schedulable && !g.locked && open[i] == 0;
        const HeadReadiness r =
            readiness.empty() ? head_readiness(g, risky, need) : readiness[i].get(g, risky, need);
        ranks.push_back(Rank{ready_at(r, g.locked, now, settle_s), r.unknown, r.committed, i});
    }
    if (wanted == 1 && !ranks.empty()) {
        // The first in the order is all a one-GPU head takes: the least rank, no sort (the
        // order is total: positions differ).
        const Rank& first = *std::min_element(ranks.begin(), ranks.end());
        plan.shadow[first.pos] = 1;
        plan.start = first.ready;
        return plan;
    }
    std::sort(ranks.begin(), ranks.end());
    // Even when the start cannot be predicted, the head reserves only the n GPUs likeliest to
    // free first (fewest residents of unknown end, least memory held), all on one node: they
    // take nothing that could delay it, so they drain, and the head's wait stays bounded by
    // their residents. The node is the one whose n-th GPU in that order comes first.
    std::size_t nth = 0;
    const NodePick pick = pick_on_one_node(
        ranks.size(), wanted, [](std::size_t) { return true; },
        [&](std::size_t k) -> const std::string& { return gpus[ranks[k].pos].node; },
        [&](std::size_t k) {
            plan.shadow[ranks[k].pos] = 1;
            nth = k;
        });
    if (!pick.found) {
        if (taken.empty()) {
            std::fill(plan.shadow.begin(), plan.shadow.end(), 1);
        }
        return plan;
    }
    plan.start = ranks[nth].ready;
    return plan;
}

bool may_pass_head(const TaskSpec& task, const GpuView& gpu, const HeadPlan& plan,
                   const CarmaNeed& head_need, double now, const SpeedPredictor& predict,
                   GpuPredictions* cache) {
    // Its own memory does not keep the head out: beside it and the residents still running at
    // the head's start (those with a later or unknown end), the head's need still fits. With an
    // unknown start, which residents will have ended is unknown too; the GPU is the head's only
    // once they all have, so only the task itself is counted.
    bool leaves_room = false;
    if (!head_need.idle_only && task.learned.need_mib) {
        MiB staying = 0;
        if (plan.start != kNeverS) {
            for (const ResidentView& r : gpu.residents) {
                if (!r.expected_end || *r.expected_end > plan.start) {
                    staying += r.need_mib ? *r.need_mib : gpu.total_mib;
                }
            }
        }
        const MiB own = std::max(*task.learned.need_mib, task.learned.lower_bound_mib) +
                        task.learned.margin_mib;
        leaves_room = usable_mib(gpu) - staying - own >= head_need.min_available_mib;
    }
    if (plan.start == kNeverS) {
        return leaves_room;  // no predicted start that its slowdown could delay
    }
    std::optional<GpuPredictions> local;  // built only without a cache: this runs per candidate
    const GpuPredictions::Joined joined =
        (cache ? *cache : local.emplace()).joined(gpu, activity_of(task), predict);
    const std::span<const double> before = joined.before;
    const std::span<const double> after = joined.after;
    const std::size_t n = before.size();
    const double end = task.learned.duration_s
                           ? now + *task.learned.duration_s / std::max(after[n], 1e-9)
                           : kNeverS;
    if (end > plan.start && !leaves_room) {
        return false;
    }
    if (gpu.residents.size() != n) {
        return n == 0;  // unlisted processes: their ends are unknown, so any slowdown may delay
    }
    // The slowdown it causes must not push the end of a resident the head waits for past the
    // head's predicted start.
    for (std::size_t j = 0; j < n; ++j) {
        const std::optional<double>& e = gpu.residents[j].expected_end;
        if (!e || *e > plan.start) {
            continue;
        }
        const double ratio = after[j] / std::max(before[j], 1e-9);
        const double overlap = std::max(0.0, std::min(end, *e) - now);
        if (*e + overlap * (1.0 / std::max(ratio, 1e-9) - 1.0) > plan.start) {
            return false;
        }
    }
    return true;
}

}  // namespace carma
