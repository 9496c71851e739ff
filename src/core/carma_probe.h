#pragma once
// Whether `carma` would start a task now on GPUs as given: step 2 of core/carma.h (the exclusive
// path, else the collocation filters and the selection) for one task, outside a round. For
// fair-share preemption (core/preemption.h): the caller asks it of the waiting head with a running
// task taken out of the views, and stops that task only where the answer is yes. A check of
// memory alone said yes where the head was then turned down by the predicted gain of a busy GPU,
// and the stopped task took its own place back.

#include <span>

#include "core/carma.h"
#include "core/policy.h"
#include "core/task.h"

namespace carma {

// `gpus`: fresh views, their `locked` flags set by the caller (a round recomputes them from its
// warm-up tracker; here nothing does).
bool carma_would_start(const PolicySpec& policy, const TaskSpec& task,
                       std::span<const GpuView> gpus, const PlacementConfig& config,
                       const CarmaConfig& carma);

}  // namespace carma
