// The charts' SVG primitives (sim/chart_svg.h): text (escaping, widths, shortening), colours,
// the opening <svg> of a chart, the crash and relaunch marks, and the legends.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "sim/chart_svg.h"
#include "sim/report_charts.h"

namespace carma::sim {

namespace chart {

namespace {

constexpr double kLegendRow = 18;
constexpr double kLegendFirstBaseline = 42;

// Tableau 10: distinguishable for most colour-vision deficiencies at line width 1.5.
constexpr std::array<std::string_view, 10> kPalette = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
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

}  // namespace

std::string_view gpu_colour(int gpu) {
    const auto n = static_cast<int>(kPalette.size());
    return kPalette[static_cast<std::size_t>(((gpu % n) + n) % n)];
}

std::string_view series_colour(std::size_t index) {
    return kPalette[index % kPalette.size()];
}
std::string_view series_dash(std::size_t index) {
    return index < kPalette.size() ? "" : "6 3";
}

std::string coord(double v) {
    return fmt::format("{:.1f}", std::isfinite(v) ? v : 0.0);
}

std::size_t code_points(std::string_view s) {
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

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

std::string svg_open(double height, const std::string& title, const TimeAxis* axis) {
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

std::string cross_mark(double x, double y, double half, const std::string& tooltip,
                       std::string_view cls) {
    return fmt::format(
        "<path class=\"{6}\" d=\"M{0} {1}L{2} {3}M{0} {3}L{2} {1}\" stroke=\"{4}\" "
        "stroke-width=\"2.2\" stroke-linecap=\"round\" fill=\"none\"><title>{5}</title></path>",
        coord(x - half), coord(y - half), coord(x + half), coord(y + half), kOomColour,
        html_escape(tooltip), cls);
}

std::string ring_mark(double x, double y, double r, const std::string& tooltip,
                      std::string_view cls) {
    return fmt::format(
        "<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"#fff\" "
        "stroke=\"{}\" stroke-width=\"1.8\"><title>{}</title></circle>",
        cls, coord(x), coord(y), coord(r), kOomColour, html_escape(tooltip));
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

double plot_top(int legend_rows) {
    return legend_rows == 0 ? 36 : kLegendFirstBaseline + (legend_rows - 1) * kLegendRow + 22;
}

}  // namespace chart

// --- The public text helpers of sim/report_charts.h. ---

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
    return static_cast<double>(chart::code_points(text)) * font_size * 0.6;
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

}  // namespace carma::sim
