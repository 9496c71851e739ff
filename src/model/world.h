#pragma once
// The world: what collocated tasks really do in `carma simulate` and on emulated GPUs, kept apart
// from the slowdown predictor the `carma` policy plans with (model::speed_predictor). Without it
// both would be one formula and carma's placement would be right by construction.
//
//   model     speeds from the device model (task_speed under the sharing mode), as before;
//   measured  per-pair speeds from measured pairs (data/calibration, Lucid, compiled into the
//             binary): a pair whose solo utilisations lie within kPairRadius of a measured pair
//             runs at that pair's measured speed; any other collocation (an unknown pair, or three
//             or more tasks) runs at the device model's speed plus noise at the measured spread
//             (the sd of the summed-utilisation bin it falls in), drawn once per set of workloads
//             from the seed, so the same pair is always equally fast or slow.
//   bias F    every collocation is slower than the above by the factor (1 + F) on its slowdown:
//             a task with a GPU-active co-runner runs at speed / (1 + F) (slowdown = 1 / speed).
//             A task alone is never touched.
//   noise SD  each attempt's memory peak is the profile's times (1 + SD * z), z standard normal
//             clipped to +-2.5, drawn from the seed, the task and the attempt; capped at the GPU
//             (a task that fits alone in its profile fits alone in the world).
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

struct WorldConfig {
    WorldKind kind = WorldKind::Model;
    double bias = 0;   // F >= 0
    double noise = 0;  // relative sd of memory peaks, 0..0.5
    std::uint64_t seed = 1;
};

// Checks the ranges; the message names the setting.
Result<WorldConfig> checked(WorldConfig config);

// "model", "measured+bias 0.25+noise 0.1", ...
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
    // The spread (sd of normalised speed) of the bin holding summed utilisation U.
    double spread(double summed_u) const;
};

// One GPU-active task as the world sees it: a stable identity of its workload (world_id of the
// profile name) and its solo utilisation.
struct WorldTask {
    std::uint64_t id = 0;
    double util = 0;
};

std::uint64_t world_id(std::string_view name);

class World {
public:
    World() : World(WorldConfig{}, SharingMode::Mps) {}
    // `measured` defaults to the embedded pairs.
    World(WorldConfig config, SharingMode mode, const MeasuredPairs* measured = nullptr);

    // The progress rates of the GPU-active tasks of one GPU, in order.
    void speeds(std::span<const WorldTask> tasks, std::span<double> out) const;
    // One attempt's memory peak; `attempt` counts from 1; `cap_mib`: the GPU's usable memory.
    MiB peak_mib(MiB profile_peak_mib, std::uint64_t task, int attempt, MiB cap_mib) const;

    const WorldConfig& config() const { return config_; }

private:
    double measured_speed(std::size_t i, std::span<const WorldTask> tasks, double model) const;

    WorldConfig config_;
    SlowdownParams params_;
    const MeasuredPairs* measured_ = nullptr;
    // Nearest-pair answers by (self id, other id): the scan over 2,776 points is the slow part.
    mutable std::unordered_map<std::uint64_t, std::optional<double>> pair_cache_;
};

}  // namespace carma::model
