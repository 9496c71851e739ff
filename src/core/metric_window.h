#pragma once
// The monitor's view of one GPU: a rolling window of 1-s samples (30 by default, spec §1.8) and
// the statistics the mapper decides on. The same window is fed by the daemon's sampler and by the
// simulator's virtual sampler.

#include <cstddef>
#include <vector>

#include "core/units.h"

namespace carma {

struct MetricSample {
    MiB free_mib = 0;
    double smact = 0;  // SM active ratio, 0..1 (DCGM 1002)
    double smocc = 0;  // SM occupancy, 0..1 (DCGM 1003)
    double drama = 0;  // DRAM active ratio, 0..1 (DCGM 1005)
    double util = 0;   // nvidia-smi GPU utilisation, 0..1
    double power_w = 0;
};

// Aggregates of one metric over the window.
struct SeriesStats {
    double mean = 0;
    double median = 0;
    double p95 = 0;
    double ema = 0;   // last value of an EMA seeded with the window's first sample, alpha = 2/(W+1)
    double risk = 0;  // the paper's blend: 0.2 mean + 0.2 median + 0.3 p95 + 0.1 p50 + 0.2 EMA
};

// Memory the mapper may plan with: last free minus this reserve (spec §1.8).
inline constexpr MiB kFreeMemoryReserveMiB = 512;
inline constexpr std::size_t kDefaultWindowSamples = 30;

struct WindowStats {
    std::size_t samples = 0;
    MiB last_free_mib = 0;
    MiB available_mib = 0;  // max(0, last_free - 512)
    SeriesStats smact;
    SeriesStats smocc;
    SeriesStats drama;
    SeriesStats util;
    SeriesStats power_w;
};

// Pure statistic over a sequence in sample order (oldest first). Empty input gives zeros.
SeriesStats series_stats(const std::vector<double>& values);

// Linear-interpolated quantile of already sorted values, q in [0,1].
double quantile_sorted(const std::vector<double>& sorted, double q);

class MetricWindow {
public:
    explicit MetricWindow(std::size_t capacity = kDefaultWindowSamples);

    void push(const MetricSample& sample);
    // Same as pushing `sample` `count` times; only the last `capacity` can matter.
    void push_repeated(const MetricSample& sample, std::size_t count);

    std::size_t size() const { return count_; }
    std::size_t capacity() const { return ring_.size(); }
    bool full() const { return count_ == ring_.size(); }
    const MetricSample& last() const;
    // Samples oldest first.
    std::vector<MetricSample> samples() const;
    WindowStats stats() const;

private:
    std::vector<MetricSample> ring_;  // invariant: size() == capacity, first count_ slots valid
    std::size_t next_ = 0;            // slot the next sample goes to
    std::size_t count_ = 0;
};

}  // namespace carma
