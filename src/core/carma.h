#pragma once
// CARMA's own policy, `carma`: the paper's placement made to work without an oracle, plus an order
// and backfilling that keep GPUs busy. Its pieces are pure functions; Scheduler::step runs them.
//
// Assumptions:
//   1. Every queued task carries TaskSpec::learned (core/knowledge.h), filled by the daemon or the
//      simulator. The policy reads nothing else about a task's memory, run time or activity: never
//      the profiled ("oracle") value.
//   2. The caller lists the tasks on each GPU (GpuView::residents) with their learned figures and
//      supplies the device model's slowdown function (PlacementConfig::predict_speeds). Without
//      them the policy falls back on measured free memory and predicts no interference.
//   3. Learned figures are estimates. A wrong run time costs time (a backfilled task may delay the
//      head after all), never a crash; memory is never planned below what knowledge says.
// Steps of one decision round:
//   1. Order: the recovery queue's front first; then every task that has waited max_wait_s or
//      longer, in arrival order; then the shortest expected run first (an unknown run time goes
//      first: running the command is how it is learned). Shortest first is the classic rule for
//      mean completion time, and a short debugging run gets through a backlog; over the
//      evaluation's traces and seeds its makespan is on par with longest first's
//      (docs/evaluation.md section 10). The bounded wait keeps long runs from starving.
//   2. The head takes n idle GPUs if there are (exclusive path), else the n GPUs that pass the
//      filters with the least predicted added slowdown. Filters: schedulable, not warming up,
//      memory, and on a shared GPU a predicted gain in summed progress above min_gain (the
//      paper's risk filter only in `carma-risk`).
//   3. Memory: the GPU's available memory is the smaller of the measured one (last free - 512) and
//      its ledger (usable - 512 - the learned needs of its residents; a resident of unknown need
//      fills the GPU); it must cover the task's learned need + margin. A task of unknown need goes
//      only to an idle GPU, or, where per-task memory limits protect co-runners
//      (PlacementConfig::memory_limits), beside others when no_info_min_free is available.
//   4. A head that cannot start gets a reservation: on each GPU, the moment enough of its
//      residents have ended (by their expected ends) for the head to fit; the head's predicted
//      start is the n-th earliest of these, on the n GPUs that are its "shadow". A resident with
//      no expected end makes that GPU's moment unknown; among such GPUs the shadow is the n with
//      the fewest residents of unknown end, then the least memory held.
//   5. Backfilling: the tasks behind the head, in the same order (at most backfill_depth of them),
//      may start now on GPUs outside the shadow, or on a shadow GPU when their own predicted end
//      comes before the head's predicted start and the slowdown they cause its residents does not
//      push any of their ends past it. A task with no run-time estimate may use only GPUs outside
//      the shadow, or a shadow GPU where its own memory leaves room for the head's beside it (its
//      slowdown still must not delay the head's start). When the head's start is unknown, only
//      this last rule lets a task onto a shadow GPU, so the shadow drains and the head's wait
//      stays bounded.
// Ties: added slowdown within kSlowdownTie, then least available memory left (best fit: large
// holes stay for large tasks), then GPU index.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/policy.h"
#include "core/task.h"

