#pragma once
// Slowdown of tasks sharing a GPU, the GPU-level metrics a monitor would see, and power
// (interference-model.md §6.3, §6.4, §7.3, §10(b,c)).

#include <span>
#include <string_view>

#include "core/policy.h"
#include "core/result.h"
#include "model/gpu_type.h"

namespace carma::model {

enum class SharingMode { Mps, Timeslice };

std::string_view to_string(SharingMode mode);
Result<SharingMode> parse_sharing_mode(std::string_view text);

struct SlowdownParams {
    double capacity = 0;   // C: summed demand the GPU absorbs before tasks slow down
    double sharpness = 0;  // n: how sharply the knee bends
};

SlowdownParams slowdown_params(SharingMode mode);

// f(x) = (1 + (x/C)^n)^(1/n), a smooth max(1, x/C).
double smooth_load(double x, const SlowdownParams& p);

// Progress rate of a task with solo utilisation u_i among GPU-active tasks whose solo
// utilisations sum to U (u_i included): f(u_i)/f(U); exactly 1 alone.
double task_speed(double u_i, double summed_u, const SlowdownParams& p);

// One GPU-active task's contribution to its GPU.
struct Contribution {
    double util = 0;
    double smact = 0;
    double smocc = 0;
    double drama = 0;
    double speed = 1;  // its progress rate (the slowest of its GPUs for multi-GPU tasks)
};

struct GpuActivity {
    double smact = 0;  // min(1, sum smact_i * speed_i)
    double smocc = 0;  // min(1, sum smocc_i * speed_i)
    double drama = 0;  // 1 - prod(1 - drama_i * speed_i)
    double util = 0;   // 1 - prod(1 - u_i)
    bool active = false;
};

GpuActivity aggregate_activity(std::span<const Contribution> tasks);

// The slowdown demand (solo utilisation) of a task whose solo SM activity is `smact`: the
// inverse of the A100 map SMACT = 0.905 u^1.52 (interference-model.md §6.3), clamped to [0, 1].
// Learned activity is SM activity; the slowdown model's demand is utilisation.
double demand_from_smact(double smact);

// The `carma` policy's slowdown predictor (core/policy.h) under this sharing mode: each task's
// task_speed among the others, its demand from its learned SM activity.
SpeedPredictor speed_predictor(SharingMode mode);

// Board power: idle when nothing is GPU-active, else max(idle, a + b*SMACT + c*DRAMA), capped.
double gpu_power_w(const GpuActivity& activity, const GpuType& type, double scale = 1.0);

}  // namespace carma::model
