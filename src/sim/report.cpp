#include "sim/report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <system_error>

#include <fmt/format.h>

namespace carma::sim {

namespace {

constexpr std::string_view kExclusivePolicy = "exclusive";
constexpr std::string_view kFontFamily = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
constexpr std::string_view kTextColour = "#333";
constexpr std::string_view kGridColour = "#e6e6e6";
constexpr std::string_view kAxisColour = "#999";
constexpr std::string_view kBarColour = "#4e79a7";

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

double finite_or_zero(double v) {
    return std::isfinite(v) ? v : 0.0;
}

// SVG coordinates: a tenth of a pixel is below what a screen shows and keeps paths short.
std::string coord(double v) {
    return fmt::format("{:.1f}", v);
}

// Enough decimals for about three significant figures at this magnitude: what a reader
// compares; more is noise.
int decimals_for(double magnitude) {
    const double a = std::abs(magnitude);
    return a >= 100 || a == 0 ? 0 : a >= 10 ? 1 : 2;
}

std::string format_fixed(double v, int decimals) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "n/a";
}

std::string format_value(double v) {
    return format_fixed(v, decimals_for(v));
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
    for (int i = 0;; ++i) {
        const double t = i * step;
        if (t > max * (1 + 1e-9) + 1e-12) {
            break;
        }
        ticks.push_back(t);
    }
    return ticks;
}

// Truncates to `max_chars` code points so a long policy name cannot push a chart off the page;
// the full name stays available in the element's tooltip.
std::string truncate_label(const std::string& s, std::size_t max_chars) {
    std::size_t chars = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const bool starts_code_point = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
        if (starts_code_point && ++chars == max_chars) {
            // Only cut if there is more than one code point left after this one.
            std::size_t rest = 0;
            for (std::size_t j = i + 1; j < s.size(); ++j) {
                rest += (static_cast<unsigned char>(s[j]) & 0xC0) != 0x80 ? 1 : 0;
            }
            return rest == 0 ? s : s.substr(0, i) + "\u2026";
        }
    }
    return s;
}

std::size_t code_points(const std::string& s) {
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string svg_open(double width, double height, const std::string& title) {
    return fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
        "height=\"{1}\" role=\"img\" font-family=\"{2}\" font-size=\"12\" fill=\"{3}\">"
        "<title>{4}</title>"
        "<text x=\"0\" y=\"18\" font-size=\"15\" font-weight=\"600\">{4}</text>",
        coord(width), coord(height), kFontFamily, kTextColour, html_escape(title));
}

// ---------------------------------------------------------------------------------------------
// Bar chart

struct BarLayout {
    double width = 560;      // two bar charts fit side by side in the page width
    double label_width = 0;  // left margin holding the policy names
    double right = 90;       // room for the value label at the end of the longest bar
    double top = 46;
    double row = 26;
    double bar = 18;
    double bottom = 42;
    int decimals = 2;  // shared by all value labels so they line up and compare
    double plot_width() const { return width - label_width - right; }
};

constexpr std::size_t kMaxBarLabelChars = 28;

BarLayout bar_layout(const std::vector<std::pair<std::string, double>>& bars) {
    BarLayout layout;
    std::size_t longest = 0;
    for (const auto& [label, value] : bars) {
        longest = std::max(longest, std::min(code_points(label), kMaxBarLabelChars));
    }
    // About 7 px per character at font-size 12.
    layout.label_width = std::clamp(static_cast<double>(longest) * 7.0 + 14.0, 70.0, 220.0);
    return layout;
}

std::string bar_axis(const BarLayout& l, double plot_bottom, double axis_max, double step,
                     const std::string& unit) {
    std::string out;
    for (double tick : ticks_up_to(axis_max, step)) {
        const double x = l.label_width + tick / axis_max * l.plot_width();
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>"
            "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\">{5:g}</text>",
            coord(x), coord(l.top), coord(plot_bottom), kGridColour, coord(plot_bottom + 16), tick);
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\">{}</text>",
                       coord(l.label_width + l.plot_width() / 2), coord(plot_bottom + 34),
                       html_escape(unit));
    return out;
}

