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
// The exclusive path (idle GPUs first) is not part of a policy: Scheduler::step tries it before
// any policy is consulted, and `exclusive` is simply the policy that never collocates.

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

enum class Score { FirstFit, BestFit, MostAvailableMemory, LeastUtilised, RoundRobin };

std::string_view to_string(Score s);

struct PolicySpec {
    std::string name;          // canonical name, e.g. "oracle-MAGM"
    bool collocate = false;    // false: exclusive only
    MemoryKnowledge knowledge = MemoryKnowledge::None;
    Score score = Score::FirstFit;
    bool risk_filter = true;
};

// Accepts the paper's names as they are (`oracle-MAGM`, `OR-RR`, `EST-LUG`, `exclusive`, ...),
// case-insensitively, plus long aliases (`round-robin`, `oracle-most-available-memory`,
// `least-utilised`) and a `-norisk` suffix that turns the risk filter off.
Result<PolicySpec> find_policy(std::string_view name);

// The ten policies of the paper's v2/v3 evaluation (spec §2.2), in its order; what `all` means.
std::vector<std::string> paper_policy_names();

// Every knowledge x score combination the registry accepts (for help texts).
std::vector<std::string> registered_policy_names();

// Everything the collocation path may know about one GPU at decision time.
struct GpuView {
    int index = 0;
    MiB total_mib = 0;
    bool has_processes = false;  // a task's process is visible on the GPU
    bool locked = false;         // warm-up: a task placed here is not yet settled (spec §1.7)
    // False while the GPU may not take any task: unhealthy (its reads fail or are stale), or its
    // window has not filled since it (re)appeared. The reason says which.
    bool schedulable = true;
    std::string unschedulable_reason;
    WindowStats stats;
};

struct PlacementConfig {
    MemoryNeedConfig memory;
    RiskThresholds risk;
    // Spell out why each GPU was refused in Selection::pending_reason. The simulator turns it
    // off: the reason is for people, and formatting it every second costs more than deciding.
    bool explain = true;
};

enum class FilterOutcome { Pass, Unschedulable, WarmingUp, NotEnoughMemory, HighRisk };

// The filters of one GPU, in the order the paper applies them.
FilterOutcome filter_gpu(const PolicySpec& policy, const GpuView& gpu,
                         const MemoryRequirement& requirement, const RiskThresholds& risk);

// Human-readable reason for a non-Pass outcome.
std::string explain_filter(FilterOutcome outcome, const GpuView& gpu,
                           const MemoryRequirement& requirement, const RiskThresholds& risk);

struct Selection {
    std::vector<int> gpus;        // chosen GPU indices (size == task.gpus) or empty
    std::string pending_reason;   // why not, when empty
    std::size_t rr_cursor = 0;    // round-robin cursor after this decision
};

// The collocation path for one task: filter every GPU, order the survivors by the policy's
// score, take the first task.gpus of them. Pure; the cursor is state passed in and out.
Selection select_gpus(const PolicySpec& policy, const TaskSpec& task,
                      std::span<const GpuView> gpus, const PlacementConfig& config,
                      std::size_t rr_cursor);

}  // namespace carma
