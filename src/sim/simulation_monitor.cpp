// What is measured of a GPU in a simulated run (sim/simulation.h): the monitor's samples at
// whole seconds into the metric windows the scheduler reads (with the optional noise), the
// timeline points of the report, and the time integrals of energy, activity and memory behind
// the run's figures and the history's activity of each attempt.

#include <algorithm>
#include <cmath>

#include "sim/simulation.h"

namespace carma::sim::engine {

namespace {

bool same_sample(const MetricSample& a, const MetricSample& b) {
    return a == b;
}

}  // namespace

MetricSample Simulation::sample_at(const SimGpu& gpu, double t) {
    MetricSample s;
    double used = 0;
    for (std::size_t i : gpu.residents) {
        used += model::memory_at(resident_memory(i), t);
    }
    s.free_mib = std::max<MiB>(0, config_.gpus.type.usable_mib - static_cast<MiB>(used));
    s.smact = gpu.activity.smact;
    s.smocc = gpu.activity.smocc;
    s.drama = gpu.activity.drama;
    s.util = gpu.activity.util;
    s.power_w = gpu.power_w;
    s.sources = MetricSources::all(MetricSource::Emulated);
    if (config_.metric_noise_sd > 0 && gpu.activity.active) {
        std::normal_distribution<double> noise(0.0, config_.metric_noise_sd);
        s.smact = std::clamp(gpu.activity.smact + noise(rng_), 0.0, 1.0);
        s.smocc = std::clamp(gpu.activity.smocc + noise(rng_), 0.0, 1.0);
        s.drama = std::clamp(gpu.activity.drama + noise(rng_), 0.0, 1.0);
    }
    return s;
}

bool Simulation::memory_changing(const SimGpu& gpu, double from, double to) const {
    for (std::size_t i : gpu.residents) {
        const SimTask& t = tasks_[i];
        if (t.phase != Phase::Active) {
            continue;
        }
        const double ramp_end = t.active_at + model::kRampSeconds;
        if (ramp_end > from && t.active_at <= to) {
            return true;
        }
    }
    return false;
}

void Simulation::flush_samples(std::size_t g, double upto) {
    SimGpu& gpu = gpus_[g];
    const long last = static_cast<long>(std::floor(upto));
    if (last <= gpu.sampled_through) {
        return;
    }
    const long capacity = static_cast<long>(gpu.window.capacity());
    const long first = std::max(gpu.sampled_through + 1, last - capacity + 1);
    gpu.sampled_through = last;
    const bool noisy = config_.metric_noise_sd > 0 && gpu.activity.active;
    if (!noisy && !memory_changing(gpu, static_cast<double>(first), static_cast<double>(last))) {
        const MetricSample s = sample_at(gpu, static_cast<double>(last));
        if (same_sample(s, gpu.last_pushed) && gpu.same_count >= gpu.window.capacity()) {
            return;  // the window already holds nothing but this sample
        }
        const auto count = static_cast<std::size_t>(last - first + 1);
        gpu.window.push_repeated(s, count);
        gpu.same_count = same_sample(s, gpu.last_pushed) ? gpu.same_count + count : count;
        gpu.last_pushed = s;
        gpu.stats_dirty = true;
        return;
    }
    for (long k = first; k <= last; ++k) {
        const MetricSample s = sample_at(gpu, static_cast<double>(k));
        gpu.window.push(s);
        gpu.same_count = same_sample(s, gpu.last_pushed) ? gpu.same_count + 1 : 1;
        gpu.last_pushed = s;
    }
    gpu.stats_dirty = true;
}

bool Simulation::settled(const SimGpu& gpu) const {
    return config_.metric_noise_sd <= 0 || !gpu.activity.active
               ? gpu.same_count >= gpu.window.capacity()
               : false;
}

double Simulation::memory_used(const SimGpu& gpu, double t) const {
    double used = 0;
    for (std::size_t i : gpu.residents) {
        used += model::memory_at(resident_memory(i), t);
    }
    return used;
}

void Simulation::integrate(std::size_t g, double t) {
    SimGpu& gpu = gpus_[g];
    if (!started_) {
        gpu.integrated_to = t;
        return;
    }
    const double dt = t - gpu.integrated_to;
    if (dt <= 0) {
        return;
    }
    const auto cap = static_cast<double>(config_.gpus.type.usable_mib);
    // Memory is linear between events (ramp ends are events), so the trapezoid is exact.
    const double mem = 0.5 * (memory_used(gpu, gpu.integrated_to) + memory_used(gpu, t));
    gpu.energy_j += gpu.power_w * dt;
    gpu.smact_s += gpu.activity.smact * dt;
    gpu.smocc_s += gpu.activity.smocc * dt;
    gpu.memory_frac_s += std::min(1.0, mem / cap) * dt;
    gpu.integrated_to = t;
    std::size_t active = 0;
    for (std::size_t i : gpu.residents) {
        active += tasks_[i].phase == Phase::Active ? 1 : 0;
    }
    // The monitor's samples in (integrated_to - dt, t]: one per whole second, each the true
    // SMACT plus its noise (sample_at). Their sum is drawn at once: n samples of sd s sum to a
    // normal of sd s * sqrt(n), which spares drawing each second of a long quiet span.
    const double samples = std::floor(t) - std::floor(t - dt);
    if (samples <= 0) {
        return;
    }
    double observed = gpu.activity.smact * samples;
    if (config_.metric_noise_sd > 0 && gpu.activity.active) {
        std::normal_distribution<double> noise(0.0, config_.metric_noise_sd * std::sqrt(samples));
        observed = std::clamp(observed + noise(rng_), 0.0, samples);
    }
    for (std::size_t i : gpu.residents) {
        SimTask& task = tasks_[i];
        if (task.phase != Phase::Active) {
            continue;
        }
        double& sum = active == 1 ? task.activity_alone : task.activity_shared;
        double& time = active == 1 ? task.time_alone : task.time_shared;
        sum += observed;
        time += samples;
    }
}

void Simulation::record_timeline(std::size_t g) {
    if (!config_.record_timelines) {
        return;
    }
    SimGpu& gpu = gpus_[g];
    TimelinePoint p;
    p.t_s = now_;
    p.smact = gpu.activity.smact;
    p.smocc = gpu.activity.smocc;
    p.memory_used_frac = memory_used(gpu, now_) / static_cast<double>(config_.gpus.type.usable_mib);
    p.power_w = gpu.power_w;
    p.tasks = static_cast<int>(gpu.residents.size());
    if (!gpu.timeline.points.empty() && gpu.timeline.points.back().t_s == now_) {
        gpu.timeline.points.back() = p;
    } else {
        gpu.timeline.points.push_back(p);
    }
}

}  // namespace carma::sim::engine