std::string bar_row(const BarLayout& l, std::size_t index, const std::string& label, double value,
                    double axis_max, const std::string& unit) {
    const double y = l.top + static_cast<double>(index) * l.row + (l.row - l.bar) / 2;
    const double v = std::max(0.0, finite_or_zero(value));
    const double w = v / axis_max * l.plot_width();
    const std::string value_text =
        format_fixed(value, l.decimals) + (unit.empty() ? "" : " " + unit);
    return fmt::format(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}</text>"
        "<rect class=\"bar\" x=\"{3}\" y=\"{4}\" width=\"{5}\" height=\"{6}\" fill=\"{7}\">"
        "<title>{8}: {9}</title></rect>"
        "<text x=\"{10}\" y=\"{1}\">{9}</text>",
        coord(l.label_width - 8), coord(y + l.bar / 2 + 4),
        html_escape(truncate_label(label, kMaxBarLabelChars)), coord(l.label_width), coord(y),
        coord(w), coord(l.bar), kBarColour, html_escape(label), html_escape(value_text),
        coord(l.label_width + w + 6));
}

std::string reference_line(const BarLayout& l, double plot_bottom, double reference,
                           double axis_max, const std::string& label, const std::string& unit) {
    const double x = l.label_width + std::max(0.0, reference) / axis_max * l.plot_width();
    const std::string text =
        label + " " + format_fixed(reference, l.decimals) + (unit.empty() ? "" : " " + unit);
    return fmt::format(
        "<line class=\"reference\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#222\" "
        "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\" font-size=\"11\">{4}</text>",
        coord(x), coord(l.top - 4), coord(plot_bottom), coord(l.top - 8), html_escape(text));
}

// ---------------------------------------------------------------------------------------------
// Step lines

struct StepLayout {
    double width = 720;
    double left = 58;
    double right = 16;
    double top = 0;  // depends on the number of legend rows
    double plot_height = 190;
    double bottom = 44;
    double legend_item = 78;
    double plot_width() const { return width - left - right; }
    double plot_bottom() const { return top + plot_height; }
    double height() const { return plot_bottom() + bottom; }
};

double series_value(const TimelinePoint& p, TimelineSeries series) {
    switch (series) {
        case TimelineSeries::Smact:
            return finite_or_zero(p.smact);
        case TimelineSeries::MemoryUsedFrac:
            return finite_or_zero(p.memory_used_frac);
        case TimelineSeries::Power:
            return finite_or_zero(p.power_w);
    }
    return 0.0;
}

bool is_fraction(TimelineSeries series) {
    return series != TimelineSeries::Power;
}

std::string y_axis_label(TimelineSeries series) {
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

std::string y_tick_label(double v, TimelineSeries series) {
    return is_fraction(series) ? fmt::format("{:g}%", std::round(v * 1000) / 10)
                               : fmt::format("{:g}", v);
}

// Fractions always get the full 0..100% axis so charts of different policies compare at a
// glance; power scales to the data.
double y_axis_max(const std::vector<std::vector<StepPoint>>& lines, TimelineSeries series,
                  double* step) {
    double data_max = 0;
    for (const auto& line : lines) {
        for (const auto& p : line) {
            data_max = std::max(data_max, p.value);
        }
    }
    const double span = is_fraction(series) ? std::max(1.0, data_max) : data_max;
    *step = nice_step(span, 5);
    return std::ceil(span / *step - 1e-9) * *step;
}

std::string step_legend(const StepLayout& l, const std::vector<GpuTimeline>& timelines) {
    const auto per_row = std::max(1, static_cast<int>(l.plot_width() / l.legend_item));
    std::string out;
    for (std::size_t i = 0; i < timelines.size(); ++i) {
        const double x =
            l.left + static_cast<double>(static_cast<int>(i) % per_row) * l.legend_item;
        const double y = 38 + static_cast<double>(static_cast<int>(i) / per_row) * 18;
        out += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/>"
            "<text x=\"{}\" y=\"{}\">GPU {}</text>",
            coord(x), coord(y - 4), gpu_colour(timelines[i].gpu), coord(x + 19), coord(y),
            timelines[i].gpu);
    }
    return out;
}

