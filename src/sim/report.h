#pragma once
// The `carma simulate --report DIR` output: one self-contained HTML page (inline CSS and SVG, no
// JavaScript, no external resources) comparing the policies of a run, plus a CSV of the same
// figures. Everything except write_html_report is pure so it can be tested on strings.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "sim/results.h"

namespace carma::sim {

enum class TimelineSeries { Smact, MemoryUsedFrac, Power };

// Upper bound on the steps drawn per GPU line; beyond this the eye cannot tell them apart and
// the page would grow by tens of kilobytes per GPU.
inline constexpr std::size_t kMaxStepsPerLine = 2000;

// The whole HTML document for a comparison.
std::string render_html_report(const Comparison& comparison);

// Horizontal bar chart, one bar per (label, value); `reference` (e.g. the exclusive policy's
// figure) is drawn as a dashed vertical line named `reference_label`. Bars share one linear
// scale from 0, so bar lengths are proportional to the values.
std::string svg_bar_chart(const std::string& title,
                          const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit, std::optional<double> reference,
                          const std::string& reference_label = "reference");

// One step line per GPU of `series` over [0, t_end_s], x axis in hours, with a legend. Each
// line is downsampled to at most kMaxStepsPerLine steps. Empty input gives a chart that says
// "no timeline recorded".
std::string svg_step_lines(const std::string& title, const std::vector<GpuTimeline>& timelines,
                           TimelineSeries series, double t_end_s);

// Writes DIR/index.html and DIR/results.csv (one row per policy, the table's figures), creating
// DIR if needed. Returns the path of index.html; errors (ErrorCode::Io) name the path and the
// system's reason.
Result<std::string> write_html_report(const Comparison& comparison, const std::string& dir);

// --- Building blocks, exposed for tests. ---

struct StepPoint {
    double t_s = 0;
    double value = 0;  // holds from t_s until the next point
};

// Reduces a piecewise-constant series to at most `max_steps` steps by splitting
// [first point, t_end_s) into equal buckets and keeping each bucket's maximum, so short spikes
// stay visible (widened to one bucket). Points at or after t_end_s are dropped; consecutive
// equal values are merged. Series at or under the limit come back unchanged except for that.
std::vector<StepPoint> downsample_steps(const std::vector<TimelinePoint>& points,
                                        TimelineSeries series, double t_end_s,
                                        std::size_t max_steps = kMaxStepsPerLine);

// Escapes & < > " ' so arbitrary names are safe in text and attribute values.
std::string html_escape(std::string_view text);

// The summary table as CSV: a header line, then one line per policy.
std::string render_results_csv(const Comparison& comparison);

}  // namespace carma::sim