namespace carma {

inline constexpr double kNeverS = std::numeric_limits<double>::infinity();
// Predicted added slowdowns closer than this are a tie: the model is not that precise.
inline constexpr double kSlowdownTie = 0.01;

struct CarmaConfig {
    double max_wait_s = 7200;          // a task waiting this long goes to the front
    std::size_t backfill_depth = 256;  // tasks behind the head examined per round
    // A shared GPU takes a task only if the model predicts that the GPU's summed progress rate
    // (in solo-task units) grows by more than this: by default, never where the newcomer would
    // take more from its co-runners than it adds. Replaces the paper's risk filter (`carma-risk`
    // applies both).
    double min_gain = 0;
    // Fair share (core/fair_share.h): the order across users by priority
    //   P = fair_share_weight * F(user) + age_weight * [waited >= max_wait_s] - nice,
    // each user's tasks in carma's own order. Off: every user's F counts the same (nice and age
    // still do). Only `carma` reads these; the paper's policies keep arrival order.
    bool fair_share = true;
    double fair_share_weight = 10000;
    double age_weight = 1000;
};

// What `carma` asks of a GPU for one task.
struct CarmaNeed {
    enum class Basis { Learned, Recovered, Exclusive, UnknownLimited, Unknown };
    bool idle_only = false;        // only an idle GPU will do
    MiB min_available_mib = 0;     // otherwise: available memory (see step 3) at least this
    Basis basis = Basis::Learned;
    MiB need_mib = 0;              // Learned: the need and margin behind min_available_mib
    MiB margin_mib = 0;
};

// `recovered`: the task's last attempt died of out-of-memory; it runs alone. So does an
// `--exclusive` task.
CarmaNeed carma_need(const TaskSpec& task, bool recovered, const PlacementConfig& config);

// For messages, e.g. "learned 9,000 MiB + 2,048 MiB margin" (formatted only when asked: a busy
// round examines hundreds of tasks).
std::string describe(const CarmaNeed& need);
// Why no GPU takes a task of this need now: "no GPU is idle" for one that runs alone (its need
// says nothing of memory), else "no GPU has 9,000 MiB available".
std::string no_room_text(const CarmaNeed& need);

// min(measured available, ledger) of step 3.
MiB planned_available_mib(const GpuView& gpu);

// What the device model predicts when a task of learned activity `activity` joins a GPU's tasks.
struct SharingPrediction {
    double added_slowdown = 0;  // increase of the summed slowdown (sum of 1/speed - 1 per task)
    double gain = 1;            // increase of the GPU's summed progress rate (sum of speeds)
};

// The predictions for one GPU, per learned activity of a task that would join it. A busy round
// examines hundreds of waiting tasks on every GPU, and most share a few activities (activity is
// learned per command and family), so predicting once per (GPU, activity) instead of per
// (GPU, task) saves most of the predictor's calls without changing a single result; and a backlog
// runs many rounds over the same GPUs, so the scheduler keeps them from round to round while the
// predictor's answers stay the same (PlacementConfig::predictor_version).
// Its key is the predictor's whole input: the GPU's activities, compared on every use (a GPU
// whose tasks changed starts afresh), and the newcomer's. Valid while the predictor answers the
// same input the same way: the caller clears it when that may have changed.
class GpuPredictions {
public:
    struct Joined {
        SharingPrediction sharing;
        std::span<const double> before;  // the GPU's tasks alone, one speed each
        std::span<const double> after;   // with the newcomer, which is last
    };
    // Without a predictor: no slowdown, a gain of 1, every speed 1. The spans stay valid until
    // the next call or clear().
    Joined joined(const GpuView& gpu, double activity, const SpeedPredictor& predict);
    void clear();

private:
    struct Entry {
        std::uint64_t activity = 0;  // its bits
        SharingPrediction sharing;
        std::size_t at = 0;  // its speeds in after_
    };
    // The entry of a newcomer's activity, or null. Open addressing over slots_ (entry + 1; 0:
    // empty): a GPU kept over many rounds collects the activities of hundreds of tasks.
    const Entry* find(std::uint64_t activity) const;
    void index(std::size_t entry);
    bool base_known_ = false;
    std::vector<double> activities_;  // the GPU's, with room for the newcomer
    std::vector<double> before_;
    double before_slowdown_ = 0;
    double before_speed_ = 0;
    std::vector<Entry> entries_;
    std::vector<std::uint32_t> slots_;  // a power of two long, at most half full
    std::vector<double> after_;  // each entry's n + 1 speeds
};

// `cache`: the GPU's predictions for this round; may be null (then nothing is kept).
SharingPrediction predict_sharing(const GpuView& gpu, double activity,
                                  const SpeedPredictor& predict,
                                  GpuPredictions* cache = nullptr);

// Why a GPU cannot take a task now, task-independent part (schedulable, warm-up, risk filter);
// Pass when it could.
FilterOutcome carma_gpu_open(const PolicySpec& policy, const GpuView& gpu,
                             const RiskThresholds& risk);

// Steps 2-3 for one task over the GPUs with allowed[i] (i = position in `gpus`): the exclusive
// path first, then collocation. `open[i]` caches carma_gpu_open(...) == Pass; `predictions`, when
// not empty, one GpuPredictions per GPU position for the round; `available_mib`, when not empty,
// planned_available_mib(...) per GPU position, up to date.
Selection carma_select(const PolicySpec& policy, const TaskSpec& task, const CarmaNeed& need,
                       std::span<const GpuView> gpus, std::span<const char> open,
                       std::span<const char> allowed, const PlacementConfig& config,
                       const CarmaConfig& carma,
                       std::span<GpuPredictions> predictions = {},
                       std::span<const MiB> available_mib = {});

struct HeadPlan {
    double start = kNeverS;     // predicted start; kNeverS: unknown
    std::vector<char> shadow;   // per position in `gpus`: the n GPUs reserved for the head
};

// Step 4 on one GPU without the clock: what must happen before the head could start there, and
// what ranks the GPU among the others. It reads the GPU's residents (in the order of their
// expected ends), memory, health and risk and the head's need, never the time.
struct HeadReadiness {
    enum class When { Never, Now, AfterEnd };
    When when = When::Never;
    double end = 0;           // AfterEnd: the expected end of the resident it waits for
    std::size_t unknown = 0;  // residents with no expected end (all count when unlisted)
    MiB committed = 0;        // the residents' learned needs (unknown: the whole GPU)
};
// `risky`: the GPU is schedulable and not warming up but turned down by the risk filter.
HeadReadiness head_readiness(const GpuView& gpu, bool risky, const CarmaNeed& need);

// head_readiness of one GPU, kept while its whole input stays the same, compared on every use as
// GpuPredictions are: a backlog plans the same head on the same GPUs round after round, and
// sorting every GPU's residents for it was most of a round on 64 GPUs.
class HeadReadinessCache {
public:
    const HeadReadiness& get(const GpuView& gpu, bool risky, const CarmaNeed& need);

private:
    bool known_ = false;
    bool schedulable_ = false, has_processes_ = false, risky_ = false, idle_only_ = false;
    MiB total_mib_ = 0, foreign_mib_ = 0, available_mib_ = 0, min_available_mib_ = 0;
    std::vector<ResidentView> residents_;  // what it reads of them: task, need, expected end
    HeadReadiness value_;
};

// Step 4. `settle_s`: how long a warming-up GPU stays closed at most. `readiness`, when not
// empty, one cache per GPU position. `taken`, when not empty: GPUs already reserved for another
// task, which this plan leaves out; then a plan that finds too few GPUs reserves none (the head's
// plan, without `taken`, reserves every GPU instead).
HeadPlan plan_head(const TaskSpec& head, const CarmaNeed& need, std::span<const GpuView> gpus,
                   std::span<const char> open, double now, double settle_s,
                   std::span<HeadReadinessCache> readiness = {},
                   std::span<const char> taken = {});

// Step 5 for a shadow GPU: whether `task` may start there now without delaying the head. It may
// if (a) it is predicted to end before the head's start, or (b) its own need + margin leaves room
// for the head's on this GPU whatever else runs there; and in both cases the slowdown it causes
// pushes no resident that the head waits for past the head's start. With an unknown start only
// (b) applies. (Outside the shadow every GPU may be used.)
// `cache`: the GPU's predictions for this round; may be null.
bool may_pass_head(const TaskSpec& task, const GpuView& gpu, const HeadPlan& plan,
                   const CarmaNeed& head_need, double now, const SpeedPredictor& predict,
                   GpuPredictions* cache = nullptr);

}  // namespace carma
