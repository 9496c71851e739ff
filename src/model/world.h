#pragma once
// The world: what collocated tasks really do in `carma simulate` and on emulated GPUs, kept apart
// from the slowdown predictor the `carma` policy plans with (model::speed_predictor). Without it
// both would be one formula and carma's placement would be right by construction.
//
//   model     speeds from the device model (task_speed under the sharing mode), as before;
//   measured  per-pair speeds from measured pairs (data/calibration, Lucid, compiled into the
//             binary): a pair whose solo utilisations lie within kPairRadius of a measured pair
//             runs at that pair's measured speed; any other collocation (an unknown pair, or three
//             or more tasks) is composed as `compose` says.
//   compose   how the world slows what it has no measurement for (every collocation of the kind
//             model; unknown pairs and three or more tasks of the kind measured):
//     model       the device model's task_speed (kind model), or, for measured, task_speed plus
//                 noise at the measured spread (the sd of the summed-utilisation bin it falls in),
//                 drawn once per set of workloads from the seed. The `carma` predictor's own
//                 formula and constants: the default, as before, but carma is graded by its model.
//     pairwise    task i among co-runners J runs at clamp(prod_{j in J} s(i,j), 0.05, 1), s(i,j)
//                 the pair speed: the measured one (within kPairRadius), else a draw from the
//                 Lucid bin of u_i + u_j: clamp(mean + sd * z, 0.05, 1), z standard normal clipped
//                 to +-2.5, drawn from the seed and the pair (self, other): the same pair always
//                 the same, each side its own draw (in the Lucid pairs the two sides' deviations
//                 from their bin's mean are uncorrelated, r = -0.02). Lucid's norm_speed is
//                 co-located / solo throughput, a speed on our scale (1 = alone); above 1 is noise
//                 of the two measurements and is clipped. The kind model composes so too (its
//                 pairs are the measured ones as well).
//     bottleneck  the most contended resource sets the pace (world_compose.h): SM activity,
//                 SM occupancy and DRAM bandwidth, each of capacity 1, shared max-min fairly from
//                 the solo profiles. No measured data, no constants.
//             Neither pairwise nor bottleneck shares code or constants with task_speed.
//   bias F    every collocation is slower than the above by the factor (1 + F) on its slowdown:
//             a task with a GPU-active co-runner runs at speed / (1 + F) (slowdown = 1 / speed).
//             A task alone is never touched.
//   noise SD  each attempt's memory peak is the profile's times (1 + SD * z), z standard normal
//             clipped to +-2.5, drawn from the seed, the task and the attempt; capped at the GPU
//             (a task that fits alone in its profile fits alone in the world).
// Memory capacity is no slowdown in any world: a GPU whose residents outgrow it crashes one
// (model/memory.h, next_oom), it does not slow them.
// Pure: every draw is a hash of the seed and the identities, so a world replays exactly.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/units.h"
#include "model/interference.h"

namespace carma::model {

enum class WorldKind { Model, Measured };

std::string_view to_string(WorldKind kind);
Result<WorldKind> parse_world_kind(std::string_view text);

// How the world slows what it has not measured (the header above).
enum class WorldCompose { Model, Pairwise, Bottleneck };

std::string_view to_string(WorldCompose compose);
Result<WorldCompose> parse_world_compose(std::string_view text);

struct WorldConfig {
    WorldKind kind = WorldKind::Model;
    double bias = 0;   // F >= 0
    double noise = 0;  // relative sd of memory peaks, 0..0.5
    std::uint64_t seed = 1;
    // Last, so the aggregates {kind, bias, noise, seed} written before it still mean the same.
    WorldCompose compose = WorldCompose::Model;
};

// Checks the ranges; the message names the setting.
Result<WorldConfig> checked(WorldConfig config);

// "model", "measured+bias 0.25+noise 0.1", "model+compose bottleneck", ...
std::string describe(const WorldConfig& config);

// Solo utilisations within this distance (Euclidean, utilisation 0..1) of a measured pair count as
// that pair.
inline constexpr double kPairRadius = 0.05;

// The measured pairs and bins (data/calibration/README.md).
struct MeasuredPairs {
    struct Point {
        double u_self = 0, u_other = 0, speed = 1;
    };
    struct Bin {
        double lo = 0, hi = 0, mean = 1, sd = 0;
    };
    std::vector<Point> points;  // each pair twice, once from each side
    std::vector<Bin> bins;

    static Result<MeasuredPairs> parse(std::string_view pairs_csv, std::string_view bins_csv);
    // The copies compiled into the binary.
    static const MeasuredPairs& embedded();

    // The measured speed of the nearest pair within `radius`, if any.
    std::optional<double> nearest(double u_self, double u_other, double radius) const;
    // The bin holding summed utilisation U (below the first: the first; above the last: the last).
    const Bin& bin(double summed_u) const;
    // The spread (sd of normalised speed) of the bin holding summed utilisation U.
    double spread(double summed_u) const;
};

// One GPU-active task as the world sees it: a stable identity of its workload (world_id of the
// profile name), its solo utilisation and, for the bottleneck world, its solo SM activity, SM
// occupancy and DRAM activity (all 0: unknown, and util stands in for SM activity); and the
// share of the SMs an MPS client is capped at (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE / 100 for a
// `--gpu-share` under MPS; 1: uncapped).
struct WorldTask {
    std::uint64_t id = 0;
    double util = 0;
    double smact = 0;
    double smocc = 0;
    double drama = 0;
    double sm_cap = 1;
};

std::uint64_t world_id(std::string_view name);

class World {
public:
    World() : World(WorldConfig{}, SharingMode::Mps) {}
    // `measured` defaults to the embedded pairs.
    World(WorldConfig config, SharingMode mode, const MeasuredPairs* measured = nullptr);

    // The progress rates of the GPU-active tasks of one GPU, in order. A task capped below its
    // solo utilisation runs at sm_cap/util of its solo speed, alone too, and weighs on the
    // others with its capped use.
    void speeds(std::span<const WorldTask> tasks, std::span<double> out) const;
    // One attempt's memory peak; `attempt` counts from 1; `cap_mib`: the GPU's usable memory.
    MiB peak_mib(MiB profile_peak_mib, std::uint64_t task, int attempt, MiB cap_mib) const;

    const WorldConfig& config() const { return config_; }

private:
    // The measured speed of `self` beside `other` (clamped to [0.05, 1]), if the pair is measured.
    std::optional<double> measured_pair(const WorldTask& self, const WorldTask& other) const;
    double measured_speed(std::size_t i, std::span<const WorldTask> tasks, double model) const;
    // Compose pairwise: the pair speed s(i,j), measured or drawn, and task i's product of them.
    double pair_speed(const WorldTask& self, const WorldTask& other) const;
    double pairwise_speed(std::size_t i, std::span<const WorldTask> tasks) const;
    // Unbiased speeds of a collocation (two or more tasks) as the kind and compose say.
    void collocated_speeds(std::span<const WorldTask> tasks, std::span<double> out) const;
    void uncapped_speeds(std::span<const WorldTask> tasks, std::span<double> out) const;

    WorldConfig config_;
    SlowdownParams params_;
    const MeasuredPairs* measured_ = nullptr;
    // Nearest-pair answers by (self id, other id): the scan over 2,776 points is the slow part.
    mutable std::unordered_map<std::uint64_t, std::optional<double>> pair_cache_;
};

}  // namespace carma::model
