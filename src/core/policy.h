#pragma once
// Placement policies as data plus pure functions (spec §2). A policy is a combination of
//   1. memory knowledge: oracle (profiled peak), OR (none: fixed 5 GiB free), EST (estimator);
//   2. the risk filter of §1.9 (on for every policy but round-robin, off for "-norisk" variants);
//   3. a score that orders the GPUs passing every filter:
//        FF   first fit: GPU index order
//        BF   best fit: ascending available memory (tightest fit first)
//        MAGM most available GPU memory: descending available memory
//        LUG  least utilised GPU: ascending SMACT risk statistic
//        RR   round robin: a cursor that keeps moving across decisions
// Ties always fall back to GPU index order (the paper's sorts are stable over nvidia-smi order).
// CARMA's own policy, `carma`, is described in core/carma.h: learned memory knowledge, the least
// predicted slowdown as its score, backfilling and a shortest-first order with a bounded wait.
// The exclusive path (idle GPUs first) is not part of a policy: Scheduler::step tries it before
// any policy is consulted, and `exclusive` is simply the policy that never collocates.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_need.h"
#include "core/metric_window.h"
#include "core/result.h"
#include "core/risk_filter.h"
#include "core/task.h"

namespace carma {

enum class Score {
    FirstFit,
    BestFit,
    MostAvailableMemory,
    LeastUtilised,
    RoundRobin,
    LeastSlowdown,  // carma: least predicted slowdown of the GPU's tasks and the newcomer
};

std::string_view to_string(Score s);

// `carma` runs the shortest expected run first (core/carma.h says why); longest first is the
// `-longfirst` ablation.
enum class RunTimeOrder { Arrival, ShortestFirst, LongestFirst };

struct PolicySpec {
    std::string name;          // canonical name, e.g. "oracle-MAGM"
    bool collocate = false;    // false: exclusive only
    MemoryKnowledge knowledge = MemoryKnowledge::None;
    Score score = Score::FirstFit;
    bool risk_filter = true;
    // CARMA's own scheduling (core/carma.h); the paper's policies leave these off.
    bool carma = false;       // memory from TaskSpec::learned, per-GPU ledger, unknown-need rule
    bool backfill = false;    // tasks behind a waiting head may start if they cannot delay it
    // The order of the waiting tasks that have not waited max_wait_s yet (those go first, by
    // arrival): arrival, or by expected run time (an unknown one goes first either way).
    RunTimeOrder order = RunTimeOrder::Arrival;
    bool by_run_time() const { return order != RunTimeOrder::Arrival; }
    // Whether it reads the metric windows' order statistics (median, p95, EMA, risk; see
    // core/metric_window.h): the risk filter and the least-utilised score do.
    bool reads_order_statistics() const {
        return risk_filter || score == Score::LeastUtilised;
    }
    // Whether a task has its GPUs to itself under this policy, and so is charged the whole GPU
    // (core/fair_share.h): the policy never shares, or the task asks it (runs_alone, with a
    // slowdown bound that only `carma` predicts). The simulator, the daemon's charge and its
    // preemption ask it here.
    bool task_runs_alone(bool exclusive, bool bounds_slowdown) const {
        return !collocate || runs_alone(exclusive, bounds_slowdown, carma);
    }
    bool task_runs_alone(const TaskSpec& task) const {
        return task_runs_alone(task.exclusive, task.max_slowdown.has_value());
    }
    // The share of each of its GPUs a task keeps from others, which it pays for whether it uses
    // it or not (core/fair_share.h): the whole GPU when it runs alone; else, under a slowdown
    // bound S, 1/S, since co-runners may take no more than would slow it past S (`--max-slowdown
    // 1` keeps every co-runner away and pays like `--exclusive`); else its `--gpu-share`, which
    // no other share may take (core/gpu_share.h); else nothing.
    double task_reserved_share(bool exclusive, std::optional<double> max_slowdown,
                               int gpu_milli = 0) const {
        if (task_runs_alone(exclusive, max_slowdown.has_value())) {
            return 1;
        }
        const double bounded =
            max_slowdown && *max_slowdown > 0 ? std::min(1.0, 1.0 / *max_slowdown) : 0.0;
        return std::max(bounded, std::min(1.0, static_cast<double>(gpu_milli) / kMilliPerGpu));
    }
    double task_reserved_share(const TaskSpec& task) const {
        return task_reserved_share(task.exclusive, task.max_slowdown, task.gpu_milli);
    }
};

// Accepts the paper's names as they are (`oracle-MAGM`, `OR-RR`, `EST-LUG`, `exclusive`, ...),
// case-insensitively, plus long aliases (`round-robin`, `oracle-most-available-memory`,
// `least-utilised`) and a `-norisk` suffix that turns the risk filter off. `carma` is CARMA's
// own policy; its ablations take suffixes that each change one ingredient: `-nobackfill`,
// `-fifo` (arrival order instead of shortest first) or `-longfirst` (longest expected run
// first), `-magm` (most available memory instead of the least predicted slowdown), `-risk` (the
// paper's risk filter as well); e.g. `carma-fifo-nobackfill`.
Result<PolicySpec> find_policy(std::string_view name);

// The ten policies of the paper's v2/v3 evaluation (spec §2.2), in its order; what `all` means.
std::vector<std::string> paper_policy_names();

// Every knowledge x score combination the registry accepts (for help texts).
std::vector<std::string> registered_policy_names();

// A task placed on a GPU (starting or running), as the `carma` policy plans with it: figures
// from the task's own TaskSpec::learned, never from measurement of the task itself.
struct ResidentView {
    TaskId task = 0;
    double activity = 0;                 // learned SM activity alone, 0..1
    std::optional<MiB> need_mib;         // learned need; unknown: it may use the whole GPU
    std::optional<double> expected_end;  // dispatch + learned run time; unknown if no estimate
    // What the task asked of its co-runners (TaskSpec::exclusive, TaskSpec::max_slowdown): an
    // exclusive task's GPU takes nobody; beside a task with a slowdown bound, `carma` places a
    // co-runner only while the task's predicted slowdown stays within it (the paper's policies,
    // which predict none, treat it as exclusive).
    bool exclusive = false;
    std::optional<double> max_slowdown = {};
    // Its `--gpu-share` in thousandths of the GPU; 0: a whole-GPU task (core/gpu_share.h).
    int gpu_milli = 0;
};

// Predicted progress rates of tasks sharing one GPU: `speeds[i]` (0..1] for the task whose
// learned activity is `activities[i]`, all of them GPU-active together. Supplied by the simulator
// and the daemon from the device model (model/interference.h); core only calls it.
using SpeedPredictor =
    std::function<void(std::span<const double> activities, std::span<double> speeds)>;

// Says when a SpeedPredictor's answers change: a number that changes whenever the same input may
// get another answer (a correction that learned). A predictor whose answers never change has a
// constant one.
using PredictorVersion = std::function<std::uint64_t()>;

// Everything the collocation path may know about one GPU at decision time.
struct GpuView {
    // Unique among the GPUs of one step, across nodes: placements and warm-up locks name GPUs by
    // it alone.
    int index = 0;
    // The machine the GPU is in; "" for the one server. A task on several GPUs takes them all
    // on one node (its processes talk over NVLink/PCIe, not the network); see pick_on_one_node.
    std::string node;
    MiB total_mib = 0;
    bool has_processes = false;  // a task's process is visible on the GPU
    bool locked = false;         // warm-up: a task placed here is not yet settled (spec §1.7)
    // False while the GPU may not take any task: unhealthy (its reads fail or are stale), or its
    // window has not filled since it (re)appeared. The reason says which.
    bool schedulable = true;
    std::string unschedulable_reason;
    WindowStats stats;
    // The tasks the scheduler's caller knows to be placed here (for `carma`: its memory ledger,
    // predicted slowdown and predicted end times). Empty where the caller does not say; `carma`
    // then falls back on the measured window.
    std::vector<ResidentView> residents;
    // Held by processes the caller did not start (foreign): never planned into. Their SM
    // activity, where they have any, counts beside the residents'.
    MiB foreign_mib = 0;
    std::optional<double> foreign_activity;
    // The user whose tasks are MPS clients of this GPU's control daemon; empty: none
    // (core/mps_share.h).
    std::string mps_user;
    // The user its node's agent runs as when that is not root: the node starts only that user's
    // tasks (core/agent_user.h); empty: any user's.
    std::string agent_user;
};

struct PlacementConfig {
    MemoryNeedConfig memory;
    RiskThresholds risk;
    // Spell out why each GPU was refused in Selection::pending_reason. The simulator turns it
    // off: the reason is for people, and formatting it every second costs more than deciding.
    bool explain = true;
    // Per-task memory limits protect co-runners (MPS memory limits in the daemon, the emulated
    // GPUs and the simulator): then `carma` may place a task whose need is unknown beside others,
    // since it can only crash itself. Without them such a task gets an idle GPU only.
    bool memory_limits = false;
    // For `carma`'s slowdown score and backfill predictions; empty: no interference predicted.
    SpeedPredictor predict_speeds;
    // The version of predict_speeds' answers. Set, `carma` keeps its predictions from round to
    // round while it stays the same; empty, only within a round (every predictor is taken to
    // answer the same input the same way for one round). Set it with predict_speeds.
    PredictorVersion predictor_version;
    // For `--max-slowdown` bounds: speeds the predictor is confident of, not its mean guess
    // (core/speed_correction.h's cautious speeds); empty: predict_speeds'.
    SpeedPredictor predict_cautious_speeds;
};

enum class FilterOutcome { Pass, Unschedulable, WarmingUp, HeldAlone, NotEnoughMemory, HighRisk };

// Whether one of the GPU's residents must have it to itself (core/task.h's runs_alone:
// `--exclusive`, or a slowdown bound the policy cannot predict): the GPU takes no co-runner.
bool holds_task_alone(const GpuView& gpu, bool predicts_slowdown);

// The filters of one GPU, in the order the paper applies them.
FilterOutcome filter_gpu(const PolicySpec& policy, const GpuView& gpu,
                         const MemoryRequirement& requirement, const RiskThresholds& risk);

// Human-readable reason for a non-Pass outcome.
std::string explain_filter(FilterOutcome outcome, const GpuView& gpu,
                           const MemoryRequirement& requirement, const RiskThresholds& risk);

// Whether the GPUs are on more than one node (for reasons people read).
bool spans_nodes(std::span<const GpuView> gpus);

// Of `count` candidates in order of preference, each eligible(k) or not and on node node_of(k):
// the first node to hold `wanted` eligible candidates wins, and take(k) receives its first
// `wanted` in order. So the choice is the usual first `wanted` when every GPU is on one node, and
// otherwise the node whose `wanted`-th best GPU ranks best. No allocation: node counts live on
// the stack (a node beyond the first kMaxCountedNodes distinct ones is counted by rescanning).
struct NodePick {
    bool found = false;
    std::size_t most_on_one_node = 0;  // eligible candidates on the best-stocked node
    std::size_t most_at = 0;           // a candidate on that node (when most_on_one_node > 0)
};
inline constexpr std::size_t kMaxCountedNodes = 32;
template <typename Eligible, typename NodeOf, typename Take>
NodePick pick_on_one_node(std::size_t count, std::size_t wanted, Eligible&& eligible,
                          NodeOf&& node_of, Take&& take) {
    NodePick pick;
    struct Count {
        const std::string* node = nullptr;
        std::size_t n = 0;
    };
    std::array<Count, kMaxCountedNodes> counts{};
    std::size_t distinct = 0;
    std::size_t last = 0;  // GPUs of a node are usually adjacent: try the last node first
    for (std::size_t k = 0; k < count; ++k) {
        if (!eligible(k)) {
            continue;
        }
        const std::string& node = node_of(k);
        std::size_t same = 0;
        if (distinct > 0 && *counts[last].node == node) {
            same = ++counts[last].n;
        } else {
            std::size_t c = 0;
            while (c < distinct && *counts[c].node != node) {
                ++c;
            }
            if (c < distinct) {
                same = ++counts[c].n;
                last = c;
            } else if (distinct < counts.size()) {
                counts[distinct] = Count{&node, 1};
                last = distinct++;
                same = 1;
            } else {
                same = 1;
                for (std::size_t j = 0; j < k; ++j) {
                    same += eligible(j) && node_of(j) == node ? 1 : 0;
                }
            }
        }
        if (same > pick.most_on_one_node) {
            pick.most_on_one_node = same;
            pick.most_at = k;
        }
        if (same >= wanted) {
            std::size_t taken = 0;
            for (std::size_t j = 0; j <= k && taken < wanted; ++j) {
                if (eligible(j) && node_of(j) == node) {
                    take(j);
                    ++taken;
                }
            }
            pick.found = true;
            return pick;
        }
    }
    return pick;
}

struct Selection {
    std::vector<int> gpus;        // chosen GPU indices (size == task.gpus) or empty
    std::string pending_reason;   // why not, when empty
    std::size_t rr_cursor = 0;    // round-robin cursor after this decision
    bool exclusive = false;       // carma: the GPUs were idle (the exclusive path)
};

// The collocation path for one task: filter every GPU, order the survivors by the policy's
// score, take the first task.gpus of them on one node (pick_on_one_node). Pure; the cursor is
// state passed in and out.
Selection select_gpus(const PolicySpec& policy, const TaskSpec& task,
                      std::span<const GpuView> gpus, const PlacementConfig& config,
                      std::size_t rr_cursor);

}  // namespace carma