std::string step_axes(const StepLayout& l, double t_end_h, double y_max, double y_step,
                      TimelineSeries series) {
    std::string out;
    for (double tick : ticks_up_to(y_max, y_step)) {
        const double y = l.plot_bottom() - tick / y_max * l.plot_height;
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>"
            "<text x=\"{4}\" y=\"{5}\" text-anchor=\"end\">{6}</text>",
            coord(l.left), coord(y), coord(l.left + l.plot_width()), kGridColour, coord(l.left - 6),
            coord(y + 4), y_tick_label(tick, series));
    }
    for (double tick : ticks_up_to(t_end_h, nice_step(t_end_h, 6))) {
        const double x = l.left + tick / t_end_h * l.plot_width();
        out += fmt::format(
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>"
            "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\">{5:g}</text>",
            coord(x), coord(l.plot_bottom()), coord(l.plot_bottom() + 5), kAxisColour,
            coord(l.plot_bottom() + 18), tick);
    }
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>"
        "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\" fill=\"#666\">time (h)</text>"
        "<text transform=\"translate(14 {6}) rotate(-90)\" text-anchor=\"middle\" "
        "fill=\"#666\">{7}</text>",
        coord(l.left), coord(l.plot_bottom()), coord(l.left + l.plot_width()), kAxisColour,
        coord(l.left + l.plot_width() / 2), coord(l.plot_bottom() + 36),
        coord(l.top + l.plot_height / 2), y_axis_label(series));
    return out;
}

// A step line as one compact path: horizontal run to the next change, then a vertical jump.
std::string step_path(const StepLayout& l, const std::vector<StepPoint>& steps, int gpu,
                      double t_end_s, double y_max) {
    if (steps.empty()) {
        return "";
    }
    const auto x_of = [&](double t_s) {
        return l.left + std::clamp(t_s / t_end_s, 0.0, 1.0) * l.plot_width();
    };
    const auto y_of = [&](double v) {
        return l.plot_bottom() - std::clamp(v / y_max, 0.0, 1.0) * l.plot_height;
    };
    std::string d =
        fmt::format("M{} {}", coord(x_of(steps.front().t_s)), coord(y_of(steps.front().value)));
    auto out = std::back_inserter(d);
    for (std::size_t i = 1; i < steps.size(); ++i) {
        fmt::format_to(out, "H{}V{}", coord(x_of(steps[i].t_s)), coord(y_of(steps[i].value)));
    }
    fmt::format_to(out, "H{}", coord(x_of(t_end_s)));
    return fmt::format(
        "<path class=\"step\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
        "stroke-opacity=\"0.85\" stroke-linejoin=\"round\"><title>GPU {}</title></path>",
        d, gpu_colour(gpu), gpu);
}

double last_point_time(const std::vector<GpuTimeline>& timelines) {
    double t = 0;
    for (const auto& timeline : timelines) {
        if (!timeline.points.empty()) {
            t = std::max(t, finite_or_zero(timeline.points.back().t_s));
        }
    }
    return t;
}

bool has_points(const std::vector<GpuTimeline>& timelines) {
    return std::any_of(timelines.begin(), timelines.end(),
                       [](const GpuTimeline& t) { return !t.points.empty(); });
}

// ---------------------------------------------------------------------------------------------
// Summary table and CSV: one column list drives both so they cannot disagree.

enum class Better { Lower, Higher, Neutral, NoRatio };

struct Column {
    std::string_view header;
    std::string_view csv_name;
    int decimals;
    Better better;
    double (*value)(const PolicyResult&);
};

