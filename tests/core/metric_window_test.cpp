#include "core/metric_window.h"

#include <cmath>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the window statistics against values worked out by hand.
TEST(MetricWindowTest, SeriesStatsArithmetic) {
    // values 0.1 0.2 0.3 0.4 (W = 4): mean 0.25; sorted positions 0..3;
    // median at 1.5 -> 0.25; p95 at 2.85 -> 0.3 + 0.85*0.1 = 0.385;
    // EMA alpha = 2/5 = 0.4: 0.1 -> 0.14 -> 0.204 -> 0.2824;
    // risk = 0.2*0.25 + 0.2*0.25 + 0.3*0.385 + 0.1*0.25 + 0.2*0.2824 = 0.29698
    SeriesStats s = series_stats({0.1, 0.2, 0.3, 0.4});
    EXPECT_NEAR(s.mean, 0.25, 1e-12);
    EXPECT_NEAR(s.median, 0.25, 1e-12);
    EXPECT_NEAR(s.p95, 0.385, 1e-12);
    EXPECT_NEAR(s.ema, 0.2824, 1e-12);
    EXPECT_NEAR(s.risk, 0.29698, 1e-12);
}

// This test verifies that a constant window has every statistic equal to the constant.
TEST(MetricWindowTest, ConstantSeriesIsItsOwnRisk) {
    SeriesStats s = series_stats(std::vector<double>(30, 0.7));
    EXPECT_NEAR(s.risk, 0.7, 1e-12);
    EXPECT_NEAR(s.ema, 0.7, 1e-12);
    EXPECT_EQ(series_stats({}).risk, 0.0);
}

// This test verifies that the window rolls: only the last W samples count, oldest first.
TEST(MetricWindowTest, RollsOverCapacity) {
    MetricWindow w(3);
    for (int i = 1; i <= 5; ++i) {
        MetricSample s;
        s.smact = i / 10.0;
        s.free_mib = 1000 * i;
        w.push(s);
    }
    ASSERT_TRUE(w.full());
    auto samples = w.samples();
    ASSERT_EQ(samples.size(), 3u);
    EXPECT_DOUBLE_EQ(*samples[0].smact, 0.3);
    EXPECT_DOUBLE_EQ(*samples[2].smact, 0.5);
    WindowStats st = w.stats();
    EXPECT_EQ(st.last_free_mib, 5000);
    EXPECT_EQ(st.available_mib, 5000 - 512);  // last free - 512 MiB reserve
    EXPECT_NEAR(st.smact.mean, 0.4, 1e-12);
}

// This test verifies that the statistics read between pushes are those of the samples pushed so
// far: they are kept for the tick's readers, and a push makes them new.
TEST(MetricWindowTest, StatisticsFollowEveryPush) {
    MetricWindow w(3);
    w.push(MetricSample{.free_mib = 8000, .smact = 0.2});
    const WindowStats before = w.stats();
    EXPECT_EQ(w.stats().samples, 1u);
    w.push(MetricSample{.free_mib = 2000, .smact = 0.8});
    EXPECT_EQ(before.last_free_mib, 8000);
    EXPECT_EQ(w.stats().samples, 2u);
    EXPECT_EQ(w.stats().last_free_mib, 2000);
    EXPECT_NEAR(w.stats().smact.mean, 0.5, 1e-12);
    w.push_repeated(MetricSample{.free_mib = 1000, .smact = 0.1}, 3);
    EXPECT_EQ(w.stats().last_free_mib, 1000);
    EXPECT_NEAR(w.stats().smact.mean, 0.1, 1e-12);
}

// This test verifies that pushing a sample k times equals pushing it once k times, and that
// available memory never goes below zero.
TEST(MetricWindowTest, PushRepeatedMatchesPushes) {
    MetricWindow a(30), b(30);
    MetricSample s1{.free_mib = 100, .smact = 0.2};
    MetricSample s2{.free_mib = 300, .smact = 0.9};
    a.push_repeated(s1, 50);
    a.push_repeated(s2, 7);
    for (int i = 0; i < 50; ++i) {
        b.push(s1);
    }
    for (int i = 0; i < 7; ++i) {
        b.push(s2);
    }
    EXPECT_NEAR(a.stats().smact.risk, b.stats().smact.risk, 1e-12);
    EXPECT_EQ(a.stats().available_mib, 0);  // 300 - 512 clamps at 0
}

// This test verifies that an unknown metric stays unknown: statistics cover only the samples
// that had it, a window that never had it says so (known == 0) instead of reading 0, and the
// newest sample's sources are reported.
TEST(MetricWindowTest, UnknownMetricsAreNotZero) {
    MetricWindow w(4);
    MetricSample a{.free_mib = 1000, .smact = 0.8};
    a.sources.smact = MetricSource::Dcgm;
    MetricSample gap{.free_mib = 1000};  // SMACT missing in this sample
    w.push(a);
    w.push(gap);
    w.push(a);
    const WindowStats st = w.stats();
    EXPECT_EQ(st.smact.known, 2u);
    EXPECT_DOUBLE_EQ(st.smact.mean, 0.8);  // not dragged towards 0 by the gap
    EXPECT_EQ(st.smocc.known, 0u);
    EXPECT_EQ(st.sources.smact, MetricSource::Dcgm);
    EXPECT_EQ(st.sources.smocc, MetricSource::Unavailable);
}

// This test verifies the statistics without the order statistics: memory, samples, sources and
// each series' count and mean are those of stats(); median, p95, EMA and risk are left 0.
TEST(MetricWindowTest, StatsWithoutRiskKeepMemoryAndMeans) {
    MetricWindow w(4);
    MetricSample a{.free_mib = 9000, .smact = 0.1, .util = 0.4};
    a.sources.smact = MetricSource::Dcgm;
    w.push(a);
    w.push(MetricSample{.free_mib = 3000, .smact = 0.3});
    const WindowStats cheap = w.stats_without_order_statistics();
    const WindowStats full = w.stats();
    EXPECT_EQ(cheap.samples, full.samples);
    EXPECT_EQ(cheap.last_free_mib, 3000);
    EXPECT_EQ(cheap.available_mib, full.available_mib);
    EXPECT_EQ(cheap.smact.known, 2u);
    EXPECT_DOUBLE_EQ(cheap.smact.mean, full.smact.mean);
    EXPECT_EQ(cheap.util.known, 1u);
    EXPECT_DOUBLE_EQ(cheap.util.mean, 0.4);
    EXPECT_EQ(cheap.sources.smact, full.sources.smact);
    EXPECT_EQ(cheap.smact.p95, 0.0);
    EXPECT_EQ(cheap.smact.risk, 0.0);
    EXPECT_GT(full.smact.p95, 0.0);
    EXPECT_EQ(series_stats({0.5, 0.7}, false).median, 0.0);
    EXPECT_DOUBLE_EQ(series_stats({0.5, 0.7}, false).mean, 0.6);
}

}  // namespace
}  // namespace carma
