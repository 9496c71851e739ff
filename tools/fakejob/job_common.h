#pragma once
// What the emulated and the CUDA fake job share, so that both live the same life: the same
// memory ramp, the same progress lines on stdout (which the daemon's tests and users read).

#include "core/units.h"
#include "model/catalog.h"

namespace carma::fakejob {

// Monotonic wall seconds; only differences mean anything.
double now_s();

// The memory the model says the job holds `model_t` seconds after its first GPU activity.
MiB ramp_memory(const model::WorkloadProfile& profile, double model_t);

// Prints a progress line when the last (at `last_report`, updated) is old enough, or the final
// line and "done" once `fraction` reaches 1. True when the work is done.
bool report_progress(double fraction, double speed, double now, double& last_report);

}  // namespace carma::fakejob