const std::array<Column, 12> kColumns = {{
    {"Makespan (h)", "makespan_h", 2, Better::Lower,
     [](const PolicyResult& r) { return r.makespan_s / 3600.0; }},
    {"Energy (MJ)", "energy_mj", 2, Better::Lower,
     [](const PolicyResult& r) { return r.energy_j / 1e6; }},
    {"Mean JCT (min)", "mean_jct_min", 1, Better::Lower,
     [](const PolicyResult& r) { return r.mean_jct_s / 60.0; }},
    {"p95 JCT (min)", "p95_jct_min", 1, Better::Lower,
     [](const PolicyResult& r) { return r.p95_jct_s / 60.0; }},
    {"Mean wait (min)", "mean_wait_min", 1, Better::Lower,
     [](const PolicyResult& r) { return r.mean_wait_s / 60.0; }},
    {"OOM crashes", "oom_crashes", 0, Better::NoRatio,
     [](const PolicyResult& r) { return static_cast<double>(r.oom_crashes); }},
    {"Attempts", "attempts", 0, Better::NoRatio,
     [](const PolicyResult& r) { return static_cast<double>(r.attempts); }},
    {"Tasks completed", "tasks_completed", 0, Better::NoRatio,
     [](const PolicyResult& r) { return static_cast<double>(r.tasks_completed); }},
    {"Tasks rejected", "tasks_rejected", 0, Better::NoRatio,
     [](const PolicyResult& r) { return static_cast<double>(r.tasks_rejected); }},
    {"Mean SMACT (%)", "mean_smact_pct", 1, Better::Higher,
     [](const PolicyResult& r) { return r.mean_smact * 100.0; }},
    {"Mean SMOCC (%)", "mean_smocc_pct", 1, Better::Higher,
     [](const PolicyResult& r) { return r.mean_smocc * 100.0; }},
    {"Mean memory used (%)", "mean_memory_used_pct", 1, Better::Neutral,
     [](const PolicyResult& r) { return r.mean_memory_used_frac * 100.0; }},
}};

const PolicyResult* find_exclusive(const Comparison& c) {
    const auto it = std::find_if(c.results.begin(), c.results.end(), [](const PolicyResult& r) {
        return r.policy == kExclusivePolicy;
    });
    return it == c.results.end() ? nullptr : &*it;
}

// nullopt where a ratio would mislead: no baseline, or a zero/undefined baseline.
std::optional<double> ratio_to(const Column& col, const PolicyResult& r,
                               const PolicyResult* exclusive) {
    if (exclusive == nullptr || col.better == Better::NoRatio) {
        return std::nullopt;
    }
    const double base = col.value(*exclusive);
    const double v = col.value(r);
    if (!std::isfinite(base) || !std::isfinite(v) || base == 0) {
        return std::nullopt;
    }
    return v / base;
}

std::string_view ratio_class(Better better, double ratio) {
    constexpr double kSame = 0.005;  // within half a percent reads as "no change"
    if (better == Better::Neutral || std::abs(ratio - 1) <= kSame) {
        return "ratio";
    }
    const bool improved = better == Better::Lower ? ratio < 1 : ratio > 1;
    return improved ? "ratio better" : "ratio worse";
}

std::string table_cell(const Column& col, const PolicyResult& r, const PolicyResult* exclusive) {
    std::string cell = "<td>" + format_fixed(col.value(r), col.decimals);
    if (&r != exclusive) {
        if (const auto ratio = ratio_to(col, r, exclusive)) {
            cell += fmt::format("<span class=\"{}\">{:.2f}\u00d7</span>",
                                ratio_class(col.better, *ratio), *ratio);
        }
    }
    return cell + "</td>";
}

std::string summary_table(const Comparison& c) {
    const PolicyResult* exclusive = find_exclusive(c);
    std::string out = "<div class=\"table-wrap\"><table>";
    if (exclusive != nullptr) {
        out +=
            "<caption>Small figures are ratios to <b>exclusive</b>: "
            "<span class=\"better\">green</span> is better, "
            "<span class=\"worse\">red</span> is worse.</caption>";
    }
    out += "<thead><tr><th>Policy</th>";
    for (const auto& col : kColumns) {
        out += fmt::format("<th>{}</th>", col.header);
    }
    out += "</tr></thead><tbody>";
    for (const auto& r : c.results) {
        out += fmt::format("<tr{}><td>{}</td>", &r == exclusive ? " class=\"baseline\"" : "",
                           html_escape(r.policy));
        for (const auto& col : kColumns) {
            out += table_cell(col, r, exclusive);
        }
        out += "</tr>";
    }
    return out + "</tbody></table></div>";
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) {
        return s;
    }
    std::string quoted = "\"";
    for (char ch : s) {
        quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    }
    return quoted + "\"";
}

