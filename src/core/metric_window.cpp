#include "core/metric_window.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace carma {

double quantile_sorted(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) {
        return 0;
    }
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = static_cast<std::size_t>(std::ceil(pos));
    const double frac = pos - static_cast<double>(lo);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

SeriesStats series_stats(const std::vector<double>& values, bool order_statistics) {
    SeriesStats s;
    s.known = values.size();
    if (values.empty()) {
        return s;
    }
    double sum = 0;
    for (double v : values) {
        sum += v;
    }
    s.mean = sum / static_cast<double>(values.size());
    if (!order_statistics) {
        return s;
    }

    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    s.median = quantile_sorted(sorted, 0.5);
    s.p95 = quantile_sorted(sorted, 0.95);

    // The paper seeds the EMA with the first sample and applies no bias correction.
    const double alpha = 2.0 / (static_cast<double>(values.size()) + 1.0);
    double ema = values.front();
    for (std::size_t i = 1; i < values.size(); ++i) {
        ema = alpha * values[i] + (1 - alpha) * ema;
    }
    s.ema = ema;
    // p50 and median are the same statistic; the paper weights it twice (0.2 + 0.1).
    s.risk = 0.2 * s.mean + 0.2 * s.median + 0.3 * s.p95 + 0.1 * s.median + 0.2 * s.ema;
    return s;
}

MetricWindow::MetricWindow(std::size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

void MetricWindow::push(const MetricSample& sample) {
    ring_[next_] = sample;
    stats_.reset();
    next_ = (next_ + 1) % ring_.size();
    count_ = std::min(count_ + 1, ring_.size());
}

void MetricWindow::push_repeated(const MetricSample& sample, std::size_t count) {
    const std::size_t n = std::min(count, ring_.size());
    for (std::size_t i = 0; i < n; ++i) {
        push(sample);
    }
}

const MetricSample& MetricWindow::last() const {
    if (count_ == 0) {
        throw std::logic_error("MetricWindow::last on an empty window");
    }
    return ring_[(next_ + ring_.size() - 1) % ring_.size()];
}

std::vector<MetricSample> MetricWindow::samples() const {
    std::vector<MetricSample> out;
    out.reserve(count_);
    const std::size_t start = (next_ + ring_.size() - count_) % ring_.size();
    for (std::size_t i = 0; i < count_; ++i) {
        out.push_back(ring_[(start + i) % ring_.size()]);
    }
    return out;
}

const WindowStats& MetricWindow::stats() const {
    if (!stats_) {
        stats_ = compute_stats(true);
    }
    return *stats_;
}

WindowStats MetricWindow::stats_without_order_statistics() const {
    return stats_ ? *stats_ : compute_stats(false);
}

WindowStats MetricWindow::compute_stats(bool order_statistics) const {
    WindowStats w;
    w.samples = count_;
    w.order_statistics = order_statistics;
    if (count_ == 0) {
        return w;
    }
    const std::vector<MetricSample> ordered = samples();
    std::vector<double> smact, smocc, drama, util, power;
    smact.reserve(count_);
    smocc.reserve(count_);
    drama.reserve(count_);
    util.reserve(count_);
    power.reserve(count_);
    auto add = [](std::vector<double>& series, const std::optional<double>& value) {
        if (value) {
            series.push_back(*value);
        }
    };
    for (const MetricSample& s : ordered) {
        add(smact, s.smact);
        add(smocc, s.smocc);
        add(drama, s.drama);
        add(util, s.util);
        add(power, s.power_w);
    }
    w.sources = ordered.back().sources;
    w.last_free_mib = ordered.back().free_mib;
    w.available_mib = std::max<MiB>(0, w.last_free_mib - kFreeMemoryReserveMiB);
    w.smact = series_stats(smact, order_statistics);
    w.smocc = series_stats(smocc, order_statistics);
    w.drama = series_stats(drama, order_statistics);
    w.util = series_stats(util, order_statistics);
    w.power_w = series_stats(power, order_statistics);
    return w;
}

}  // namespace carma
