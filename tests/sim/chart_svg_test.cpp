// The charts' shared building blocks (sim/chart_svg.h), which the chart tests in report_test.cpp
// only reach through whole charts: round tick steps, tick labels, shortening of labels, the
// time-to-x mapping, legend wrapping and the step path's gaps.
#include "sim/chart_svg.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace carma::sim::chart {
namespace {

TEST(ChartAxes, NiceStepIsOneTwoOrFiveTimesAPowerOfTen) {
    EXPECT_DOUBLE_EQ(nice_step(10, 5), 2);
    EXPECT_DOUBLE_EQ(nice_step(7, 5), 2);
    EXPECT_DOUBLE_EQ(nice_step(0.9, 3), 0.5);
    EXPECT_DOUBLE_EQ(nice_step(4000, 4), 1000);
    EXPECT_DOUBLE_EQ(nice_step(30, 4), 10);
    // No span, or none that is finite: a step of 1 rather than a division by zero.
    EXPECT_DOUBLE_EQ(nice_step(0, 5), 1);
    EXPECT_DOUBLE_EQ(nice_step(-3, 5), 1);
    EXPECT_DOUBLE_EQ(nice_step(std::numeric_limits<double>::quiet_NaN(), 5), 1);
    EXPECT_DOUBLE_EQ(nice_step(std::numeric_limits<double>::infinity(), 5), 1);
}

TEST(ChartAxes, TicksReachTheMaximumDespiteRounding) {
    // 3 x 0.1 is 0.30000000000000004: still the last tick of an axis up to 0.3.
    const std::vector<double> ticks = ticks_up_to(0.3, 0.1);
    ASSERT_EQ(ticks.size(), 4u);
    EXPECT_EQ(tick_text(ticks.back()), "0.3");
    EXPECT_EQ(ticks_up_to(1, 0.25).size(), 5u);
    EXPECT_EQ(ticks_up_to(0, 1).size(), 1u);  // just the origin
}

TEST(ChartAxes, TickAndPercentLabelsAreShort) {
    EXPECT_EQ(tick_text(2), "2");
    EXPECT_EQ(tick_text(-1e-13), "0");
    EXPECT_EQ(tick_text(1500), "1500");
    EXPECT_EQ(percent_label(0.25), "25%");
    EXPECT_EQ(percent_label(0.123), "12.3%");
    EXPECT_EQ(percent_label(1), "100%");
}

TEST(ChartAxes, TimeMapsOntoThePlotAndIsClamped) {
    const Frame f;
    const TimeAxis axis{100, 200, "time (h)"};
    EXPECT_DOUBLE_EQ(time_x(f, axis, 100), f.left);
    EXPECT_DOUBLE_EQ(time_x(f, axis, 150), f.left + f.plot_width() / 2);
    EXPECT_DOUBLE_EQ(time_x(f, axis, 200), f.plot_right());
    EXPECT_DOUBLE_EQ(time_x(f, axis, 0), f.left);
    EXPECT_DOUBLE_EQ(time_x(f, axis, 1e9), f.plot_right());
    // An axis without length still has one of a second.
    EXPECT_DOUBLE_EQ(axis_span(TimeAxis{5, 5, ""}), 1);
    EXPECT_DOUBLE_EQ(axis_span(TimeAxis{0, 3600, ""}), 3600);
}

TEST(ChartText, TruncationCountsCodePointsAndEndsInAnEllipsis) {
    EXPECT_EQ(truncate_label("abcdef", 10), "abcdef");
    EXPECT_EQ(truncate_label("abcdef", 6), "abcdef");
    EXPECT_EQ(truncate_label("abcdef", 4), "abc\u2026");
    EXPECT_EQ(truncate_label("abcdef", 0), "");
    // Two-byte characters are never cut in half.
    EXPECT_EQ(code_points("\u00e9\u00e9\u00e9\u00e9\u00e9"), 5u);
    EXPECT_EQ(truncate_label("\u00e9\u00e9\u00e9\u00e9\u00e9", 3), "\u00e9\u00e9\u2026");
    EXPECT_DOUBLE_EQ(text_width("\u00e9t\u00e9", 10), 18);
}

TEST(ChartText, CoordinatesHaveOneDecimalAndNoNonFiniteValue) {
    EXPECT_EQ(coord(1.25), "1.2");
    EXPECT_EQ(coord(3), "3.0");
    EXPECT_EQ(coord(std::numeric_limits<double>::quiet_NaN()), "0.0");
    EXPECT_EQ(coord(std::numeric_limits<double>::infinity()), "0.0");
}

TEST(ChartLegend, WrapsIntoRowsThatPushThePlotDown) {
    EXPECT_EQ(flow_legend({}, 64, kChartWidth).rows, 0);
    EXPECT_TRUE(flow_legend({}, 64, kChartWidth).svg.empty());
    EXPECT_DOUBLE_EQ(plot_top(0), 36);

    std::vector<LegendItem> one = {{Swatch::Line, "#000", "GPU 0", ""}};
    EXPECT_EQ(flow_legend(one, 64, kChartWidth).rows, 1);

    std::vector<LegendItem> many;
    for (int i = 0; i < 12; ++i) {
        many.push_back(
            {Swatch::Line, "#000", "a rather long legend label " + std::to_string(i), ""});
    }
    const Legend wrapped = flow_legend(many, 64, kChartWidth);
    EXPECT_GT(wrapped.rows, 1);
    EXPECT_GT(plot_top(wrapped.rows), plot_top(1));
    EXPECT_GT(plot_top(1), plot_top(0));
}

TEST(ChartPaths, AnUnknownValueLiftsThePen) {
    const auto same = [](double v) { return v; };
    const std::vector<StepPoint> steps = {
        {0, 1}, {10, std::numeric_limits<double>::quiet_NaN()}, {20, 2}, {25, 3}};
    EXPECT_EQ(step_path_d(steps, same, same, 30), "M0.0 1.0H10.0M20.0 2.0H25.0V3.0H30.0");
    EXPECT_EQ(step_path_d({}, same, same, 30), "");
}

TEST(ChartMarks, ARelaunchIsAnAttemptAfterAnOutOfMemoryCrash) {
    TaskRecord t;
    t.spans = {AttemptSpan{0, 10, {0}, AttemptOutcome::OutOfMemory},
               AttemptSpan{12, 20, {1}, AttemptOutcome::Failed},
               AttemptSpan{25, -1, {1}, AttemptOutcome::Running}};
    EXPECT_FALSE(follows_oom(t, 0));
    EXPECT_TRUE(follows_oom(t, 1));
    EXPECT_FALSE(follows_oom(t, 2));
    EXPECT_EQ(gpu_colour(3), gpu_colour(13));
    EXPECT_NE(gpu_colour(3), gpu_colour(4));
    EXPECT_EQ(series_dash(0), "");
    EXPECT_EQ(series_dash(10), "6 3");
}

}  // namespace
}  // namespace carma::sim::chart