std::string csv_number(double v, int decimals) {
    if (!std::isfinite(v)) {
        return "";
    }
    // Integers stay integers; other figures keep more precision than the table for re-analysis.
    return decimals == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.6g}", v);
}

// ---------------------------------------------------------------------------------------------
// Page

constexpr std::string_view kCss = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1200px; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
.kicker { color: #777; text-transform: uppercase; font-size: .75rem; letter-spacing: .08em;
          margin: 0; }
h1 { font-size: 1.7rem; margin: .2rem 0 .3rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .4rem; border-bottom: 1px solid #ddd;
     padding-bottom: .2rem; }
.meta { color: #555; margin: .2rem 0 1rem; }
.meta b { color: #222; }
nav a { margin-right: .8rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: .9rem; }
caption { caption-side: bottom; text-align: left; color: #666; font-size: .8rem;
          padding-top: .4rem; }
th, td { padding: .35rem .6rem; border-bottom: 1px solid #e5e5e5; text-align: right;
         vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f4f4f4; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafafa; }
tr.baseline td:first-child { font-weight: 600; }
.ratio { display: block; font-size: .75rem; color: #777; }
.better { color: #2a7d2a; }
.worse { color: #b3261e; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem 2.5rem; align-items: flex-start;
          margin: 1rem 0; }
svg { max-width: 100%; height: auto; }
.empty { color: #777; font-style: italic; }
footer { margin-top: 3rem; color: #777; font-size: .8rem; }
)";

std::string or_unknown(const std::string& s) {
    return s.empty() ? "unknown" : s;
}

std::string page_header(const Comparison& c) {
    const std::string trace = html_escape(or_unknown(c.trace));
    const std::string gpus = html_escape(or_unknown(c.gpus));
    const std::string sharing = html_escape(or_unknown(c.sharing));
    std::string out = fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>CARMA simulation: {0} on {1} ({2})</title><style>{3}</style></head><body>\n"
        "<header><p class=\"kicker\">CARMA simulation report</p>"
        "<h1>{0} on {1}, {2} sharing</h1>"
        "<p class=\"meta\">Trace <b>{0}</b> \u00b7 GPUs <b>{1}</b> \u00b7 sharing mode "
        "<b>{2}</b> \u00b7 {4} {5}</p>",
        trace, gpus, sharing, kCss, c.results.size(),
        c.results.size() == 1 ? "policy" : "policies");
    if (c.results.size() > 1) {
        out += "<nav>Policies: ";
        for (std::size_t i = 0; i < c.results.size(); ++i) {
            out +=
                fmt::format("<a href=\"#policy-{}\">{}</a>", i, html_escape(c.results[i].policy));
        }
        out += "</nav>";
    }
    return out + "</header>\n";
}

std::string comparison_charts(const Comparison& c) {
    const PolicyResult* exclusive = find_exclusive(c);
    std::vector<std::pair<std::string, double>> makespan;
    std::vector<std::pair<std::string, double>> energy;
    for (const auto& r : c.results) {
        makespan.emplace_back(r.policy, r.makespan_s / 3600.0);
        energy.emplace_back(r.policy, r.energy_j / 1e6);
    }
    std::optional<double> makespan_ref;
    std::optional<double> energy_ref;
    if (exclusive != nullptr) {
        makespan_ref = exclusive->makespan_s / 3600.0;
        energy_ref = exclusive->energy_j / 1e6;
    }
    return "<div class=\"charts\">" +
           svg_bar_chart("Makespan", makespan, "h", makespan_ref, std::string(kExclusivePolicy)) +
           svg_bar_chart("Energy", energy, "MJ", energy_ref, std::string(kExclusivePolicy)) +
           "</div>\n";
}

// The x axis must cover the whole run even when the last timeline point is earlier than the
// last completion (or the run starts after t = 0).
double timeline_end_s(const PolicyResult& r) {
    return std::max(finite_or_zero(r.makespan_s), last_point_time(r.timelines));
}

std::string policy_section(const PolicyResult& r, std::size_t index) {
    std::string out = fmt::format(
        "<section id=\"policy-{}\"><h2>{}</h2><p class=\"meta\">makespan <b>{} h</b> \u00b7 "
        "energy <b>{} MJ</b> \u00b7 <b>{}</b> OOM crashes \u00b7 <b>{}</b> tasks completed, "
        "<b>{}</b> rejected \u00b7 mean SMACT <b>{:.1f}%</b></p>",
        index, html_escape(r.policy), format_value(r.makespan_s / 3600.0),
        format_value(r.energy_j / 1e6), r.oom_crashes, r.tasks_completed, r.tasks_rejected,
        finite_or_zero(r.mean_smact) * 100.0);
    if (!has_points(r.timelines)) {
        return out + "<p class=\"empty\">No timeline recorded.</p></section>\n";
    }
    const double t_end = timeline_end_s(r);
    out += "<div class=\"charts\">";
    out += svg_step_lines("SM activity (SMACT) per GPU", r.timelines, TimelineSeries::Smact, t_end);
    out +=
        svg_step_lines("Memory used per GPU", r.timelines, TimelineSeries::MemoryUsedFrac, t_end);
    return out + "</div></section>\n";
}

Result<void> write_file(const std::filesystem::path& path, const std::string& content) {
    const auto io_error = [&](int err) {
        return fail(ErrorCode::Io, fmt::format("cannot write '{}': {}", path.string(),
                                               std::generic_category().message(err)));
    };
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        return io_error(errno);
    }
    const std::size_t written = std::fwrite(content.data(), 1, content.size(), f);
    const int write_errno = errno;
    // Close even after a short write; a failing close can also mean lost data (e.g. ENOSPC).
    if (std::fclose(f) != 0) {
        return io_error(errno);
    }
    if (written != content.size()) {
        return io_error(write_errno != 0 ? write_errno : EIO);
    }
    return {};
}

}  // namespace

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
        if (out.empty() || out.back().value != v) {
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
            bucket_max = std::max(bucket_max, current);
        }
        push(lo, bucket_max);
    }
    return out;
}

