#include "sim/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

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

TEST(RenderHtmlReport, DrawsTwoBarChartsAndTwoTimelineChartsPerPolicyWithTimelines) {
    const auto c = comparison_of({policy("exclusive", 10, 50, true), policy("carma", 6, 40, true),
                                  policy("no-timeline", 7, 42, false)});
    const std::string html = render_html_report(c);

    EXPECT_EQ(count(html, "<svg"), 2u + 2u * 2u);
    EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
    EXPECT_EQ(count(html, "No timeline recorded"), 1u);
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

TEST(RenderHtmlReport, ShowsRatiosToExclusiveOnlyWhenPresent) {
    const std::string with = render_html_report(
        comparison_of({policy("exclusive", 10, 50, false), policy("carma", 5, 40, false)}));
    EXPECT_NE(with.find("0.50\u00d7"), std::string::npos);  // makespan 5 h vs 10 h
    EXPECT_NE(with.find("0.80\u00d7"), std::string::npos);  // energy 40 MJ vs 50 MJ
    EXPECT_NE(with.find("stroke-dasharray"), std::string::npos);

    const std::string without = render_html_report(
        comparison_of({policy("carma", 5, 40, false), policy("greedy", 4, 30, false)}));
    EXPECT_EQ(without.find("\u00d7"), std::string::npos);
    EXPECT_EQ(without.find("stroke-dasharray"), std::string::npos);
}

TEST(RenderHtmlReport, HandlesSinglePolicyWithZeroValues) {
    PolicyResult zero;
    zero.policy = "idle";
    zero.timelines.push_back(timeline(0, {{0, 0, 0, 0, 0, 0}}));
    const std::string html = render_html_report(comparison_of({zero}));

    EXPECT_NE(html.find("idle"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 4u);
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
    const std::string svg = svg_step_lines("SMACT", timelines, TimelineSeries::Smact, 30000);

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
                       TimelineSeries::MemoryUsedFrac, 3600);
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
        const std::string svg = svg_step_lines("SMACT", timelines, TimelineSeries::Smact, 100);
        EXPECT_NE(svg.find("no timeline recorded"), std::string::npos);
        EXPECT_TRUE(step_paths(svg).empty());
    }
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
    EXPECT_EQ(csv.rfind("policy,makespan_h,energy_mj,", 0), 0u);
    EXPECT_NE(csv.find("\nexclusive,10,50,"), std::string::npos);
    EXPECT_NE(csv.find("\n\"a,b\",6,40,"), std::string::npos);
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
