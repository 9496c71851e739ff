#include "sim/report_charts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace carma::sim {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::string_view kFontFamily = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
constexpr std::string_view kTextColour = "#333";
constexpr std::string_view kMutedColour = "#666";
constexpr std::string_view kGridColour = "#e6e6e6";
constexpr std::string_view kAxisColour = "#999";
constexpr std::string_view kBarColour = "#4e79a7";
constexpr std::string_view kOomColour = "#d62728";
constexpr double kFont = 12;       // the charts' text
constexpr double kSmallFont = 11;  // labels inside Gantt bars
constexpr double kTitleFont = 15;
constexpr double kLegendRow = 18;
constexpr double kLegendFirstBaseline = 42;

// Tableau 10: distinguishable for most colour-vision deficiencies at line width 1.5.
constexpr std::array<std::string_view, 10> kPalette = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};

// Keyed by GPU id rather than position so GPU 3 has the same colour in every policy's charts.
std::string_view gpu_colour(int gpu) {
    const auto n = static_cast<int>(kPalette.size());
    return kPalette[static_cast<std::size_t>(((gpu % n) + n) % n)];
}

// Policies past the tenth repeat a colour, dashed.
std::string_view series_colour(std::size_t index) {
    return kPalette[index % kPalette.size()];
}
std::string_view series_dash(std::size_t index) {
    return index < kPalette.size() ? "" : "6 3";
}

double finite_or_zero(double v) {
    return std::isfinite(v) ? v : 0.0;
}

// SVG coordinates: a tenth of a unit is below what a screen shows and keeps paths short.
std::string coord(double v) {
    return fmt::format("{:.1f}", std::isfinite(v) ? v : 0.0);
}

// A 1-2-5 step giving about `target` intervals over [0, span], so tick labels are round.
double nice_step(double span, int target) {
    if (!(span > 0) || !std::isfinite(span)) {
        return 1.0;
    }
    const double raw = span / target;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / magnitude;
    const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nice * magnitude;
}

// Tick positions 0, step, 2*step, ... up to `max` (the small slack absorbs rounding).
std::vector<double> ticks_up_to(double max, double step) {
    std::vector<double> ticks;
    for (int i = 0; i < 1000; ++i) {
        const double t = i * step;
        if (t > max * (1 + 1e-9) + 1e-12) {
            break;
        }
        ticks.push_back(t);
    }
    return ticks;
}

// "0.30000000000000004" is a tick of 0.1 steps; six significant figures print it as 0.3.
std::string tick_text(double v) {
    return fmt::format("{:g}", std::abs(v) < 1e-12 ? 0.0 : v);
}

std::size_t code_points(std::string_view s) {
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// At most `max_chars` code points, the last one an ellipsis when something was cut.
std::string truncate_label(const std::string& s, std::size_t max_chars) {
    if (max_chars == 0) {
        return "";
    }
    if (code_points(s) <= max_chars) {
        return s;
    }
    std::size_t chars = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const bool starts_code_point = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
        if (starts_code_point && ++chars == max_chars) {
            return s.substr(0, i) + "\u2026";
        }
    }
    return s;
}

double axis_span(const TimeAxis& axis) {
    const double span = axis.t1_s - axis.t0_s;
    return span > 0 && std::isfinite(span) ? span : 1.0;
}

// A chart over time names its axis's range, so a reader (or a test) can see that all agree.
std::string svg_open(double height, const std::string& title, const TimeAxis* axis = nullptr) {
    return fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" role=\"img\"{7} "
        "font-family=\"{2}\" font-size=\"{3:g}\" fill=\"{4}\"><title>{5}</title>"
        "<text x=\"0\" y=\"20\" font-size=\"{6:g}\" font-weight=\"600\">{5}</text>",
        coord(kChartWidth), coord(height), kFontFamily, kFont, kTextColour, html_escape(title),
        kTitleFont,
        axis == nullptr
            ? std::string()
            : fmt::format(" class=\"timechart\" data-t0-s=\"{:.1f}\" data-t1-s=\"{:.1f}\"",
                          axis->t0_s, axis->t0_s + axis_span(*axis)));
}

std::string note_text(double x, double y, const std::string& text) {
    return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#777\">{}</text>",
                       coord(x), coord(y), html_escape(text));
}

// ---------------------------------------------------------------------------------------------
// Marks: shapes, never text, so they cannot collide with labels.

// `cls`: oom-mark on a chart, legend-mark in a legend.
std::string cross_mark(double x, double y, double half, const std::string& tooltip,
                       std::string_view cls = "oom-mark") {
    return fmt::format(
        "<path class=\"{6}\" d=\"M{0} {1}L{2} {3}M{0} {3}L{2} {1}\" stroke=\"{4}\" "
        "stroke-width=\"2.2\" stroke-linecap=\"round\" fill=\"none\"><title>{5}</title></path>",
        coord(x - half), coord(y - half), coord(x + half), coord(y + half), kOomColour,
        html_escape(tooltip), cls);
}

