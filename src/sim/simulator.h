#pragma once
// The discrete-event simulator: replays a trace on a virtual clock through the same
// Scheduler::step the daemon runs, with the device model standing in for GPUs.
//
// Time model:
//   - events (arrival, first GPU activity, end of memory ramp, completion, OOM crash) happen at
//     exact times; between them every rate and metric is constant (memory: linear);
//   - the monitor samples every GPU at whole seconds into a MetricWindow, exactly as the daemon
//     does; a sample at second k sees every event with time <= k;
//   - the scheduler runs at whole seconds while something waits (the daemon's 1-s loop); seconds
//     in which nothing it looks at can have changed are skipped, which changes no decision.

#include <cstdint>
#include <functional>

#include "core/scheduler.h"
#include "model/catalog.h"
#include "model/gpu_type.h"
#include "model/interference.h"
#include "sim/results.h"
#include "sim/trace.h"

namespace carma::sim {

struct SimConfig {
    model::GpuSet gpus;
    model::SharingMode sharing = model::SharingMode::Mps;
    SchedulerConfig scheduler;
    std::size_t window_samples = 30;
    double power_scale = 1.0;       // kappa of interference-model.md §7.4
    double metric_noise_sd = 0.0;   // zero-mean noise on sampled SMACT/SMOCC/DRAMA
    std::uint64_t seed = 1;         // for the noise
    bool record_timelines = false;
    int max_attempts = 100;         // a task crashing this often is given up (failed)
    // Called now and then with the fraction of tasks finished (0..1).
    std::function<void(double)> progress;
};

PolicyResult simulate(const Trace& trace, const model::Catalog& catalog, const SimConfig& config);

}  // namespace carma::sim
