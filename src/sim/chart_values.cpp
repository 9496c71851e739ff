// The charts over values rather than time: horizontal bars (one figure per policy, against a
// reference) and cumulative distributions (one line per policy on a shared x axis).

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "sim/chart_svg.h"
#include "sim/report_charts.h"

namespace carma::sim {

using namespace chart;  // the shared building blocks, sim/chart_svg.h

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