std::string ring_mark(double x, double y, double r, const std::string& tooltip,
                      std::string_view cls = "relaunch-mark") {
    return fmt::format(
        "<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"#fff\" "
        "stroke=\"{}\" stroke-width=\"1.8\"><title>{}</title></circle>",
        cls, coord(x), coord(y), coord(r), kOomColour, html_escape(tooltip));
}

// ---------------------------------------------------------------------------------------------
// Legends: items flow left to right and wrap, each item's width taken from its label.

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

constexpr double kSwatchWidth = 16;
constexpr double kSwatchGap = 6;
constexpr double kItemGap = 18;
constexpr std::size_t kMaxLegendChars = 40;

std::string swatch_svg(const LegendItem& item, double x, double y_mid) {
    switch (item.swatch) {
        case Swatch::Line:
            return fmt::format(
                "<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"{3}\" "
                "stroke-width=\"2.5\"{4}/>",
                coord(x), coord(x + kSwatchWidth), coord(y_mid), item.colour,
                item.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", item.dash));
        case Swatch::Cross:
            return cross_mark(x + kSwatchWidth / 2, y_mid, 4, item.label, "legend-mark");
        case Swatch::Ring:
            return ring_mark(x + kSwatchWidth / 2, y_mid, 4, item.label, "legend-mark");
        case Swatch::OomBar:
        case Swatch::RunningBar:
        case Swatch::FailedBar: {
            const std::string_view stroke =
                item.swatch == Swatch::OomBar ? kOomColour : std::string_view("#333");
            const std::string_view dash =
                item.swatch == Swatch::RunningBar ? " stroke-dasharray=\"3 2\"" : "";
            return fmt::format(
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"10\" fill=\"#ccc\" "
                "fill-opacity=\"0.6\" stroke=\"{}\" stroke-width=\"1.5\"{}/>",
                coord(x), coord(y_mid - 5), coord(kSwatchWidth), stroke, dash);
        }
        case Swatch::None:
            return "";
    }
    return "";
}

Legend flow_legend(const std::vector<LegendItem>& items, double x0, double x_max) {
    Legend out;
    if (items.empty()) {
        return out;
    }
    out.rows = 1;
    double x = x0;
    for (const LegendItem& item : items) {
        const std::string label = truncate_label(item.label, kMaxLegendChars);
        const double swatch = item.swatch == Swatch::None ? 0 : kSwatchWidth + kSwatchGap;
        const double w = swatch + text_width(label, kFont);
        if (x > x0 && x + w > x_max) {
            ++out.rows;
            x = x0;
        }
        const double baseline = kLegendFirstBaseline + (out.rows - 1) * kLegendRow;
        out.svg += swatch_svg(item, x, baseline - 4);
        out.svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>", coord(x + swatch),
                               coord(baseline), html_escape(label));
        x += w + kItemGap;
    }
    return out;
}

// The plot's top below a title and `legend_rows` rows of legend.
double plot_top(int legend_rows) {
    return legend_rows == 0 ? 36 : kLegendFirstBaseline + (legend_rows - 1) * kLegendRow + 22;
}

// ---------------------------------------------------------------------------------------------
// Frames: the plot area of a chart over time or values. The margins are the same in every chart
// over time so their x axes line up on the page.

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

double time_x(const Frame& f, const TimeAxis& axis, double t_s) {
    const double u = std::clamp((t_s - axis.t0_s) / axis_span(axis), 0.0, 1.0);
    return f.left + u * f.plot_width();
}

// Vertical grid, ticks and labels along the bottom, in `unit_scale` units of the value (hours
// for time), and the axis title.
std::string x_axis(const Frame& f, double max_value, const std::string& title) {
    std::string out;
    const double step = nice_step(max_value, 8);
    for (double tick : ticks_up_to(max_value, step)) {
        const double x = f.left + tick / max_value * f.plot_width();
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>"
            "<line x1=\"{0}\" y1=\"{2}\" x2=\"{0}\" y2=\"{4}\" stroke=\"{5}\"/>"
            "<text x=\"{0}\" y=\"{6}\" text-anchor=\"middle\">{7}</text>",
            coord(x), coord(f.top), coord(f.plot_bottom()), kGridColour, coord(f.plot_bottom() + 5),
            kAxisColour, coord(f.plot_bottom() + 18), tick_text(tick));
    }
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>"
        "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\" fill=\"{6}\">{7}</text>",
        coord(f.left), coord(f.plot_bottom()), coord(f.plot_right()), kAxisColour,
        coord(f.left + f.plot_width() / 2), coord(f.plot_bottom() + 37), kMutedColour,
        html_escape(title));
    return out;
}

std::string time_x_axis(const Frame& f, const TimeAxis& axis) {
    return x_axis(f, axis_span(axis) / 3600.0, axis.label);
}

// Horizontal grid with labels on the left, and the rotated axis title.
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

