#pragma once
// Every constant of the device model in one place, each with its source. Sections refer to
// the research note on the interference model (interference-model.md in the team's shared
// research) and the CARMA specification (carma-spec.md).

#include "core/units.h"

namespace carma::model {

// --- slowdown under sharing (§6.3) --------------------------------------------------------------
// speed_i = f(u_i) / f(U), f(x) = (1 + (x/C)^n)^(1/n), U = sum of solo utilisations on the GPU.
// Least-squares fit on 1,388 measured pairs (2,776 job observations) of Lucid's profiling data,
// naive time-sliced co-location: C = 1.246 (95 % CI 1.21-1.29), n = 5.27 (4.6-5.95).
inline constexpr double kTimesliceCapacity = 1.246;
inline constexpr double kTimesliceSharpness = 5.27;
// MPS lets kernels of different processes run on different SMs at once, so the GPU absorbs more
// summed demand before tasks slow down. No public MPS training-pair data exists (§11.2); the note
// gives 1.25-1.6 as the plausible range and we take its middle. An assumption, not a fit.
inline constexpr double kMpsCapacity = 1.4;
inline constexpr double kMpsSharpness = 5.27;

// --- power (§7.2, §7.3) ----------------------------------------------------------------------------
// P = max(P_idle, a + b*SMACT + c*DRAMA) while any task is GPU-active, P_idle otherwise, capped
// at the board limit. Fit on 49 solo A100-40GB profiles: R^2 0.984, RMSE 10.0 W.
inline constexpr double kPowerIntercept = 31.8;
inline constexpr double kPowerPerSmact = 230.8;
inline constexpr double kPowerPerDrama = 91.8;
// Idle with a context resident: 52-53 W observed; trace-level intercept 49.5 W.
inline constexpr double kA100IdlePowerW = 50.0;
inline constexpr double kA100MaxPowerW = 400.0;  // A100-SXM4 board limit

// --- memory (§2, §8.2, §10(d,e)) --------------------------------------------------------------------
// CUDA-visible capacity of an A100-40GB: 42,405,855,232 bytes = 40,441 MiB (nvidia-smi shows
// 40,960 MiB total).
inline constexpr MiB kA100_40GB_UsableMiB = 40441;
// Memory visible at the first CUDA use; the smallest peak of any PyTorch training run is 592 MiB.
inline constexpr MiB kContextMiB = 600;
// First activity -> peak: within 30 s for 50/50 workloads; shape unpublished; 5 s linear default.
inline constexpr double kRampSeconds = 5.0;
// Dispatch -> first GPU activity when a workload has no measured value: median of 50 workloads.
inline constexpr double kDefaultStartSeconds = 8.2;

}  // namespace carma::model
