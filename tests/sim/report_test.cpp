#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/policy.h"
#include "model/catalog.h"
#include "model/gpu_type.h"
#include "sim/simulator.h"
#include "sim/svg_check.h"
#include "sim/trace.h"

namespace carma::sim {
namespace {

namespace fs = std::filesystem;

std::size_t count(const std::string& haystack, const std::string& needle) {
    std::size_t n = 0;
    for (auto pos = haystack.find(needle); pos != std::string::npos;
         pos = haystack.find(needle, pos + needle.size())) {
        ++n;
    }
    return n;
}

// Widths of the bars, in drawing order.
std::vector<double> bar_widths(const std::string& svg) {
    static const std::regex bar(R"re(<rect class="bar"[^>]*width="([0-9.]+)")re");
    std::vector<double> widths;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator();
         ++it) {
        widths.push_back(std::stod((*it)[1].str()));
    }
    return widths;
}

// The `d` attribute of every step line.
std::vector<std::string> step_paths(const std::string& svg) {
    static const std::regex path(R"re(<path class="step" d="([^"]*)")re");
    std::vector<std::string> paths;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator();
         ++it) {
        paths.push_back((*it)[1].str());
    }
    return paths;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

GpuTimeline timeline(int gpu, std::vector<TimelinePoint> points) {
    return GpuTimeline{gpu, std::move(points)};
}

PolicyResult policy(std::string name, double makespan_h, double energy_mj, bool with_timeline) {
    PolicyResult r;
    r.policy = std::move(name);
    r.makespan_s = makespan_h * 3600;
    r.energy_j = energy_mj * 1e6;
    r.mean_jct_s = 1200;
    r.p95_jct_s = 3000;
    r.mean_wait_s = 60;
    r.tasks_completed = 10;
    r.attempts = 11;
    r.oom_crashes = 1;
    r.mean_smact = 0.4;
    r.mean_smocc = 0.3;
    r.mean_memory_used_frac = 0.5;
    if (with_timeline) {
        for (int gpu = 0; gpu < 2; ++gpu) {
            r.timelines.push_back(timeline(gpu, {{0, 0.5, 0.4, 0.6, 200, 1},
                                                 {r.makespan_s / 2, 0.9, 0.7, 0.8, 300, 2},
                                                 {r.makespan_s, 0, 0, 0, 60, 0}}));
        }
    }
    return r;
}

Comparison comparison_of(std::vector<PolicyResult> results) {
    Comparison c;
    c.trace = "philly-small";
    c.gpus = "4xA100-40GB";
    c.sharing = "mps";
    c.results = std::move(results);
    return c;
}

TEST(RenderHtmlReport, NamesTraceGpusSharingAndEveryPolicy) {
    const auto c = comparison_of({policy("exclusive", 10, 50, true), policy("carma", 6, 40, true),
                                  policy("greedy-pack", 5, 45, true)});
    const std::string html = render_html_report(c);

    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_NE(html.find("</html>"), std::string::npos);
    for (const char* text :
         {"philly-small", "4xA100-40GB", "mps", "exclusive", "carma", "greedy-pack"}) {
        EXPECT_NE(html.find(text), std::string::npos) << text;
    }
}

TEST(RenderHtmlReport, IsSelfContained) {
    const std::string html = render_html_report(comparison_of({policy("exclusive", 1, 1, true)}));
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("<link"), std::string::npos);
    EXPECT_EQ(html.find("src="), std::string::npos);
    EXPECT_EQ(html.find("href=\"http"), std::string::npos);
    EXPECT_EQ(html.find("url("), std::string::npos);
}

// This test verifies the page's charts: two bar charts and two distributions for the
// comparison, then per policy SMACT and memory (when it has timelines), a Gantt chart and the
// queue length.
TEST(RenderHtmlReport, DrawsComparisonChartsAndFourChartsPerPolicyWithTimelines) {
    const auto c = comparison_of({policy("exclusive", 10, 50, true), policy("carma", 6, 40, true),
                                  policy("no-timeline", 7, 42, false)});
    const std::string html = render_html_report(c);

    EXPECT_EQ(count(html, "<svg"), 2u + 2u + 4u + 4u + 2u);
    EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
    EXPECT_EQ(count(html, "No timeline recorded"), 1u);
    EXPECT_EQ(count(html, "<section id=\"policy-"), 3u);
}

TEST(RenderHtmlReport, EscapesHtmlInNames) {
    auto c = comparison_of({policy("<b>\"bold\" & 'co'</b>", 1, 1, true)});
    c.trace = "<script>alert(1)</script>";
    const std::string html = render_html_report(c);

    EXPECT_EQ(html.find("<b>\"bold\""), std::string::npos);
    EXPECT_EQ(html.find("<script>"), std::string::npos);
    EXPECT_NE(html.find("&lt;b&gt;&quot;bold&quot; &amp; &#39;co&#39;&lt;/b&gt;"),
              std::string::npos);
    EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

// This test verifies that a report of minutes reads in minutes (a five-minute window read
// "0.07 h"): the summary, the makespan chart, the axis and the tasks table say "min", and the CSV
// keeps hours, as its column names say.
TEST(RenderHtmlReport, MinutesOfHistoryReadInMinutes) {
    const Comparison c =
        comparison_of({policy("exclusive", 300 / 3600.0, 1, false), policy("carma", 0.05, 1, true)});
    const std::string html = render_html_report(c);
    EXPECT_NE(html.find("<th>Makespan (min)</th>"), std::string::npos);
    EXPECT_NE(html.find("<td>5.00</td>"), std::string::npos);  // 300 s
    EXPECT_NE(html.find("makespan <b>3.00 min</b>"), std::string::npos);
    EXPECT_NE(html.find("Times in minutes"), std::string::npos);
    EXPECT_NE(html.find("time (min)"), std::string::npos);
    EXPECT_EQ(html.find("Makespan (h)"), std::string::npos);
    EXPECT_NE(render_results_csv(c).find("\nexclusive,0.0833333,"), std::string::npos)
        << render_results_csv(c);
}

// This test verifies the summary table speaks the text table's language (sim/output.cpp):
// hours and MJ with two decimals, changes vs exclusive as "+x.x%", utilisation as 0..1 with
// three decimals; the change columns and the reference line only when exclusive ran.
TEST(RenderHtmlReport, SummaryUsesTheTextTablesUnitsAndShowsChangesOnlyWithExclusive) {
    const std::string with = render_html_report(
        comparison_of({policy("exclusive", 10, 50, false), policy("carma", 5, 40, false)}));
    EXPECT_NE(with.find("<td>10.00</td>"), std::string::npos);  // makespan (h)
    EXPECT_NE(with.find("<td>50.00</td>"), std::string::npos);  // energy (MJ)
    EXPECT_NE(with.find(">-50.0%</td>"), std::string::npos);    // makespan 5 h vs 10 h
    EXPECT_NE(with.find(">-20.0%</td>"), std::string::npos);    // energy 40 MJ vs 50 MJ
    EXPECT_NE(with.find("<td>0.33</td>"), std::string::npos);   // mean JCT 1200 s in hours
    EXPECT_NE(with.find("<td>0.400</td>"), std::string::npos);  // SMACT
    EXPECT_NE(with.find("vs excl"), std::string::npos);
    EXPECT_NE(with.find("class=\"reference\""), std::string::npos);

    const std::string without = render_html_report(
        comparison_of({policy("carma", 5, 40, false), policy("greedy", 4, 30, false)}));
    EXPECT_EQ(without.find("vs excl"), std::string::npos);
    EXPECT_EQ(without.find("class=\"reference\""), std::string::npos);
}

TEST(RenderHtmlReport, HandlesSinglePolicyWithZeroValues) {
    PolicyResult zero;
    zero.policy = "idle";
    zero.timelines.push_back(timeline(0, {{0, 0, 0, 0, 0, 0}}));
    const std::string html = render_html_report(comparison_of({zero}));

    EXPECT_NE(html.find("idle"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 2u + 4u);  // no bars to compare with one policy
    EXPECT_EQ(html.find("nan"), std::string::npos);
    EXPECT_EQ(html.find("inf"), std::string::npos);
}

TEST(RenderHtmlReport, SaysSoWhenThereAreNoPolicies) {
    const std::string html = render_html_report(comparison_of({}));
    EXPECT_NE(html.find("No policies were simulated"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 0u);
}

TEST(SvgBarChart, BarLengthsAreProportionalToValues) {
    const std::string svg =
        svg_bar_chart("Makespan", {{"a", 1.0}, {"b", 2.0}, {"zero", 0.0}}, "h", std::nullopt);
    const auto widths = bar_widths(svg);
    ASSERT_EQ(widths.size(), 3u);
    EXPECT_GT(widths[0], 0);
    EXPECT_NEAR(widths[1], 2 * widths[0], 0.2);  // coordinates carry one decimal
    EXPECT_EQ(widths[2], 0);
    EXPECT_EQ(count(svg, "<svg"), 1u);
    EXPECT_NE(svg.find("Makespan"), std::string::npos);
}

TEST(SvgBarChart, DrawsReferenceAsDashedLineOnTheSameScale) {
    const std::string svg =
        svg_bar_chart("Energy", {{"a", 1.0}, {"b", 4.0}}, "MJ", 2.0, "exclusive");
    ASSERT_NE(svg.find("stroke-dasharray"), std::string::npos);
    EXPECT_NE(svg.find("exclusive"), std::string::npos);

    // The line sits halfway along the bar for 4: same scale as the bars.
    const std::regex ref(R"re(class="reference" x1="([0-9.]+)")re");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(svg, m, ref));
    const std::regex bar_x(R"re(<rect class="bar" x="([0-9.]+)")re");
    std::smatch bx;
    ASSERT_TRUE(std::regex_search(svg, bx, bar_x));
    const double origin = std::stod(bx[1].str());
    EXPECT_NEAR(std::stod(m[1].str()) - origin, bar_widths(svg)[1] / 2, 0.2);
}

TEST(SvgBarChart, AllZeroOrEmptyStillRenders) {
    const std::string zeros = svg_bar_chart("Z", {{"a", 0.0}, {"b", 0.0}}, "h", 0.0);
    EXPECT_EQ(zeros.find("nan"), std::string::npos);
    EXPECT_EQ(bar_widths(zeros), (std::vector<double>{0, 0}));

    const std::string empty = svg_bar_chart("E", {}, "h", std::nullopt);
    EXPECT_NE(empty.find("no data"), std::string::npos);
    EXPECT_NE(empty.find("</svg>"), std::string::npos);
}

TEST(DownsampleSteps, BoundsStepsAndKeepsSpikes) {
    std::vector<TimelinePoint> points;
    for (int i = 0; i < 50000; ++i) {
        TimelinePoint p;
        p.t_s = i;
        p.smact = (i % 2 == 0) ? 0.2 : 0.3;
        points.push_back(p);
    }
    points[31337].smact = 1.0;  // one-second spike

    const auto steps = downsample_steps(points, TimelineSeries::Smact, 50000);
    EXPECT_LE(steps.size(), kMaxStepsPerLine);
    EXPECT_GT(steps.size(), 0u);
    const auto max = std::max_element(steps.begin(), steps.end(),
                                      [](auto& a, auto& b) { return a.value < b.value; });
    EXPECT_EQ(max->value, 1.0);
    EXPECT_TRUE(
        std::is_sorted(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.t_s < b.t_s; }));

    EXPECT_LE(downsample_steps(points, TimelineSeries::Smact, 50000, 100).size(), 100u);
}

TEST(DownsampleSteps, KeepsShortSeriesAndDropsPointsAfterTheEnd) {
    const std::vector<TimelinePoint> points = {{0, 0.1, 0, 0.5, 100, 1},
                                               {10, 0.4, 0, 0.5, 100, 1},
                                               {20, 0.4, 0, 0.7, 100, 1},
                                               {30, 0.0, 0, 0.0, 100, 0},
                                               {40, 0.9, 0, 0.9, 100, 1}};

    const auto smact = downsample_steps(points, TimelineSeries::Smact, 35);
    ASSERT_EQ(smact.size(), 3u);  // 0.4 repeated is merged; t=40 is after the end
    EXPECT_EQ(smact[0].t_s, 0);
    EXPECT_EQ(smact[0].value, 0.1);
    EXPECT_EQ(smact[1].t_s, 10);
    EXPECT_EQ(smact[1].value, 0.4);
    EXPECT_EQ(smact[2].t_s, 30);
    EXPECT_EQ(smact[2].value, 0.0);

    const auto memory = downsample_steps(points, TimelineSeries::MemoryUsedFrac, 100);
    ASSERT_EQ(memory.size(), 4u);
    EXPECT_EQ(memory[1].t_s, 20);
    EXPECT_EQ(memory[1].value, 0.7);

    EXPECT_TRUE(downsample_steps({}, TimelineSeries::Power, 100).empty());
}

TEST(SvgStepLines, DrawsOneBoundedLinePerGpuWithLegend) {
    std::vector<GpuTimeline> timelines;
    for (int gpu = 0; gpu < 4; ++gpu) {
        GpuTimeline t{gpu, {}};
        for (int i = 0; i < 20000; ++i) {
            t.points.push_back({i * 1.5, (i % 7) / 7.0, 0, (i % 5) / 5.0, 250, 1});
        }
        timelines.push_back(std::move(t));
    }
    const std::string svg =
        svg_step_lines("SMACT", timelines, TimelineSeries::Smact, TimeAxis{0, 30000});

    const auto paths = step_paths(svg);
    ASSERT_EQ(paths.size(), 4u);
    for (const auto& d : paths) {
        EXPECT_LE(count(d, "V"), kMaxStepsPerLine);
    }
    for (int gpu = 0; gpu < 4; ++gpu) {
        EXPECT_NE(svg.find("GPU " + std::to_string(gpu)), std::string::npos);
    }
    EXPECT_NE(svg.find("time (h)"), std::string::npos);
    EXPECT_LT(svg.size(), 4u * 2000u * 30u);  // bounded by the step limit, not the input
}

TEST(SvgStepLines, DrawsStepsNotSlopes) {
    const std::string svg =
        svg_step_lines("Memory", {timeline(0, {{0, 0, 0, 0.25, 0, 0}, {1800, 0, 0, 0.75, 0, 0}})},
                       TimelineSeries::MemoryUsedFrac, TimeAxis{0, 3600});
    const auto paths = step_paths(svg);
    ASSERT_EQ(paths.size(), 1u);
    // Only horizontal (H) and vertical (V) moves after the start point.
    EXPECT_EQ(paths[0].find_first_not_of("MHV0123456789. "), std::string::npos) << paths[0];
    EXPECT_EQ(count(paths[0], "H"), 2u);
    EXPECT_EQ(count(paths[0], "V"), 1u);
}

TEST(SvgStepLines, SaysSoWhenEmpty) {
    for (const auto& timelines :
         {std::vector<GpuTimeline>{}, std::vector<GpuTimeline>{timeline(0, {})}}) {
        const std::string svg =
            svg_step_lines("SMACT", timelines, TimelineSeries::Smact, TimeAxis{0, 100});
        EXPECT_NE(svg.find("no timeline recorded"), std::string::npos);
        EXPECT_TRUE(step_paths(svg).empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Attempts, markers, shared axis, label layout

using test_support::overlapping_labels;
using test_support::svgs_of;
using test_support::text_boxes;

// A task with the given attempts; counters, wait and finish follow from them as the simulator
// computes them.
TaskRecord task_with(std::string name, double submit_s, std::vector<AttemptSpan> spans) {
    TaskRecord t;
    t.name = std::move(name);
    t.submit_s = submit_s;
    t.spans = std::move(spans);
    t.attempts = static_cast<int>(t.spans.size());
    double queued = submit_s;
    for (const AttemptSpan& s : t.spans) {
        t.wait_s += s.start_s - queued;
        queued = s.end_s;
        t.oom_crashes += s.outcome == AttemptOutcome::OutOfMemory ? 1 : 0;
        t.gpus = static_cast<int>(s.gpus.size());
        t.gpu_ids = s.gpus;
    }
    if (!t.spans.empty()) {
        t.first_start_s = t.spans.front().start_s;
        if (t.spans.back().outcome == AttemptOutcome::Succeeded) {
            t.finish_s = t.spans.back().end_s;
        }
    }
    return t;
}

AttemptSpan span(double start, double end, std::vector<int> gpus, AttemptOutcome outcome) {
    return AttemptSpan{start, end, std::move(gpus), outcome};
}

// "bert" crashes out of memory on GPU 1 at 1000 s and is relaunched on GPU 0 at 1500 s; "vgg"
// runs once on GPU 1.
PolicyResult with_oom(std::string name, double makespan_h) {
    PolicyResult r = policy(std::move(name), makespan_h, 1, true);
    r.tasks = {task_with("bert", 0,
                         {span(100, 1000, {1}, AttemptOutcome::OutOfMemory),
                          span(1500, 3000, {0}, AttemptOutcome::Succeeded)}),
               task_with("vgg", 50, {span(200, 2500, {1}, AttemptOutcome::Succeeded)})};
    return r;
}

// The (x, label) of every tick of a chart's x axis.
std::vector<std::pair<std::string, std::string>> x_ticks(const std::string& svg) {
    static const std::regex tick(
        R"re(<line x1="([0-9.]+)" y1="[0-9.]+" x2="\1" y2="[0-9.]+" stroke="#999"/>)re"
        R"re(<text x="\1" y="[0-9.]+" text-anchor="middle">([^<]*)</text>)re");
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator();
         ++it) {
        out.emplace_back((*it)[1].str(), (*it)[2].str());
    }
    return out;
}

std::optional<std::string> svg_attribute(const std::string& svg, const std::string& name) {
    return test_support::attribute(svg.substr(0, svg.find('>')), name);
}

// This test verifies that every chart over time of a page, whichever policy it belongs to,
// shows the same time range on the same scale: that of the policy whose record reaches furthest.
TEST(SharedTimeAxis, EveryPolicysChartsShowTheSameRange) {
    // exclusive runs to 10 h, carma to 5 h; a rejected task of carma arrives at 2 h.
    PolicyResult exclusive = with_oom("exclusive", 10);
    PolicyResult carma = with_oom("carma", 5);
    TaskRecord late = task_with("late", 7200, {});
    late.rejected = true;
    late.left_s = 7200;
    carma.tasks.push_back(late);
    const Comparison c = comparison_of({exclusive, carma});

    const TimeAxis axis = shared_time_axis(c);
    EXPECT_EQ(axis.t0_s, 0);
    EXPECT_EQ(axis.t1_s, 36000);

    std::vector<std::string> time_charts;
    for (const std::string& svg : svgs_of(render_html_report(c))) {
        if (svg_attribute(svg, "class") == "timechart") {
            time_charts.push_back(svg);
        }
    }
    ASSERT_EQ(time_charts.size(), 2u * 4u);  // SMACT, memory, Gantt, queue per policy
    const auto ticks = x_ticks(time_charts[0]);
    ASSERT_GE(ticks.size(), 5u);
    EXPECT_EQ(ticks.back().second, "10");
    for (const std::string& svg : time_charts) {
        EXPECT_EQ(svg_attribute(svg, "data-t0-s"), "0.0");
        EXPECT_EQ(svg_attribute(svg, "data-t1-s"), "36000.0");
        EXPECT_EQ(x_ticks(svg), ticks);
    }
}

// This test verifies that a daemon's history uses its whole window as the axis, labelled with
// the window's start, even where nothing happened at its end.
TEST(SharedTimeAxis, DaemonHistoryCoversItsWindow) {
    Comparison c = comparison_of({with_oom("carma", 1)});
    c.kind = RecordKind::DaemonHistory;
    c.origin_unix_s = 1764578400;  // 2025-12-01 08:40 UTC
    c.span_s = 6 * 3600;
    const TimeAxis axis = shared_time_axis(c);
    EXPECT_EQ(axis.t1_s, 6 * 3600);

    const std::string html = render_html_report(c);
    EXPECT_NE(html.find("CARMA daemon report"), std::string::npos);
    EXPECT_NE(html.find("hours since 2025-12-01 08:40 UTC"), std::string::npos);
    EXPECT_NE(html.find("data-t1-s=\"21600.0\""), std::string::npos);
}

// This test verifies the out-of-memory marks: a red cross on the line of the crashed attempt's
// GPU at the crash, a ring where the task was relaunched, both named in the legend and tooltip;
// none of them when nothing crashed.
TEST(SvgStepLines, MarksOutOfMemoryCrashesAndRelaunches) {
    const PolicyResult r = with_oom("OR-RR", 1);
    const TimeAxis axis{0, 3600};
    const std::string svg =
        svg_step_lines("Memory", r.timelines, TimelineSeries::MemoryUsedFrac, axis, r.tasks);

    EXPECT_EQ(count(svg, "class=\"oom-mark\""), 1u);
    EXPECT_EQ(count(svg, "class=\"relaunch-mark\""), 1u);
    EXPECT_NE(svg.find("bert: attempt 1 out of memory on GPU 1 at 0.28 h"), std::string::npos);
    EXPECT_NE(svg.find("bert: relaunched (attempt 2) on GPU 0 at 0.42 h"), std::string::npos);
    EXPECT_NE(svg.find(">out-of-memory crash<"), std::string::npos);
    EXPECT_NE(svg.find(">relaunch<"), std::string::npos);

    // The cross is centred at the crash's x: 1000 s of 3600 s along the plot.
    const std::regex mark(R"re(class="oom-mark" d="M([0-9.]+) [0-9.]+L([0-9.]+) )re");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(svg, m, mark));
    const double centre = (std::stod(m[1].str()) + std::stod(m[2].str())) / 2;
    const auto ticks = x_ticks(svg);
    ASSERT_GE(ticks.size(), 2u);
    const double x0 = std::stod(ticks.front().first);  // 0 h
    const double x1 = std::stod(ticks.back().first);   // 1 h
    ASSERT_EQ(ticks.back().second, "1");
    EXPECT_NEAR(centre, x0 + (x1 - x0) * 1000.0 / 3600.0, 0.2);

    PolicyResult calm = r;
    calm.tasks = {task_with("vgg", 50, {span(200, 2500, {1}, AttemptOutcome::Succeeded)})};
    const std::string none =
        svg_step_lines("Memory", calm.timelines, TimelineSeries::Smact, axis, calm.tasks);
    EXPECT_EQ(none.find("oom-mark"), std::string::npos);
    EXPECT_EQ(none.find("relaunch"), std::string::npos);
    EXPECT_EQ(none.find("out-of-memory"), std::string::npos);
}

// This test verifies the Gantt chart: one bar per attempt and GPU (a two-GPU attempt is two
// bars), attempts sharing a GPU at the same time in separate lanes, the out-of-memory attempt
// outlined and crossed, the relaunch ringed, colours by task name.
TEST(SvgGantt, OneBarPerAttemptAndGpuWithOverlapsInLanes) {
    PolicyResult r;
    r.policy = "carma";
    r.tasks = {task_with("wide", 0, {span(0, 1800, {0, 1}, AttemptOutcome::Succeeded)}),
               task_with("bert", 0,
                         {span(100, 900, {2}, AttemptOutcome::OutOfMemory),
                          span(1000, 3000, {2}, AttemptOutcome::Succeeded)}),
               task_with("vgg", 0, {span(1200, 2400, {2}, AttemptOutcome::Succeeded)})};
    const std::string svg = svg_gantt("Attempts", r, TimeAxis{0, 3600});

    EXPECT_EQ(count(svg, "<rect class=\"attempt "), 5u);
    EXPECT_EQ(count(svg, "<rect class=\"attempt oom\""), 1u);
    EXPECT_EQ(count(svg, "class=\"oom-mark\""), 1u);
    EXPECT_EQ(count(svg, "class=\"relaunch-mark\""), 1u);
    for (const char* gpu : {">GPU 0<", ">GPU 1<", ">GPU 2<"}) {
        EXPECT_NE(svg.find(gpu), std::string::npos) << gpu;
    }
    EXPECT_EQ(count(svg, "fill=\"" + task_colour("wide") + "\""), 2u);

    // bert's second attempt and vgg overlap on GPU 2: different lanes, so different y.
    const std::regex bar(
        R"re(<rect class="attempt [a-z]+" x="[0-9.]+" y="([0-9.]+)"[^>]*fill="([^"]+)")re");
    std::map<std::string, std::set<std::string>> y_by_colour;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator();
         ++it) {
        y_by_colour[(*it)[2].str()].insert((*it)[1].str());
    }
    ASSERT_EQ(y_by_colour[task_colour("vgg")].size(), 1u);
    EXPECT_EQ(y_by_colour[task_colour("bert")].count(*y_by_colour[task_colour("vgg")].begin()), 0u);
    EXPECT_TRUE(overlapping_labels(svg).empty());
}

// This test verifies that bar labels appear only where they fit: whole, shortened with an
// ellipsis, or not at all, and never overlap.
TEST(SvgGantt, LabelsOnlyWhereTheyFit) {
    PolicyResult r;
    r.policy = "p";
    const std::string long_name = "a-rather-long-task-name-that-cannot-fit";
    r.tasks = {task_with(long_name, 0, {span(0, 3600, {0}, AttemptOutcome::Succeeded)}),
               task_with("tiny", 0, {span(0, 3, {1}, AttemptOutcome::Succeeded)}),
               task_with(long_name, 0, {span(3600, 18000, {1}, AttemptOutcome::Succeeded)})};
    const std::string svg = svg_gantt("Attempts", r, TimeAxis{0, 36000});
    const auto labels = text_boxes(svg, "bar-label");
    // The plot is 872 units wide. GPU 0: a tenth of it (87.2) less 3 units of padding on each
    // side holds 12 characters of 6.6 units (font size 11): the name is shortened. GPU 1: 3 s is
    // too short for any label; 0.4 of the plot (348.8) holds all 39 characters.
    ASSERT_EQ(labels.size(), 2u);
    EXPECT_EQ(test_support::code_points(labels[0].text), 12u);
    EXPECT_EQ(labels[0].text.substr(labels[0].text.size() - 3), "\u2026");
    EXPECT_EQ(labels[1].text, long_name);
    EXPECT_EQ(svg.find(">tiny<"), std::string::npos);
    EXPECT_NE(svg.find("tiny attempt 1 on GPU 1"), std::string::npos);  // the tooltip keeps it
    EXPECT_TRUE(overlapping_labels(svg).empty());
}

// This test verifies the rule of the whole page: in no chart do two text labels overlap, and
// every label stays inside its chart, for a real simulation with crashes and long names.
TEST(RenderHtmlReport, NoTwoLabelsOverlapInAnyChart) {
    SimConfig config;
    config.gpus = *model::parse_gpu_set("4xA100-40GB");
    config.scheduler.placement.explain = false;
    config.record_timelines = true;
    Comparison c = comparison_of({});
    for (const char* name : {"exclusive", "OR-RR", "OR-MAGM"}) {
        config.scheduler.policy = *find_policy(name);
        c.results.push_back(simulate(*builtin_trace("mix-90"), model::Catalog::embedded(), config));
    }
    ASSERT_GT(c.results[1].oom_crashes, 0);
    c.results[2].policy = "a policy with a name much longer than the others \u00e9\u00e8";
    for (int i = 0; i < 9; ++i) {
        c.results.push_back(policy(fmt::format("extra-{}", i), 1 + i, 2 + i, true));
    }

    const std::string html = render_html_report(c);
    const auto svgs = svgs_of(html);
    ASSERT_GT(svgs.size(), 40u);
    for (const std::string& svg : svgs) {
        const auto overlaps = overlapping_labels(svg);
        EXPECT_TRUE(overlaps.empty()) << svg.substr(0, 300) << "\n" << overlaps.front();
        for (const auto& box : text_boxes(svg)) {
            EXPECT_GE(box.x0, 0) << box.text;
            EXPECT_LE(box.x1, kChartWidth) << box.text;
        }
    }
    EXPECT_NE(html.find("class=\"oom-mark\""), std::string::npos);
}

// This test verifies that the dashed reference line crosses no value label and no other text,
// wherever the reference falls: below, among, at and above the bars.
TEST(SvgBarChart, ReferenceLineCrossesNoLabel) {
    const std::vector<std::pair<std::string, double>> bars = {
        {"exclusive", 10.0}, {"carma", 6.2}, {"a-much-longer-policy-name", 9.95}, {"zero", 0}};
    for (double reference : {0.0, 3.0, 6.2, 9.97, 10.0, 14.0}) {
        const std::string svg = svg_bar_chart("Makespan", bars, "h", reference, "exclusive");
        const std::regex line(
            R"re(class="reference" x1="([0-9.]+)" y1="([0-9.]+)" x2="[0-9.]+" y2="([0-9.]+)")re");
        std::smatch m;
        ASSERT_TRUE(std::regex_search(svg, m, line)) << reference;
        const double x = std::stod(m[1].str());
        const double y0 = std::stod(m[2].str());
        const double y1 = std::stod(m[3].str());
        const auto boxes = text_boxes(svg);
        ASSERT_EQ(text_boxes(svg, "value").size(), bars.size());
        for (const auto& box : boxes) {
            const bool crossed = box.x0 <= x && x <= box.x1 && box.y0 < y1 && y0 < box.y1;
            EXPECT_FALSE(crossed) << "reference " << reference << " crosses '" << box.text << "'";
        }
        EXPECT_TRUE(overlapping_labels(svg).empty()) << reference;
        EXPECT_NE(svg.find(">exclusive: " + fmt::format("{:.2f}", reference) + " h<"),
                  std::string::npos);
    }
}

// This test verifies the empirical CDF: sorted, one step per distinct value, rising to 1, with
// unknown values dropped; and that the chart's lines only go right and up.
TEST(Cdf, StepsAreMonotoneAndChartLinesOnlyRise) {
    const auto steps = cdf_steps({3.0, 1.0, 2.0, 2.0, std::nan("")});
    ASSERT_EQ(steps.size(), 3u);
    EXPECT_EQ(steps[0].t_s, 1.0);
    EXPECT_DOUBLE_EQ(steps[0].value, 0.25);
    EXPECT_EQ(steps[1].t_s, 2.0);
    EXPECT_DOUBLE_EQ(steps[1].value, 0.75);
    EXPECT_EQ(steps[2].t_s, 3.0);
    EXPECT_DOUBLE_EQ(steps[2].value, 1.0);
    EXPECT_TRUE(cdf_steps({}).empty());

    const std::string svg =
        svg_cdf("Wait", {{"a", {0.5, 0.1, 2.5, 0.1}}, {"b", {1, 3, 2}}, {"c", {}}}, "wait (h)");
    const std::regex path(R"re(<path class="cdf" d="([^"]*)")re");
    int lines = 0;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator();
         ++it, ++lines) {
        std::istringstream d((*it)[1].str());
        char cmd = 0;
        double x = 0, y = 0;
        d >> cmd >> x >> y;
        ASSERT_EQ(cmd, 'M');
        while (d >> cmd) {
            double v = 0;
            d >> v;
            if (cmd == 'H') {
                EXPECT_GE(v, x);
                x = v;
            } else {
                ASSERT_EQ(cmd, 'V');
                EXPECT_LE(v, y);  // SVG's y grows downwards: a rising CDF
                y = v;
            }
        }
    }
    EXPECT_EQ(lines, 2);
    EXPECT_NE(svg.find(">c (none)<"), std::string::npos);
    EXPECT_TRUE(overlapping_labels(svg).empty());
}

// This test verifies the queue length: a task waits from submission to its first attempt,
// between an out-of-memory crash and its relaunch, and until the end when it never ran.
TEST(QueueLength, CountsWaitingTasksOverTime) {
    std::vector<TaskRecord> tasks = {
        // waits [0, 10) and [20, 30)
        task_with("a", 0,
                  {span(10, 20, {0}, AttemptOutcome::OutOfMemory),
                   span(30, 50, {0}, AttemptOutcome::Succeeded)}),
        // waits [5, 40)
        task_with("b", 5, {span(40, 60, {1}, AttemptOutcome::Succeeded)}),
        // waits [45, end): never ran
        task_with("c", 45, {}),
        // rejected at submission: never waits
        task_with("d", 15, {}),
    };
    tasks[3].rejected = true;
    tasks[3].left_s = 15;
    const auto steps = queue_length_steps(tasks, TimeAxis{0, 100});
    const std::vector<std::pair<double, double>> expected = {{0, 1},  {5, 2},  {10, 1}, {20, 2},
                                                             {30, 1}, {40, 0}, {45, 1}};
    ASSERT_EQ(steps.size(), expected.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
        EXPECT_EQ(steps[i].t_s, expected[i].first) << i;
        EXPECT_EQ(steps[i].value, expected[i].second) << i;
    }
}

// This test verifies that a task's colour depends on its name only.
TEST(TaskColour, StablePerName) {
    EXPECT_EQ(task_colour("resnet"), task_colour("resnet"));
    EXPECT_NE(task_colour("resnet"), task_colour("vgg"));
    EXPECT_TRUE(std::regex_match(task_colour("x"), std::regex(R"(hsl\(\d+,\d+%,\d+%\))")));
}

// This test verifies that the page is well formed for a browser: UTF-8 declared, every tag
// closed in order, names escaped, for a simulation and a daemon's history.
TEST(RenderHtmlReport, WellFormedForBothKinds) {
    Comparison sim = comparison_of({with_oom("exclusive", 2), with_oom("<i>carma</i> & co", 1)});
    sim.results[1].tasks[0].name = "</svg><script>x</script>";
    Comparison daemon = comparison_of({with_oom("carma", 1)});
    daemon.kind = RecordKind::DaemonHistory;
    daemon.origin_unix_s = 1764578400;
    daemon.span_s = 7200;
    daemon.backend = "emulated";
    daemon.results[0].tasks[0].user = "al\"ice";
    daemon.results[0].tasks[0].id = 7;
    daemon.results[0].tasks[0].state = "succeeded";
    for (const Comparison& c : {sim, daemon}) {
        const std::string html = render_html_report(c);
        EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
        EXPECT_EQ(test_support::tag_balance_error(html), std::nullopt);
        EXPECT_EQ(html.find("<script"), std::string::npos);
        EXPECT_EQ(html.find("<i>"), std::string::npos);
        EXPECT_EQ(html.find("nan"), std::string::npos);
    }
    const std::string html = render_html_report(daemon);
    EXPECT_NE(html.find("<td>7</td><td>al&quot;ice</td>"), std::string::npos);
}

// This test verifies the tasks CSV: one line per task with its attempts, unix times for a
// daemon's history.
TEST(RenderReportTasksCsv, OneLinePerTaskWithItsAttempts) {
    Comparison c = comparison_of({with_oom("OR-RR", 1)});
    std::string csv = render_report_tasks_csv(c);
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "policy,id,user,task,gpus,state,submitted,started,ended,wait_s,attempts,"
              "oom_crashes,spans");
    EXPECT_NE(csv.find("\nOR-RR,,,bert,1,completed,0.0,100.0,3000.0,600.0,2,1,"
                       "100.0-1000.0@1:out-of-memory 1500.0-3000.0@0:succeeded\n"),
              std::string::npos)
        << csv;

    c.kind = RecordKind::DaemonHistory;
    c.origin_unix_s = 1000000;
    csv = render_report_tasks_csv(c);
    EXPECT_NE(csv.find(",1000000.0,1000100.0,1003000.0,600.0,"), std::string::npos) << csv;
}

class WriteHtmlReport : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        root_ = fs::temp_directory_path() / (std::string("carma_report_test_") + info->name() +
                                             "_" + std::to_string(::getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_);
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_;
};

TEST_F(WriteHtmlReport, CreatesIndexAndCsvInANewDirectory) {
    const auto c = comparison_of({policy("exclusive", 10, 50, true), policy("a,b", 6, 40, true)});
    const fs::path dir = root_ / "nested" / "report";

    const auto written = write_html_report(c, dir.string());
    ASSERT_TRUE(written) << written.error().message;
    EXPECT_EQ(fs::path(*written), dir / "index.html");
    EXPECT_EQ(read_file(dir / "index.html"), render_html_report(c));

    const std::string csv = read_file(dir / "results.csv");
    EXPECT_EQ(count(csv, "\n"), 3u);  // header + one line per policy
    EXPECT_EQ(csv.rfind("policy,makespan_h,energy_mj,mean_jct_h,", 0), 0u);
    EXPECT_NE(csv.find("\nexclusive,10,50,"), std::string::npos);
    EXPECT_NE(csv.find("\n\"a,b\",6,40,"), std::string::npos);
    EXPECT_NE(csv.find(",0.6000,0.8000\n"), std::string::npos);  // a,b vs exclusive

    EXPECT_EQ(read_file(dir / "tasks.csv"), render_report_tasks_csv(c));
}

TEST_F(WriteHtmlReport, FailsClearlyUnderARegularFile) {
    const fs::path file = root_ / "not-a-dir";
    std::ofstream(file) << "x";
    const std::string dir = (file / "report").string();

    const auto written = write_html_report(comparison_of({policy("carma", 1, 1, false)}), dir);
    ASSERT_FALSE(written);
    EXPECT_EQ(written.error().code, ErrorCode::Io);
    EXPECT_NE(written.error().message.find(dir), std::string::npos) << written.error().message;
    EXPECT_NE(written.error().message.find("ot a directory"), std::string::npos)
        << written.error().message;
}

}  // namespace
}  // namespace carma::sim