std::string percent_label(double v) {
    return fmt::format("{:g}%", std::round(v * 1000) / 10);
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

// ---------------------------------------------------------------------------------------------
// GPU series

double series_value(const TimelinePoint& p, TimelineSeries series) {
    switch (series) {
        case TimelineSeries::Smact:
            return p.smact;
        case TimelineSeries::MemoryUsedFrac:
            return p.memory_used_frac;
        case TimelineSeries::Power:
            return p.power_w;
    }
    return kNaN;
}

bool same_value(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}

// The larger, an unknown value giving way to a known one.
double known_max(double a, double b) {
    return std::isnan(a) ? b : std::isnan(b) ? a : std::max(a, b);
}

bool is_fraction(TimelineSeries series) {
    return series != TimelineSeries::Power;
}

std::string y_axis_title(TimelineSeries series) {
    switch (series) {
        case TimelineSeries::Smact:
            return "SM active";
        case TimelineSeries::MemoryUsedFrac:
            return "memory used";
        case TimelineSeries::Power:
            return "power (W)";
    }
    return "";
}

bool has_points(const std::vector<GpuTimeline>& timelines) {
    return std::any_of(timelines.begin(), timelines.end(),
                       [](const GpuTimeline& t) { return !t.points.empty(); });
}

// The value of a step line just before `t` (what a crash at `t` cut), or from `t` on.
double value_before(const std::vector<StepPoint>& steps, double t) {
    double v = kNaN;
    for (const StepPoint& p : steps) {
        if (p.t_s >= t) {
            break;
        }
        v = p.value;
    }
    return std::isnan(v) && !steps.empty() ? steps.front().value : v;
}

double value_from(const std::vector<StepPoint>& steps, double t) {
    double v = kNaN;
    for (const StepPoint& p : steps) {
        if (p.t_s > t) {
            break;
        }
        v = p.value;
    }
    return v;
}

std::string marker_tooltip(const AttemptMarker& m) {
    return m.kind == AttemptMarker::Kind::OomCrash
               ? fmt::format("{}: attempt {} out of memory on GPU {} at {:.2f} h", m.task,
                             m.attempt, m.gpu, m.t_s / 3600.0)
               : fmt::format("{}: relaunched (attempt {}) on GPU {} at {:.2f} h", m.task, m.attempt,
                             m.gpu, m.t_s / 3600.0);
}

// ---------------------------------------------------------------------------------------------
// Gantt

struct GanttBar {
    const TaskRecord* task = nullptr;
    std::size_t attempt = 0;  // index into task->spans
    double t0 = 0;
    double t1 = 0;
    int lane = 0;
};

bool follows_oom(const TaskRecord& t, std::size_t attempt) {
    return attempt > 0 && t.spans[attempt - 1].outcome == AttemptOutcome::OutOfMemory;
}

std::string task_title(const TaskRecord& t) {
    std::string who;
    if (t.id >= 0) {
        who = fmt::format("#{}", t.id);
    }
    if (!t.user.empty()) {
        who += (who.empty() ? "" : ", ") + t.user;
    }
    return who.empty() ? t.name : fmt::format("{} ({})", t.name, who);
}

std::string outcome_class(AttemptOutcome o) {
    switch (o) {
        case AttemptOutcome::Succeeded:
            return "succeeded";
        case AttemptOutcome::OutOfMemory:
            return "oom";
        case AttemptOutcome::Running:
            return "running";
        default:
            return "failed";
    }
}

constexpr double kLane = 19;
constexpr double kBarHeight = 15;
constexpr double kRowPad = 4;

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string html_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char ch : text) {
        switch (ch) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += ch;
        }
    }
    return out;
}

double text_width(std::string_view text, double font_size) {
    return static_cast<double>(code_points(text)) * font_size * 0.6;
}

std::string task_colour(std::string_view name) {
    // FNV-1a: stable across runs and platforms, unlike std::hash.
    std::uint32_t h = 2166136261u;
    for (char c : name) {
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    }
    // Golden-angle spread of the hue; light tones so a dark label reads on every bar.
    const unsigned hue = static_cast<unsigned>((static_cast<std::uint64_t>(h) * 137u) % 360u);
    const unsigned light = 68 + (h >> 16) % 12;
    return fmt::format("hsl({},{}%,{}%)", hue, 55 + (h >> 8) % 20, light);
}

TimeAxis shared_time_axis(const Comparison& c) {
    TimeAxis axis;
    if (c.kind == RecordKind::DaemonHistory && c.span_s > 0 && std::isfinite(c.span_s)) {
        axis.t1_s = c.span_s;
        return axis;
    }
    double end = 0;
    const auto reach = [&end](double t) {
        if (std::isfinite(t)) {
            end = std::max(end, t);
        }
    };
    for (const PolicyResult& r : c.results) {
        for (const GpuTimeline& g : r.timelines) {
            if (!g.points.empty()) {
                reach(g.points.back().t_s);
            }
        }
        for (const TaskRecord& t : r.tasks) {
            reach(t.submit_s);
            reach(t.finish_s);
            reach(t.left_s);
            for (const AttemptSpan& s : t.spans) {
                reach(s.start_s);
                reach(s.end_s);
            }
        }
    }
    axis.t1_s = end > 0 ? end : 1.0;
    return axis;
}