std::string svg_bar_chart(const std::string& title,
                          const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit, std::optional<double> reference,
                          const std::string& reference_label) {
    BarLayout l = bar_layout(bars);
    const double rows = static_cast<double>(std::max<std::size_t>(bars.size(), 1));
    const double plot_bottom = l.top + rows * l.row;

    double data_max = 0;
    for (const auto& [label, value] : bars) {
        data_max = std::max(data_max, finite_or_zero(value));
    }
    if (reference && std::isfinite(*reference)) {
        data_max = std::max(data_max, *reference);
    }
    // All zero still gets a 0..1 axis rather than a division by zero.
    const double span = data_max > 0 ? data_max : 1.0;
    const double step = nice_step(span, 6);
    const double axis_max = std::ceil(span / step - 1e-9) * step;
    l.decimals = decimals_for(data_max);

    std::string out = svg_open(l.width, plot_bottom + l.bottom, title);
    out += bar_axis(l, plot_bottom, axis_max, step, unit);
    if (bars.empty()) {
        out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data</text>",
                           coord(l.label_width + l.plot_width() / 2), coord(l.top + l.row / 2));
    }
    for (std::size_t i = 0; i < bars.size(); ++i) {
        out += bar_row(l, i, bars[i].first, bars[i].second, axis_max, unit);
    }
    if (reference && std::isfinite(*reference)) {
        out += reference_line(l, plot_bottom, *reference, axis_max, reference_label, unit);
    }
    return out + "</svg>";
}

