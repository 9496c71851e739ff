// The data the charts draw, derived from the records without any SVG (sim/report_charts.h's
// building blocks): the page's shared time axis, downsampled GPU series, empirical CDFs, the
// queue length over time and the crash and relaunch markers of the attempts.

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "sim/chart_svg.h"
#include "sim/report_charts.h"

namespace carma::sim {

namespace {

double series_value(const TimelinePoint& p, TimelineSeries series) {
    switch (series) {
        case TimelineSeries::Smact:
            return p.smact;
        case TimelineSeries::MemoryUsedFrac:
            return p.memory_used_frac;
        case TimelineSeries::Power:
            return p.power_w;
    }
    return chart::kNaN;
}

bool same_value(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
}

}  // namespace

namespace chart {

bool follows_oom(const TaskRecord& t, std::size_t attempt) {
    return attempt > 0 && t.spans[attempt - 1].outcome == AttemptOutcome::OutOfMemory;
}

std::string marker_tooltip(const AttemptMarker& m, const DurationUnit& unit) {
    return m.kind == AttemptMarker::Kind::OomCrash
               ? fmt::format("{}: attempt {} out of memory on GPU {} at {:.2f} {}", m.task,
                             m.attempt, m.gpu, m.t_s / unit.seconds, unit.symbol)
               : fmt::format("{}: relaunched (attempt {}) on GPU {} at {:.2f} {}", m.task,
                             m.attempt, m.gpu, m.t_s / unit.seconds, unit.symbol);
}

}  // namespace chart

using chart::axis_span;
using chart::follows_oom;
using chart::known_max;

namespace {

// A window of minutes reads in minutes: the unit follows the axis's span, or the longest
// makespan where one reaches further (a result without its records).
TimeAxis with_unit(TimeAxis axis, const Comparison& c) {
    double largest = axis_span(axis);
    for (const PolicyResult& r : c.results) {
        if (std::isfinite(r.makespan_s)) {
            largest = std::max(largest, r.makespan_s);
        }
    }
    axis.unit = duration_unit_for(largest);
    axis.label = fmt::format("time ({})", axis.unit.symbol);
    return axis;
}

}  // namespace

TimeAxis shared_time_axis(const Comparison& c) {
    TimeAxis axis;
    if (c.kind == RecordKind::DaemonHistory && c.span_s > 0 && std::isfinite(c.span_s)) {
        axis.t1_s = c.span_s;
        return with_unit(axis, c);
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
    return with_unit(axis, c);
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

}  // namespace carma::sim