std::vector<StepPoint> downsample_steps(const std::vector<TimelinePoint>& input,
                                        TimelineSeries series, double t_end_s,
                                        std::size_t max_steps) {
    // results.h produces sorted timelines; sorting a copy otherwise keeps this total.
    const auto by_time = [](const TimelinePoint& a, const TimelinePoint& b) {
        return a.t_s < b.t_s;
    };
    std::vector<TimelinePoint> sorted;
    const std::vector<TimelinePoint>* points = &input;
    if (!std::is_sorted(input.begin(), input.end(), by_time)) {
        sorted = input;
        std::stable_sort(sorted.begin(), sorted.end(), by_time);
        points = &sorted;
    }

    std::vector<StepPoint> out;
    const auto push = [&out](double t, double v) {
        if (out.empty() || !same_value(out.back().value, v)) {
            out.push_back({t, v});
        }
    };
    const std::size_t n = points->size();
    if (n == 0 || max_steps == 0 || !((*points)[0].t_s < t_end_s)) {
        return out;
    }
    if (n <= max_steps) {
        for (const auto& p : *points) {
            if (p.t_s >= t_end_s) {
                break;
            }
            push(p.t_s, series_value(p, series));
        }
        return out;
    }

    const double t0 = (*points)[0].t_s;
    const double width = (t_end_s - t0) / static_cast<double>(max_steps);
    std::size_t i = 0;
    double current = series_value((*points)[0], series);  // the value holding at time `lo`
    for (std::size_t b = 0; b < max_steps && i < n; ++b) {
        const double lo = t0 + static_cast<double>(b) * width;
        const double hi = b + 1 == max_steps ? t_end_s : lo + width;
        for (; i < n && (*points)[i].t_s <= lo; ++i) {
            current = series_value((*points)[i], series);
        }
        double bucket_max = current;
        for (; i < n && (*points)[i].t_s < hi; ++i) {
            current = series_value((*points)[i], series);
            bucket_max = known_max(bucket_max, current);
        }
        push(lo, bucket_max);
    }
    return out;
}

std::vector<StepPoint> cdf_steps(std::vector<double> values) {
    values.erase(
        std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
        values.end());
    std::sort(values.begin(), values.end());
    std::vector<StepPoint> out;
    const auto n = static_cast<double>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i + 1 < values.size() && values[i + 1] == values[i]) {
            continue;  // the last of equal values carries their common fraction
        }
        out.push_back({values[i], static_cast<double>(i + 1) / n});
    }
    return out;
}

std::vector<StepPoint> queue_length_steps(const std::vector<TaskRecord>& tasks,
                                          const TimeAxis& axis) {
    const double t0 = axis.t0_s;
    const double t1 = axis.t0_s + axis_span(axis);
    std::vector<std::pair<double, int>> changes;
    const auto wait = [&](double from, double to) {
        from = std::max(from, t0);
        to = std::min(to, t1);
        if (std::isfinite(from) && std::isfinite(to) && from < to) {
            changes.emplace_back(from, +1);
            changes.emplace_back(to, -1);
        }
    };
    for (const TaskRecord& t : tasks) {
        const double left = t.left_s >= 0 ? t.left_s : t.finish_s >= 0 ? t.finish_s : t1;
        if (t.spans.empty()) {
            wait(t.submit_s, left);
            continue;
        }
        wait(t.submit_s, t.spans.front().start_s);
        for (std::size_t k = 0; k + 1 < t.spans.size(); ++k) {
            if (t.spans[k].end_s >= 0) {
                wait(t.spans[k].end_s, t.spans[k + 1].start_s);
            }
        }
        const AttemptSpan& last = t.spans.back();
        if (last.outcome != AttemptOutcome::Running && last.end_s >= 0 && t.finish_s < 0) {
            wait(last.end_s, left);
        }
    }
    std::sort(changes.begin(), changes.end());
    std::vector<StepPoint> out{{t0, 0}};
    int waiting = 0;
    for (std::size_t i = 0; i < changes.size();) {
        const double t = changes[i].first;
        if (t >= t1) {
            break;  // what ends with the axis needs no step
        }
        for (; i < changes.size() && changes[i].first == t; ++i) {
            waiting += changes[i].second;
        }
        if (out.back().t_s == t) {
            out.back().value = waiting;
        } else if (out.back().value != waiting) {
            out.push_back({t, static_cast<double>(waiting)});
        }
    }
    // A change at t0 may have been folded into the first step and then undone by a later one.
    std::vector<StepPoint> merged;
    for (const StepPoint& p : out) {
        if (merged.empty() || merged.back().value != p.value) {
            merged.push_back(p);
        }
    }
    return merged;
}