std::string svg_step_lines(const std::string& title, const std::vector<GpuTimeline>& timelines,
                           TimelineSeries series, double t_end_s) {
    StepLayout l;
    const int per_row = std::max(1, static_cast<int>(l.plot_width() / l.legend_item));
    const auto legend_rows = static_cast<int>((timelines.size() + per_row - 1) / per_row);
    l.top = 36 + legend_rows * 18 + 6;

    if (!has_points(timelines)) {
        l.top = 30;
        return svg_open(l.width, l.height(), title) +
               fmt::format(
                   "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#777\">"
                   "no timeline recorded</text></svg>",
                   coord(l.left + l.plot_width() / 2), coord(l.top + l.plot_height / 2));
    }
    if (!(t_end_s > 0) || !std::isfinite(t_end_s)) {
        t_end_s = last_point_time(timelines);
    }
    if (!(t_end_s > 0)) {
        t_end_s = 1.0;  // a single instant: any positive span draws it as a flat line
    }

    std::vector<std::vector<StepPoint>> lines;
    lines.reserve(timelines.size());
    for (const auto& timeline : timelines) {
        lines.push_back(downsample_steps(timeline.points, series, t_end_s));
    }
    double y_step = 1;
    const double y_max = y_axis_max(lines, series, &y_step);

    std::string out = svg_open(l.width, l.height(), title);
    out += step_legend(l, timelines);
    out += step_axes(l, t_end_s / 3600.0, y_max, y_step, series);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        out += step_path(l, lines[i], timelines[i].gpu, t_end_s, y_max);
    }
    return out + "</svg>";
}

std::string render_results_csv(const Comparison& comparison) {
    const PolicyResult* exclusive = find_exclusive(comparison);
    std::string out = "policy";
    for (const auto& col : kColumns) {
        out += fmt::format(",{}", col.csv_name);
    }
    for (const auto& col : kColumns) {
        if (col.better != Better::NoRatio) {
            out += fmt::format(",{}_vs_exclusive", col.csv_name);
        }
    }
    out += '\n';
    for (const auto& r : comparison.results) {
        out += csv_field(r.policy);
        for (const auto& col : kColumns) {
            // Appending separately: `"," + std::string` trips GCC 12's -Wrestrict false positive.
            out += ',';
            out += csv_number(col.value(r), col.decimals);
        }
        for (const auto& col : kColumns) {
            if (col.better != Better::NoRatio) {
                const auto ratio = ratio_to(col, r, exclusive);
                out += ratio ? fmt::format(",{:.4f}", *ratio) : std::string(",");
            }
        }
        out += '\n';
    }
    return out;
}

std::string render_html_report(const Comparison& comparison) {
    std::string out = page_header(comparison);
    if (comparison.results.empty()) {
        out += "<p class=\"empty\">No policies were simulated.</p>";
    } else {
        out += "<section><h2>Summary</h2>" + summary_table(comparison) +
               comparison_charts(comparison) + "</section>\n";
        for (std::size_t i = 0; i < comparison.results.size(); ++i) {
            out += policy_section(comparison.results[i], i);
        }
    }
    out += fmt::format(
        "<footer>Timelines are piecewise constant and drawn as steps; lines with more than {} "
        "steps are downsampled keeping each interval's maximum, so short spikes stay visible. "
        "The same figures as the summary table are in results.csv.</footer>\n</body></html>\n",
        kMaxStepsPerLine);
    return out;
}

Result<std::string> write_html_report(const Comparison& comparison, const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot create report directory '{}': {}", dir, ec.message()));
    }
    const fs::path index = fs::path(dir) / "index.html";
    if (auto written = write_file(index, render_html_report(comparison)); !written) {
        return tl::unexpected(written.error());
    }
    if (auto written = write_file(fs::path(dir) / "results.csv", render_results_csv(comparison));
        !written) {
        return tl::unexpected(written.error());
    }
    return index.string();
}

}  // namespace carma::sim
