#pragma once
// `carma` learns its own error: from each attempt that ran collocated, the progress it made while
// it shared its GPU against what the slowdown predictor said it would make, and from that a
// correction of the predictor per workload family and sharing class.
//
// Observation of one attempt (all figures a deployment has: its solo history, its wall time, the
// time it had GPU-active co-runners and the predictor's speed over that time, from the learned
// figures of the tasks it shared with):
//   observed progress while shared = solo_s - (run_s - shared_s)   (alone it runs at speed 1)
//   predicted progress while shared = sum of predicted speed * dt over the shared time
//   k = predicted / observed: the factor by which the real slowdown (1 / speed) exceeds the
//   predicted one. k = 1: the predictor was right; 1.25: every shared second was 25 % slower.
// An attempt that shared for less than min_shared_fraction of its run teaches nothing (its
// observed progress is mostly noise of the solo figure), and k is clipped to [min_k, max_k].
//
// Correction: for a task among others on a GPU, the corrected speed is min(1, predicted / K) with
// K = exp(mean log k) of the newest observations of its (family, sharing class), shrunk toward 1
// by prior_weight pseudo-observations; with fewer than min_samples of its own, the pooled figure
// of its sharing class (all families), then of its load (the class over every count of tasks),
// then of everything, then 1. A task alone is never touched.
// The sharing class is the sharing mode, the co-runners' summed learned SM activity (light
// (< 0.3), medium (< 0.7), heavy) and how many tasks share the GPU, itself included (2, 3, 4+):
// "mps/heavy/4+". The count is its own dimension because the predictor's error need not be the
// same for five tasks as for a pair of the same summed activity (it plans from learned
// activities, and each co-runner it misjudges adds to the error): with the load alone, five-way
// packing borrowed the pairs' factor (two co-runners of 0.5 and four of 0.25 are both "heavy").
// Classes stored before the count was part of them ("mps/heavy") still load: they count for their
// load and for everything, not for any one count.
// Cautious speeds: a `--max-slowdown` bound is a promise, and the shrunk mean of a few scattered
// observations is an optimistic guess (the prior pulls it toward k = 1). For those checks a
// task's speed is divided by the upper one-sided confidence bound of K instead: exp(mean log k +
// cautious_z * sd / sqrt(n)) over the same observations, unshrunk, never below K; one
// observation: its own k. Measured in bench/fair_share_eval.py: with the mean, bounded tasks'
// p95 slowdown was 1.52 under a bound of 1.3 in the biased world; with this bound, 1.22.
// Pure: no I/O, no clock.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/policy.h"

namespace carma {

struct SpeedCorrectionConfig {
    std::size_t max_samples = 30;      // newest observations kept per (family, class)
    double prior_weight = 1;           // pseudo-observations at k = 1
    std::size_t min_samples = 3;       // own observations before a family's figure is used
    double min_shared_fraction = 0.1;  // of the attempt's run time
    double min_k = 0.5;
    double max_k = 4;
    double cautious_z = 1.645;  // cautious speeds' confidence: 95 %, one-sided
};

struct SpeedObservation {
    std::string family;
    std::string sharing_class;
    double solo_s = 0;                 // expected run time alone (solo history)
    double run_s = 0;                  // this attempt's wall time
    double shared_s = 0;               // of it, time with GPU-active co-runners
    double predicted_shared_progress_s = 0;  // sum of the predictor's speed * dt over shared_s
};

// "mps/heavy/3": `mode` (mps, timeslice), the class of the co-runners' summed activity and of
// `tasks`, the number of tasks sharing the GPU, itself included (a time-weighted mean when it
// changed during an attempt; counts of 3.5 and more are "4+").
std::string sharing_class(std::string_view mode, double others_activity, double tasks);

// "mps/heavy" of "mps/heavy/3", and of a class stored without a count.
std::string_view sharing_load(std::string_view sharing_class);

// k of one observation, or nothing when it teaches nothing.
std::optional<double> observed_factor(const SpeedObservation& o, const SpeedCorrectionConfig& c);

class SpeedCorrection {
public:
    explicit SpeedCorrection(std::string mode = "mps", SpeedCorrectionConfig config = {});

    // Learns from one attempt; false when it taught nothing.
    bool observe(const SpeedObservation& o);
    // Adds one factor directly (history replay).
    void add(const std::string& family, const std::string& sharing_class, double k);

    // The factor K for a task of `family` in `sharing_class`, with where it comes from.
    struct Factor {
        double k = 1;
        double cautious_k = 1;  // the upper confidence bound of k's observations, >= k
        std::size_t samples = 0;
        std::string basis;  // "family", "class", "load", "all", "none"
    };
    Factor factor(std::string_view family, std::string_view sharing_class) const;