std::vector<AttemptMarker> attempt_markers(const std::vector<TaskRecord>& tasks) {
    std::vector<AttemptMarker> out;
    for (const TaskRecord& t : tasks) {
        for (std::size_t k = 0; k < t.spans.size(); ++k) {
            const AttemptSpan& s = t.spans[k];
            const int attempt = static_cast<int>(k) + 1;
            if (follows_oom(t, k)) {
                for (int g : s.gpus) {
                    out.push_back({AttemptMarker::Kind::Relaunch, s.start_s, g, t.name, attempt});
                }
            }
            if (s.outcome == AttemptOutcome::OutOfMemory && s.end_s >= 0) {
                for (int g : s.gpus) {
                    out.push_back({AttemptMarker::Kind::OomCrash, s.end_s, g, t.name, attempt});
                }
            }
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Bar chart

std::string svg_bar_chart(const std::string& title,
                          const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit, std::optional<double> reference,
                          const std::string& reference_label) {
    constexpr std::size_t kMaxBarLabelChars = 28;
    constexpr double kRow = 26;
    constexpr double kBar = 18;
    const bool has_reference = reference && std::isfinite(*reference);

    double data_max = 0;
    for (const auto& [label, value] : bars) {
        data_max = std::max(data_max, finite_or_zero(value));
    }
    if (has_reference) {
        data_max = std::max(data_max, *reference);
    }
    // All zero still gets a 0..1 axis rather than a division by zero.
    const double span = data_max > 0 ? data_max : 1.0;
    const double step = nice_step(span, 6);
    const double axis_max = std::ceil(span / step - 1e-9) * step;
    const auto value_text = [&unit](double v) {
        return (std::isfinite(v) ? fmt::format("{:.2f}", v) : std::string("n/a")) +
               (unit.empty() ? "" : " " + unit);
    };

    // Three columns: names, the plot, the values. No line of the plot reaches the value column.
    double name_width = 0;
    double value_width = 0;
    for (const auto& [label, value] : bars) {
        name_width =
            std::max(name_width, text_width(truncate_label(label, kMaxBarLabelChars), kFont));
        value_width = std::max(value_width, text_width(value_text(value), kFont));
    }
    Frame f;
    f.left = std::clamp(name_width + 16, 70.0, 260.0);
    f.right = value_width + 20;

    std::vector<LegendItem> legend_items;
    if (has_reference) {
        legend_items.push_back(
            {Swatch::Line, "#222", reference_label + ": " + value_text(*reference), "6 4"});
    }
    const Legend legend = flow_legend(legend_items, f.left, kChartWidth);
    f.top = plot_top(legend.rows);
    const double rows = static_cast<double>(std::max<std::size_t>(bars.size(), 1));
    f.plot_height = rows * kRow;

    std::string out = svg_open(f.height(), title);
    out += legend.svg;
    out += x_axis(f, axis_max, unit);
    if (bars.empty()) {
        out += note_text(f.left + f.plot_width() / 2, f.top + kRow / 2 + 4, "no data");
    }
    for (std::size_t i = 0; i < bars.size(); ++i) {
        const auto& [label, value] = bars[i];
        const double y = f.top + static_cast<double>(i) * kRow + (kRow - kBar) / 2;
        const double w = std::max(0.0, finite_or_zero(value)) / axis_max * f.plot_width();
        out += fmt::format(
            "<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}</text>"
            "<rect class=\"bar\" x=\"{3}\" y=\"{4}\" width=\"{5}\" height=\"{6}\" fill=\"{7}\">"
            "<title>{8}: {9}</title></rect>"
            "<text class=\"value\" x=\"{10}\" y=\"{1}\" text-anchor=\"end\">{9}</text>",
            coord(f.left - 8), coord(y + kBar / 2 + 4),
            html_escape(truncate_label(label, kMaxBarLabelChars)), coord(f.left), coord(y),
            coord(w), coord(kBar), kBarColour, html_escape(label), html_escape(value_text(value)),
            coord(kChartWidth - 4));
    }
    if (has_reference) {
        const double x = f.left + std::max(0.0, *reference) / axis_max * f.plot_width();
        out += fmt::format(
            "<line class=\"reference\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#222\" "
            "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"><title>{3}</title></line>",
            coord(x), coord(f.top - 2), coord(f.plot_bottom()),
            html_escape(reference_label + ": " + value_text(*reference)));
    }
    return out + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// Step lines per GPU

std::string svg_step_lines(const std::string& title, const std::vector<GpuTimeline>& timelines,
                           TimelineSeries series, const TimeAxis& axis,
                           const std::vector<TaskRecord>& tasks) {
    Frame f;
    if (!has_points(timelines)) {
        return svg_open(f.height(), title) +
               note_text(f.left + f.plot_width() / 2, f.top + f.plot_height / 2,
                         "no timeline recorded") +
               "</svg>";
    }
    const double t_end = axis.t0_s + axis_span(axis);
    std::vector<std::vector<StepPoint>> lines;
    lines.reserve(timelines.size());
    for (const auto& timeline : timelines) {
        lines.push_back(downsample_steps(timeline.points, series, t_end));
    }
    const std::vector<AttemptMarker> markers = attempt_markers(tasks);

    std::vector<LegendItem> items;
    for (const auto& timeline : timelines) {
        items.push_back({Swatch::Line, std::string(gpu_colour(timeline.gpu)),
                         fmt::format("GPU {}", timeline.gpu), ""});
    }
    const auto has = [&markers](AttemptMarker::Kind kind) {
        return std::any_of(markers.begin(), markers.end(),
                           [kind](const AttemptMarker& m) { return m.kind == kind; });
    };
    if (has(AttemptMarker::Kind::OomCrash)) {
        items.push_back({Swatch::Cross, "", "out-of-memory crash", ""});
    }
    if (has(AttemptMarker::Kind::Relaunch)) {
        items.push_back({Swatch::Ring, "", "relaunch", ""});
    }
    const Legend legend = flow_legend(items, f.left, kChartWidth);
    f.top = plot_top(legend.rows);

    double data_max = 0;
    for (const auto& line : lines) {
        for (const auto& p : line) {
            data_max = known_max(data_max, p.value);
        }
    }
    // Fractions always get the full 0..100% axis so charts of different policies compare at a
    // glance; power scales to the data.
    const double span = is_fraction(series) ? std::max(1.0, data_max) : std::max(data_max, 1.0);
    const double y_step = nice_step(span, 5);
    const double y_max = std::ceil(span / y_step - 1e-9) * y_step;

    const auto x_of = [&](double t) { return time_x(f, axis, t); };
    const auto y_of = [&](double v) {
        return f.plot_bottom() - std::clamp(v / y_max, 0.0, 1.0) * f.plot_height;
    };

    std::string out = svg_open(f.height(), title, &axis);
    out += legend.svg;
    out += y_axis(
        f, y_max, y_step,
        [series](double v) { return is_fraction(series) ? percent_label(v) : tick_text(v); },
        y_axis_title(series));
    out += time_x_axis(f, axis);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string d = step_path_d(lines[i], x_of, y_of, x_of(t_end));
        if (d.empty()) {
            continue;
        }
        out += fmt::format(
            "<path class=\"step\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
            "stroke-opacity=\"0.85\" stroke-linejoin=\"round\"><title>GPU {}</title></path>",
            d, gpu_colour(timelines[i].gpu), timelines[i].gpu);
    }
    // Marks last, above every line.
    for (const AttemptMarker& m : markers) {
        const auto line = std::find_if(timelines.begin(), timelines.end(),
                                       [&m](const GpuTimeline& g) { return g.gpu == m.gpu; });
        double v = kNaN;
        if (line != timelines.end()) {
            const auto& steps = lines[static_cast<std::size_t>(line - timelines.begin())];
            v = m.kind == AttemptMarker::Kind::OomCrash ? value_before(steps, m.t_s)
                                                        : value_from(steps, m.t_s);
        }
        const double y = std::isfinite(v) ? y_of(v) : f.top + 6;
        out += m.kind == AttemptMarker::Kind::OomCrash
                   ? cross_mark(x_of(m.t_s), y, 5, marker_tooltip(m))
                   : ring_mark(x_of(m.t_s), y, 4.5, marker_tooltip(m));
    }
    return out + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// Gantt

std::string svg_gantt(const std::string& title, const PolicyResult& r, const TimeAxis& axis) {
    const double t_end = axis.t0_s + axis_span(axis);
    // Bars per GPU, then lanes: an attempt takes the first lane free at its start.
    std::map<int, std::vector<GanttBar>> rows;
    for (const GpuTimeline& g : r.timelines) {
        rows[g.gpu];
    }
    bool any_oom = false, any_relaunch = false, any_running = false, any_failed = false;
    for (const TaskRecord& t : r.tasks) {
        for (std::size_t k = 0; k < t.spans.size(); ++k) {
            const AttemptSpan& s = t.spans[k];
            const double end = s.end_s >= 0 ? s.end_s : t_end;
            if (end < axis.t0_s || s.start_s > t_end) {
                continue;
            }
            any_oom = any_oom || s.outcome == AttemptOutcome::OutOfMemory;
            any_relaunch = any_relaunch || follows_oom(t, k);
            any_running = any_running || s.outcome == AttemptOutcome::Running;
            any_failed = any_failed || outcome_class(s.outcome) == "failed";
            for (int g : s.gpus) {
                rows[g].push_back({&t, k, s.start_s, std::max(end, s.start_s), 0});
            }
        }
    }
    std::map<int, int> lanes;
    for (auto& [gpu, bars] : rows) {
        std::stable_sort(bars.begin(), bars.end(), [](const GanttBar& a, const GanttBar& b) {
            return a.t0 != b.t0 ? a.t0 < b.t0 : a.t1 < b.t1;
        });
        std::vector<double> lane_end;
        for (GanttBar& b : bars) {
            std::size_t lane = 0;
            while (lane < lane_end.size() && lane_end[lane] > b.t0) {
                ++lane;
            }
            if (lane == lane_end.size()) {
                lane_end.push_back(b.t1);
            } else {
                lane_end[lane] = b.t1;
            }
            b.lane = static_cast<int>(lane);
        }
        lanes[gpu] = std::max<int>(1, static_cast<int>(lane_end.size()));
    }

    Frame f;
    if (rows.empty()) {
        return svg_open(f.height(), title) +
               note_text(f.left + f.plot_width() / 2, f.top + f.plot_height / 2,
                         "no attempt recorded") +
               "</svg>";
    }
    std::vector<LegendItem> items = {{Swatch::None, "", "bar colour: task name", ""}};
    if (any_oom) {
        items.push_back({Swatch::OomBar, "", "attempt ended out of memory", ""});
        items.push_back({Swatch::Cross, "", "out-of-memory crash", ""});
    }
    if (any_relaunch) {
        items.push_back({Swatch::Ring, "", "relaunch", ""});
    }
    if (any_failed) {
        items.push_back({Swatch::FailedBar, "", "failed, cancelled, timed out or lost", ""});
    }
    if (any_running) {
        items.push_back({Swatch::RunningBar, "", "still running", ""});
    }
    const Legend legend = flow_legend(items, f.left, kChartWidth);
    f.top = plot_top(legend.rows);
    double height = 0;
    for (const auto& [gpu, n] : lanes) {
        height += n * kLane + 2 * kRowPad;
    }
    f.plot_height = height;

    const auto x_of = [&](double t) { return time_x(f, axis, t); };
    std::string out = svg_open(f.height(), title, &axis);
    out += legend.svg;
    out += time_x_axis(f, axis);
    double row_top = f.top;
    for (const auto& [gpu, bars] : rows) {
        const double row_height = lanes[gpu] * kLane + 2 * kRowPad;
        out += fmt::format(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">GPU {}</text>"
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>",
            coord(f.left - 8), coord(row_top + row_height / 2 + 4), gpu, coord(f.left),
            coord(row_top + row_height), coord(f.plot_right()), coord(row_top + row_height),
            kGridColour);
        std::string marks;
        for (const GanttBar& b : bars) {
            const TaskRecord& t = *b.task;
            const AttemptSpan& s = t.spans[b.attempt];
            const double x0 = x_of(b.t0);
            const double x1 = x_of(b.t1);
            const double w = std::max(x1 - x0, 1.0);
            const double y = row_top + kRowPad + b.lane * kLane + (kLane - kBarHeight) / 2;
            const double mid = y + kBarHeight / 2;
            const bool oom = s.outcome == AttemptOutcome::OutOfMemory;
            const bool relaunch = follows_oom(t, b.attempt);
            const std::string cls = outcome_class(s.outcome);
            std::string style;
            if (oom) {
                style = fmt::format(" fill-opacity=\"0.55\" stroke=\"{}\" stroke-width=\"1.5\"",
                                    kOomColour);
            } else if (cls == "running") {
                style = " stroke=\"#333\" stroke-width=\"1\" stroke-dasharray=\"3 2\"";
            } else if (cls == "failed") {
                style = " fill-opacity=\"0.7\" stroke=\"#333\" stroke-width=\"1.5\"";
            }
            const std::string tooltip =
                fmt::format("{} attempt {} on GPU {}: {:.2f}\u2013{} h, {}", task_title(t),
                            b.attempt + 1, gpu, (s.start_s - axis.t0_s) / 3600.0,
                            s.end_s >= 0 ? fmt::format("{:.2f}", (s.end_s - axis.t0_s) / 3600.0)
                                         : std::string("now"),
                            to_string(s.outcome));
            out += fmt::format(
                "<rect class=\"attempt {}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                "rx=\"2\" fill=\"{}\"{}><title>{}</title></rect>",
                cls, coord(x0), coord(y), coord(w), coord(kBarHeight), task_colour(t.name), style,
                html_escape(tooltip));
            // The name where it fits between the marks, shortened where only part of it does.
            const double text_left = x0 + (relaunch ? 10 : 3);
            const double text_right = x0 + w - (oom ? 10 : 3);
            const auto max_chars = static_cast<std::size_t>(
                std::max(0.0, (text_right - text_left) / (kSmallFont * 0.6)));
            const std::string label = code_points(t.name) <= max_chars ? t.name
                                      : max_chars >= 4 ? truncate_label(t.name, max_chars)
                                                       : std::string();
            if (!label.empty()) {
                out += fmt::format(
                    "<text class=\"bar-label\" x=\"{}\" y=\"{}\" font-size=\"{:g}\" fill=\"#111\" "
                    "pointer-events=\"none\">{}</text>",
                    coord(text_left), coord(mid + 4), kSmallFont, html_escape(label));
            }
            const int number = static_cast<int>(b.attempt) + 1;
            if (oom) {
                const AttemptMarker crash{AttemptMarker::Kind::OomCrash, s.end_s, gpu, t.name,
                                          number};
                marks += cross_mark(x0 + w - 5, mid, 3, marker_tooltip(crash));
            }
            if (relaunch) {
                const AttemptMarker again{AttemptMarker::Kind::Relaunch, s.start_s, gpu, t.name,
                                          number};
                marks += ring_mark(x0 + 5, mid, 3, marker_tooltip(again));
            }
        }
        out += marks;
        row_top += row_height;
    }
    return out + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// Queue length

std::string svg_queue_length(const std::string& title, const std::vector<StepPoint>& steps,
                             const TimeAxis& axis, double y_max_in) {
    Frame f;
    f.plot_height = 120;
    double data_max = 0;
    for (const StepPoint& p : steps) {
        data_max = known_max(data_max, p.value);
    }
    const double span = std::max({1.0, data_max, finite_or_zero(y_max_in)});
    const double y_step = std::max(1.0, nice_step(span, 4));  // whole tasks
    const double y_max = std::ceil(span / y_step - 1e-9) * y_step;
    const double t_end = axis.t0_s + axis_span(axis);
    const auto x_of = [&](double t) { return time_x(f, axis, t); };
    const auto y_of = [&](double v) {
        return f.plot_bottom() - std::clamp(v / y_max, 0.0, 1.0) * f.plot_height;
    };
    std::string out = svg_open(f.height(), title, &axis);
    out += y_axis(f, y_max, y_step, tick_text, "tasks waiting");
    out += time_x_axis(f, axis);
    const std::string d = step_path_d(steps, x_of, y_of, x_of(t_end));
    if (!d.empty()) {
        out += fmt::format(
            "<path class=\"queue\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
            "stroke-linejoin=\"round\"><title>tasks waiting</title></path>",
            d, kBarColour);
    }
    return out + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// CDF

std::string svg_cdf(const std::string& title, const std::vector<CdfSeries>& series,
                    const std::string& x_label) {
    Frame f;
    std::vector<std::vector<StepPoint>> cdfs;
    double data_max = 0;
    bool any = false;
    for (const CdfSeries& s : series) {
        cdfs.push_back(cdf_steps(s.values));
        if (!cdfs.back().empty()) {
            any = true;
            data_max = std::max(data_max, cdfs.back().back().t_s);
        }
    }
    std::vector<LegendItem> items;
    for (std::size_t i = 0; i < series.size(); ++i) {
        items.push_back({Swatch::Line, std::string(series_colour(i)),
                         series[i].label + (cdfs[i].empty() ? " (none)" : ""),
                         std::string(series_dash(i))});
    }
    const Legend legend = flow_legend(items, f.left, kChartWidth);
    f.top = plot_top(legend.rows);
    if (!any) {
        return svg_open(f.height(), title) + legend.svg +
               note_text(f.left + f.plot_width() / 2, f.top + f.plot_height / 2,
                         "no completed task") +
               "</svg>";
    }
    const double span = data_max > 0 ? data_max : 1.0;
    const double x_step = nice_step(span, 8);
    const double x_max = std::ceil(span / x_step - 1e-9) * x_step;
    const auto x_of = [&](double v) {
        return f.left + std::clamp(v / x_max, 0.0, 1.0) * f.plot_width();
    };
    const auto y_of = [&](double frac) { return f.plot_bottom() - frac * f.plot_height; };

    std::string out = svg_open(f.height(), title);
    out += legend.svg;
    out += y_axis(f, 1.0, 0.25, percent_label, "tasks at or below");
    out += x_axis(f, x_max, x_label);
    for (std::size_t i = 0; i < cdfs.size(); ++i) {
        if (cdfs[i].empty()) {
            continue;
        }
        std::string d = fmt::format("M{} {}", coord(x_of(0)), coord(y_of(0)));
        auto it = std::back_inserter(d);
        for (const StepPoint& p : cdfs[i]) {
            fmt::format_to(it, "H{}V{}", coord(x_of(p.t_s)), coord(y_of(p.value)));
        }
        fmt::format_to(it, "H{}", coord(x_of(x_max)));
        const std::string_view dash = series_dash(i);
        out += fmt::format(
            "<path class=\"cdf\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" "
            "stroke-linejoin=\"round\"{}><title>{}</title></path>",
            d, series_colour(i),
            dash.empty() ? std::string() : fmt::format(" stroke-dasharray=\"{}\"", dash),
            html_escape(series[i].label));
    }
    return out + "</svg>";
}

}  // namespace carma::sim
