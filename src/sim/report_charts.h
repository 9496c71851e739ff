#pragma once
// The SVG charts of the HTML report (sim/report.h), one function per chart, all pure. Every chart
// is 960 units wide and scales with the page (viewBox, width 100%); the charts over time share
// one TimeAxis and the same left and right margins, so a moment lies at the same x in every chart
// of a page, whichever policy it belongs to.
//
// Text is laid out from an estimate of its box: font size x 0.6 per character, which is what
// a proportional sans-serif needs at most for digits and lower case. Labels that would not fit
// are shortened or left out (the element's tooltip keeps the full text), never overlapped.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time_text.h"
#include "sim/results.h"

namespace carma::sim {

enum class TimelineSeries { Smact, MemoryUsedFrac, Power };

// Upper bound on the steps drawn per GPU line; beyond this the eye cannot tell them apart and
// the page would grow by tens of kilobytes per GPU.
inline constexpr std::size_t kMaxStepsPerLine = 2000;

inline constexpr double kChartWidth = 960;

// The time range every chart over time of one page shows, in seconds of the record's clock.
struct TimeAxis {
    double t0_s = 0;
    double t1_s = 1;
    DurationUnit unit = {};          // of the ticks and of every time on the page
    std::string label = "time (h)";  // the axis title; ticks are `unit`s since t0_s
};

// One axis for all the policies of a comparison: from 0 (the trace's start, or the start of the
// daemon's window) to the latest moment any policy's record reaches (a timeline point, the end
// of an attempt, a completion, a rejection), or the daemon's window length.
TimeAxis shared_time_axis(const Comparison& comparison);

struct StepPoint {
    double t_s = 0;
    double value = 0;  // holds from t_s until the next point; NaN: unknown (a gap in the line)
};

// Horizontal bar chart, one bar per (label, value); `reference` (e.g. the exclusive policy's
// figure) is drawn as a dashed vertical line named with its value in the legend above the plot.
// Bars share one linear scale from 0, so bar lengths are proportional to the values; the value
// labels stand in a column right of the plot, where no line reaches.
std::string svg_bar_chart(const std::string& title,
                          const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit, std::optional<double> reference,
                          const std::string& reference_label = "reference");

// One step line per GPU of `series` over the axis, with a legend. Each line is downsampled to at
// most kMaxStepsPerLine steps. Where `tasks` are given, every attempt that ended out of memory is
// marked on the lines of its GPUs at the crash (a red cross), and every attempt that followed one
// at its start (a red ring). Empty input gives a chart that says "no timeline recorded".
std::string svg_step_lines(const std::string& title, const std::vector<GpuTimeline>& timelines,
                           TimelineSeries series, const TimeAxis& axis,
                           const std::vector<TaskRecord>& tasks = {});

// A Gantt chart of the attempts: one row per GPU (split into lanes where attempts overlap, i.e.
// share the GPU), one bar per attempt and GPU, coloured by task name (task_colour). Attempts
// that ended out of memory have a red outline and a red cross at their end, relaunches a red
// ring at their start, attempts still running a dashed outline up to the axis's end. A bar
// carries its task's name where the name fits, shortened where only part of it does.
std::string svg_gantt(const std::string& title, const PolicyResult& result, const TimeAxis& axis);

// Tasks waiting (queued or waiting for a relaunch) over the axis, as one step line; `y_max` is
// the shared top of the y axis (the largest queue of all policies) so policies compare.
std::string svg_queue_length(const std::string& title, const std::vector<StepPoint>& steps,
                             const TimeAxis& axis, double y_max);

// Charged GPU-hours per user over the axis (fair share, issue 23), one step line per user.
std::string svg_usage_per_user(const std::string& title, const std::vector<UsageSeries>& usage,
                               const TimeAxis& axis);

// Cumulative distributions, one line per series on one shared x axis from 0; values in the
// unit named by `x_label`.
struct CdfSeries {
    std::string label;
    std::vector<double> values;
};
std::string svg_cdf(const std::string& title, const std::vector<CdfSeries>& series,
                    const std::string& x_label);

// --- Building blocks, exposed for tests. ---

// Reduces a piecewise-constant series to at most `max_steps` steps by splitting
// [first point, t_end_s) into equal buckets and keeping each bucket's maximum, so short spikes
// stay visible (widened to one bucket). Points at or after t_end_s are dropped; consecutive
// equal values are merged. Series at or under the limit come back unchanged except for that.
std::vector<StepPoint> downsample_steps(const std::vector<TimelinePoint>& points,
                                        TimelineSeries series, double t_end_s,
                                        std::size_t max_steps = kMaxStepsPerLine);

// The empirical CDF of `values` (non-finite ones dropped): one step per distinct value v,
// holding the fraction of values <= v. Sorted, fractions rising to 1.
std::vector<StepPoint> cdf_steps(std::vector<double> values);

// The number of tasks waiting over [axis.t0_s, axis.t1_s]: a task waits from its submission to
// its first attempt, between an attempt and the next, and after its last attempt (or from its
// submission when it never ran) until it left, unless it completed or that attempt still runs.
std::vector<StepPoint> queue_length_steps(const std::vector<TaskRecord>& tasks,
                                          const TimeAxis& axis);

struct AttemptMarker {
    enum class Kind { OomCrash, Relaunch };
    Kind kind = Kind::OomCrash;
    double t_s = 0;  // the crash, or the start of the relaunched attempt
    int gpu = 0;
    std::string task;
    int attempt = 0;  // 1-based
};

// A marker per GPU of every attempt that ended out of memory and of every attempt that followed
// such an attempt, in task order.
std::vector<AttemptMarker> attempt_markers(const std::vector<TaskRecord>& tasks);

// A fill colour per task name, the same in every chart and every report (a hash of the name), in
// light tones so a dark label on it reads.
std::string task_colour(std::string_view name);

// Escapes & < > " ' so arbitrary names are safe in text and attribute values.
std::string html_escape(std::string_view text);

// Width of `text` at `font_size` by the rule above (0.6 x font size per code point).
double text_width(std::string_view text, double font_size);

}  // namespace carma::sim
