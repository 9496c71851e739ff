#pragma once
// The monitor's view of one GPU: a rolling window of 1-s samples (30 by default, spec §1.8) and
// the statistics the mapper decides on. The same window is fed by the daemon's sampler and by the
// simulator's virtual sampler.

#include <cstddef>
#include <optional>
#include <vector>

#include "core/metric_source.h"
#include "core/units.h"

namespace carma {

// A metric no source gives on this GPU is std::nullopt: unknown, never 0. `sources` says where
// each known one came from (a proxy is labelled as one, see metric_source.h).
struct MetricSample {
    MiB free_mib = 0;
    std::optional<double> smact = std::nullopt;  // SM active ratio, 0..1 (DCGM 1002)
    std::optional<double> smocc = std::nullopt;  // SM occupancy, 0..1 (DCGM 1003)
    std::optional<double> drama = std::nullopt;  // DRAM active ratio, 0..1 (DCGM 1005)
    std::optional<double> util = std::nullopt;   // nvidia-smi GPU utilisation, 0..1
    std::optional<double> power_w = std::nullopt;
    MetricSources sources = {};

    friend bool operator==(const MetricSample&, const MetricSample&) = default;
};

// Aggregates of one metric over the samples of the window that know it.
struct SeriesStats {
    std::size_t known = 0;  // samples that had the metric; 0 means unknown (the rest is then 0)
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
    MetricSources sources;  // of the newest sample
    // False from MetricWindow::stats_without_order_statistics: every series' median, p95, EMA
    // and risk are then 0, not measured (core/risk_filter reads such stats as high risk).
    bool order_statistics = true;
};

// Pure statistic over a sequence in sample order (oldest first). Empty input gives zeros.
// Without `order_statistics` only `known` and `mean` are filled (median, p95, EMA and risk stay
// 0): they cost a sort per series, and only the risk filter and the least-utilised score read
// them.
SeriesStats series_stats(const std::vector<double>& values, bool order_statistics = true);

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
    // Kept until the next push: the risk rule, the planner and the API all read one tick's.
    const WindowStats& stats() const;
    // stats() without the order statistics (series_stats): memory, sources and means, for a
    // caller whose policy reads none (PolicySpec::reads_order_statistics; in the simulator
    // they were a quarter of a `carma` run's time). Not kept.
    WindowStats stats_without_order_statistics() const;

private:
    WindowStats compute_stats(bool order_statistics) const;

    std::vector<MetricSample> ring_;  // invariant: size() == capacity, first count_ slots valid
    std::size_t next_ = 0;            // slot the next sample goes to
    std::size_t count_ = 0;
    mutable std::optional<WindowStats> stats_;
};

}  // namespace carma
