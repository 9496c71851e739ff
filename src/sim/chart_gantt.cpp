// The Gantt chart of the attempts: one row per GPU, split into lanes where attempts share it,
// one bar per attempt and GPU coloured by task name, with crashes and relaunches marked.

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/chart_svg.h"
#include "sim/report_charts.h"

namespace carma::sim {

using namespace chart;  // the shared building blocks, sim/chart_svg.h

namespace {

struct GanttBar {
    const TaskRecord* task = nullptr;
    std::size_t attempt = 0;  // index into task->spans
    double t0 = 0;
    double t1 = 0;
    int lane = 0;
};

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
        items.push_back(
            {Swatch::FailedBar, "", "failed, cancelled, preempted, timed out or lost", ""});
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
                fmt::format("{} attempt {} on GPU {}: {:.2f}\u2013{} {}, {}", task_title(t),
                            b.attempt + 1, gpu, (s.start_s - axis.t0_s) / axis.unit.seconds,
                            s.end_s >= 0
                                ? fmt::format("{:.2f}", (s.end_s - axis.t0_s) / axis.unit.seconds)
                                : std::string("now"),
                            axis.unit.symbol, to_string(s.outcome));
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
                marks += cross_mark(x0 + w - 5, mid, 3, marker_tooltip(crash, axis.unit));
            }
            if (relaunch) {
                const AttemptMarker again{AttemptMarker::Kind::Relaunch, s.start_s, gpu, t.name,
                                          number};
                marks += ring_mark(x0 + 5, mid, 3, marker_tooltip(again, axis.unit));
            }
        }
        out += marks;
        row_top += row_height;
    }
    return out + "</svg>";
}

}  // namespace carma::sim
