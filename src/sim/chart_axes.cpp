// The charts' axes (sim/chart_svg.h): round tick steps and their labels, where a moment lies on
// a chart over time, and the x and y axes of a plot frame.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/chart_svg.h"

namespace carma::sim::chart {

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

std::string tick_text(double v) {
    return fmt::format("{:g}", std::abs(v) < 1e-12 ? 0.0 : v);
}

std::string percent_label(double v) {
    return fmt::format("{:g}%", std::round(v * 1000) / 10);
}

double axis_span(const TimeAxis& axis) {
    const double span = axis.t1_s - axis.t0_s;
    return span > 0 && std::isfinite(span) ? span : 1.0;
}

double time_x(const Frame& f, const TimeAxis& axis, double t_s) {
    const double u = std::clamp((t_s - axis.t0_s) / axis_span(axis), 0.0, 1.0);
    return f.left + u * f.plot_width();
}

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
    return x_axis(f, axis_span(axis) / axis.unit.seconds, axis.label);
}

}  // namespace carma::sim::chart