    // The predictor learns which family a learned activity belongs to: the predictor sees
    // activities only (core/policy.h's SpeedPredictor), so this is how it finds a task's family.
    // Two families of one activity share the class figure.
    void bind(double activity, const std::string& family);

    struct Entry {
        std::string family, sharing_class;
        std::vector<double> k;  // oldest first
    };
    std::vector<Entry> entries() const;
    const std::string& mode() const { return mode_; }
    // The sharing classes of mode(), light to heavy, each for 2, 3 and 4+ tasks.
    std::span<const std::string> classes() const { return classes_; }
    const SpeedCorrectionConfig& config() const { return config_; }
    bool empty() const { return samples_.empty(); }

    // Corrected speeds: `raw` predicted them, each task among others is corrected by its factor.
    void correct(std::span<const double> activities, std::span<double> speeds) const;
    // The same, with each factor's upper confidence bound (Factor::cautious_k): the speeds a
    // `--max-slowdown` bound is checked against.
    void correct_cautiously(std::span<const double> activities, std::span<double> speeds) const;

    // Changes whenever correct() may answer the same input differently (a factor learned, an
    // activity bound to a family whose factor differs): a caller that keeps corrected
    // predictions (the `carma` policy, from round to round) keeps them while it stays.
    std::uint64_t version() const { return version_; }

private:
    struct Pool {
        double sum = 0;     // of log k
        double sum_sq = 0;  // of (log k)^2
        std::size_t n = 0;
    };
    // K and its cautious counterpart, as correct() and correct_cautiously() read them.
    struct Figure {
        double k = 1;
        double cautious_k = 1;
        bool operator==(const Figure&) const = default;
    };
    static constexpr std::size_t kNoFamily = static_cast<std::size_t>(-1);
    // The figure of a pool: exp(mean log k), shrunk toward 1 by the prior, and its cautious
    // counterpart.
    Figure figure(const Pool& p) const;
    template <bool kCautious>
    void apply(std::span<const double> activities, std::span<double> speeds) const;
    // A family's id in own_k_; kNoFamily for "" (no family, or several).
    std::size_t family_id(const std::string& family);
    // K in class `cls` (index into classes_) of an activity bound to `family`: its own figure,
    // else the class's.
    const Figure& bound_k(std::size_t family, std::size_t cls) const;

    // mode_'s sharing classes: light, medium, heavy, each for 2, 3 and 4+ tasks.
    static constexpr std::size_t kClasses = 9;

    std::string mode_;
    SpeedCorrectionConfig config_;
    std::array<std::string, kClasses> classes_;
    std::map<std::pair<std::string, std::string>, std::vector<double>> samples_;  // log k
    std::map<std::pair<std::string, std::string>, Pool> own_;
    std::map<std::string, Pool, std::less<>> by_class_;
    std::map<std::string, Pool, std::less<>> by_load_;  // "mps/heavy": every count
    Pool all_;
    // What correct() reads, kept up to date as it learns so that correcting costs one lookup per
    // task and learning touches only what changed (a run of 20,000 tasks binds thousands of
    // activities and learns from every shared attempt):
    //   per family id, its own K per class of mode_ once it has min_samples of its own;
    //   per class, the K of a task without its own: the class's, else its load's, else
    //   everything's, else 1;
    //   by micro-units of activity, the family it belongs to (kNoFamily: several).
    std::unordered_map<std::string, std::size_t> family_ids_;
    std::vector<std::array<std::optional<Figure>, kClasses>> own_k_;
    std::array<Figure, kClasses> fallback_k_{};
    std::unordered_map<long long, std::size_t> bound_;
    std::uint64_t version_ = 0;
};

// `raw`, corrected by `correction` (which the caller keeps learning). Empty `raw`: empty result.
SpeedPredictor corrected_predictor(SpeedPredictor raw,
                                   std::shared_ptr<const SpeedCorrection> correction);

// `raw`, corrected cautiously (SpeedCorrection::correct_cautiously): PlacementConfig's
// predict_cautious_speeds.
SpeedPredictor cautious_predictor(SpeedPredictor raw,
                                  std::shared_ptr<const SpeedCorrection> correction);

// `placement`'s predict_speeds (a raw predictor that answers the same input the same way, as
// the device model's does) corrected by `correction`, with the cautious speeds for slowdown
// bounds and the version that changes as it learns: what the daemon and the simulator hand
// `carma`.
void use_correction(PlacementConfig& placement, std::shared_ptr<const SpeedCorrection> correction);

// The version of corrected_predictor(raw, correction)'s answers (PlacementConfig's
// predictor_version), for a `raw` that always answers the same input the same way, as the
// device model's does.
PredictorVersion corrected_predictor_version(std::shared_ptr<const SpeedCorrection> correction);

}  // namespace carma
