#pragma once
// Internal to src/sim: the building blocks the chart files (chart_*.cpp) share, so no chart
// family repeats a colour, a margin or a piece of SVG of another. Not for callers outside the
// part; the charts' interface is sim/report_charts.h.
//
//   chart_svg.cpp     text (escaping, widths, shortening), colours, the <svg> frame, marks, legends
//   chart_axes.cpp    ticks, the plot frame's axes, time -> x
//   chart_series.cpp  the data the charts draw, from the records (pure, no SVG)
//   chart_values.cpp  charts over values: bars and CDFs
//   chart_timelines.cpp  charts over time as lines: per-GPU series and the queue length
//   chart_gantt.cpp   the Gantt chart of the attempts

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sim/report_charts.h"
#include "sim/results.h"

namespace carma::sim::chart {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- Style: one place for the charts' colours and type sizes. ---
inline constexpr std::string_view kFontFamily =
    "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
inline constexpr std::string_view kTextColour = "#333";
inline constexpr std::string_view kMutedColour = "#666";
inline constexpr std::string_view kGridColour = "#e6e6e6";
inline constexpr std::string_view kAxisColour = "#999";
inline constexpr std::string_view kBarColour = "#4e79a7";
inline constexpr std::string_view kOomColour = "#d62728";
inline constexpr double kFont = 12;       // the charts' text
inline constexpr double kSmallFont = 11;  // labels inside Gantt bars
inline constexpr double kTitleFont = 15;

// Keyed by GPU id rather than position so GPU 3 has the same colour in every policy's charts.
std::string_view gpu_colour(int gpu);
// Policies past the tenth repeat a colour, dashed.
std::string_view series_colour(std::size_t index);
std::string_view series_dash(std::size_t index);

// --- Numbers and text. ---

inline double finite_or_zero(double v) {
    return std::isfinite(v) ? v : 0.0;
}

// The larger, an unknown value giving way to a known one.
inline double known_max(double a, double b) {
    return std::isnan(a) ? b : std::isnan(b) ? a : std::max(a, b);
}

// SVG coordinates: a tenth of a unit is below what a screen shows and keeps paths short.
std::string coord(double v);

std::size_t code_points(std::string_view s);

// At most `max_chars` code points, the last one an ellipsis when something was cut.
std::string truncate_label(const std::string& s, std::size_t max_chars);

// --- The chart's frame and text. ---

// The opening <svg> with the chart's title. A chart over time names its axis's range, so a
// reader (or a test) can see that all agree.
std::string svg_open(double height, const std::string& title, const TimeAxis* axis = nullptr);

// A centred grey line of text, e.g. "no data" in an empty plot.
std::string note_text(double x, double y, const std::string& text);

// --- Marks: shapes, never text, so they cannot collide with labels. `cls`: oom-mark or
// relaunch-mark on a chart, legend-mark in a legend. ---

std::string cross_mark(double x, double y, double half, const std::string& tooltip,
                       std::string_view cls = "oom-mark");
std::string ring_mark(double x, double y, double r, const std::string& tooltip,
                      std::string_view cls = "relaunch-mark");

// --- Legends: items flow left to right and wrap, each item's width taken from its label. ---

enum class Swatch { Line, Cross, Ring, OomBar, RunningBar, FailedBar, None };

struct LegendItem {
    Swatch swatch = Swatch::Line;
    std::string colour;
    std::string label;
    std::string dash;
};

struct Legend {
    std::string svg;
    int rows = 0;
};

// The items laid out from x0, wrapping before x_max, below the title.
Legend flow_legend(const std::vector<LegendItem>& items, double x0, double x_max);

// The plot's top below a title and `legend_rows` rows of legend.
double plot_top(int legend_rows);

// --- Axes (chart_axes.cpp). ---

// A 1-2-5 step giving about `target` intervals over [0, span], so tick labels are round.
double nice_step(double span, int target);

// Tick positions 0, step, 2*step, ... up to `max` (the small slack absorbs rounding).
std::vector<double> ticks_up_to(double max, double step);

// "0.30000000000000004" is a tick of 0.1 steps; six significant figures print it as 0.3.
std::string tick_text(double v);

// A fraction as a percentage tick label: 0.25 -> "25%".
std::string percent_label(double v);

// The axis's length in seconds; 1 when it has none.
double axis_span(const TimeAxis& axis);

// The plot area of a chart over time or values. The margins are the same in every chart over
// time so their x axes line up on the page.
struct Frame {
    double left = 64;
    double right = 24;
    double top = 36;
    double plot_height = 180;
    double bottom = 46;
    double plot_width() const { return kChartWidth - left - right; }
    double plot_right() const { return left + plot_width(); }
    double plot_bottom() const { return top + plot_height; }
    double height() const { return plot_bottom() + bottom; }
};

// Where moment `t_s` lies on the frame's x axis (clamped to the plot).
double time_x(const Frame& f, const TimeAxis& axis, double t_s);

// Vertical grid, ticks and labels along the bottom from 0 to `max_value`, and the axis title.
std::string x_axis(const Frame& f, double max_value, const std::string& title);

// The x axis of a chart over time: hours since the axis's start.
std::string time_x_axis(const Frame& f, const TimeAxis& axis);

// Horizontal grid with labels on the left (`label(tick)`), and the rotated axis title.
template <typename Label>
std::string y_axis(const Frame& f, double y_max, double step, Label label,
                   const std::string& title) {
    std::string out;
    for (double tick : ticks_up_to(y_max, step)) {
        const double y = f.plot_bottom() - tick / y_max * f.plot_height;
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>"
            "<text x=\"{4}\" y=\"{5}\" text-anchor=\"end\">{6}</text>",
            coord(f.left), coord(y), coord(f.plot_right()), kGridColour, coord(f.left - 6),
            coord(y + 4), label(tick));
    }
    const double cy = f.top + f.plot_height / 2;
    out += fmt::format(
        "<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\" "
        "fill=\"{1}\">{2}</text>",
        coord(cy), kMutedColour, html_escape(title));
    return out;
}

// A step line as one compact path: a horizontal run to the next change, then a vertical jump;
// an unknown (NaN) value lifts the pen until the next known one.
template <typename XOf, typename YOf>
std::string step_path_d(const std::vector<StepPoint>& steps, XOf x_of, YOf y_of, double x_end) {
    std::string d;
    auto out = std::back_inserter(d);
    bool pen = false;
    for (const StepPoint& p : steps) {
        if (!std::isfinite(p.value)) {
            if (pen) {
                fmt::format_to(out, "H{}", coord(x_of(p.t_s)));
                pen = false;
            }
            continue;
        }
        if (!pen) {
            fmt::format_to(out, "M{} {}", coord(x_of(p.t_s)), coord(y_of(p.value)));
            pen = true;
        } else {
            fmt::format_to(out, "H{}V{}", coord(x_of(p.t_s)), coord(y_of(p.value)));
        }
    }
    if (pen) {
        fmt::format_to(out, "H{}", coord(x_end));
    }
    return d;
}

// --- Attempts (chart_series.cpp), for the markers of the lines and the Gantt bars. ---

// Whether attempt `attempt` (0-based) of `t` followed one that ended out of memory.
bool follows_oom(const TaskRecord& t, std::size_t attempt);

// The tooltip of a crash or relaunch mark.
std::string marker_tooltip(const AttemptMarker& m, const DurationUnit& unit);

}  // namespace carma::sim::chart
