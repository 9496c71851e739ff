// The charts over time drawn as step lines: one series per GPU (SM activity, memory or power)
// with the attempts' crashes and relaunches marked, and the number of tasks waiting.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/chart_svg.h"
#include "sim/report_charts.h"

namespace carma::sim {

using namespace chart;  // the shared building blocks, sim/chart_svg.h

namespace {

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

}  // namespace

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
                   ? cross_mark(x_of(m.t_s), y, 5, marker_tooltip(m, axis.unit))
                   : ring_mark(x_of(m.t_s), y, 4.5, marker_tooltip(m, axis.unit));
    }
    return out + "</svg>";
}

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

std::string svg_usage_per_user(const std::string& title, const std::vector<UsageSeries>& usage,
                               const TimeAxis& axis) {
    Frame f;
    std::vector<std::vector<StepPoint>> lines;
    double data_max = 0;
    for (const UsageSeries& u : usage) {
        std::vector<StepPoint> steps{{axis.t0_s, 0}};
        for (const auto& [t, gpu_h] : u.points) {
            steps.push_back({t, gpu_h});
            data_max = known_max(data_max, gpu_h);
        }
        lines.push_back(std::move(steps));
    }
    if (lines.empty()) {
        return svg_open(f.height(), title) +
               note_text(f.left + f.plot_width() / 2, f.top + f.plot_height / 2,
                         "no usage charged") +
               "</svg>";
    }
    std::vector<LegendItem> items;
    for (std::size_t i = 0; i < usage.size(); ++i) {
        items.push_back({Swatch::Line, std::string(series_colour(i)),
                         usage[i].user.empty() ? std::string("(no user)") : usage[i].user,
                         std::string(series_dash(i))});
    }
    const Legend legend = flow_legend(items, f.left, kChartWidth);
    f.top = plot_top(legend.rows);
    const double span = std::max(data_max, 1e-3);
    const double y_step = nice_step(span, 5);
    const double y_max = std::ceil(span / y_step - 1e-9) * y_step;
    const double t_end = axis.t0_s + axis_span(axis);
    const auto x_of = [&](double t) { return time_x(f, axis, t); };
    const auto y_of = [&](double v) {
        return f.plot_bottom() - std::clamp(v / y_max, 0.0, 1.0) * f.plot_height;
    };
    std::string out = svg_open(f.height(), title, &axis);
    out += legend.svg;
    out += y_axis(f, y_max, y_step, tick_text, "GPU-hours charged");
    out += time_x_axis(f, axis);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string d = step_path_d(lines[i], x_of, y_of, x_of(t_end));
        if (d.empty()) {
            continue;
        }
        out += fmt::format(
            "<path class=\"usage\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-dasharray=\"{}\" "
            "stroke-width=\"1.5\" stroke-linejoin=\"round\"><title>{}</title></path>",
            d, series_colour(i), series_dash(i), html_escape(items[i].label));
    }
    return out + "</svg>";
}

}  // namespace carma::sim
