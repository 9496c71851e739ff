// `carma top`'s screen (cli/views/top_view) from canned GET /v1/view answers: the GPU blocks, the
// bars and the threshold marks, the tasks on a memory bar, the running tasks and the queue, cutting
// to small screens, and answers with fields missing, null or of the wrong type.

#include "cli/views/top_view.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/canned_view.h"

namespace carma::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNow = 1764600000.5;

// The shared canned GPU with alice's resnet on it, and what only the screen reads besides:
// utilisation, power, their sources and energy's, SM activity's window; `fields` replace its own.
json gpu(int index, const json& fields = json::object()) {
    json g = test_support::canned_gpu(index, {{{"id", 7},
                                               {"user", "alice"},
                                               {"name", "resnet"},
                                               {"used_mib", 12000},
                                               {"since", kNow - 1000}}});
    g["util"] = 0.9;
    g["power_w"] = 250.0;
    g["sources"]["util"] = "emulated";
    g["sources"]["power"] = "emulated";
    g["sources"]["energy"] = "emulated";
    g["window"] = {{"smact", {0.4, nullptr, 0.41}}};
    for (const auto& [k, v] : fields.items()) {
        g[k] = v;
    }
    return g;
}

json view(const json& fields = json::object()) {
    json v = {{"now", kNow},
              {"version", "0.x"},
              {"policy", "carma"},
              {"backend", "emulated"},
              {"time_scale", 60},
              {"viewer", "alice"},
              {"risk_thresholds", {{"smact", 0.6}, {"smocc", 0.5}, {"drama", 0.5}}},
              {"warmup_s", 30},
              {"gpus", {gpu(0)}},
              {"queue",
               {{{"id", 9},
                 {"user", "bob"},
                 {"name", "vgg"},
                 {"state", "queued"},
                 {"gpus", 1},
                 {"need_mib", 14000},
                 {"submitted_at", kNow - 100.5},
                 {"wait_s", 100.5},
                 {"reason", "waits for 14,000 MiB on one GPU"}}}},
              {"running",
               {{{"id", 7},
                 {"user", "alice"},
                 {"name", "resnet"},
                 {"gpus", {0}},
                 {"attempt", 1},
                 {"started_at", kNow - 1000.5},
                 {"run_s", 1000.5},
                 {"memory_mib", 12000}}}},
              {"recent", json::array()}};
    for (const auto& [k, v2] : fields.items()) {
        v[k] = v2;
    }
    return v;
}

TopScreen screen(std::size_t width = 120, std::size_t height = 40, bool colour = false) {
    TopScreen s;
    s.width = width;
    s.height = height;
    s.colour = colour;
    s.now = kNow;
    return s;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) {
        out += l + "\n";
    }
    return out;
}

// The first line that holds `text`, or "" (the assertion on it then says what was looked for).
std::string line_with(const std::vector<std::string>& lines, const std::string& text) {
    for (const std::string& l : lines) {
        if (l.find(text) != std::string::npos) {
            return l;
        }
    }
    return "";
}

void expect_fits(const std::vector<std::string>& lines, const TopScreen& s) {
    EXPECT_LE(lines.size(), s.height);
    for (const std::string& l : lines) {
        EXPECT_LE(screen_columns(l), s.width) << "'" << l << "'";
    }
}

// This test verifies the header: policy, backend, the counts, and the status text.
TEST(TopViewTest, HeaderNamesPolicyBackendAndCounts) {
    json q = view()["queue"];
    q.push_back({{"id", 10}, {"user", "bob"}, {"name", "x"}, {"state", "held"}, {"gpus", 1}});
    TopScreen s = screen();
    s.status = "every 1s, q quits";
    const auto lines = top_lines(view({{"queue", q}}), s);
    ASSERT_FALSE(lines.empty());
    EXPECT_THAT(lines[0], HasSubstr("carma top"));
    EXPECT_THAT(lines[0], HasSubstr("policy carma"));
    EXPECT_THAT(lines[0], HasSubstr("backend emulated x60"));
    EXPECT_THAT(lines[0], HasSubstr("1 running, 1 queued, 1 held"));
    EXPECT_THAT(lines[0], HasSubstr("every 1s, q quits"));
}

// This test verifies that a long queue, of which the view lists the head, is counted whole: the
// header sums the per-user counts and the queue's title says how many it shows of how many.
TEST(TopViewTest, LongQueueIsCountedWhole) {
    json users = json::array();
    users.push_back({{"user", "bob"}, {"queued", 99990}, {"recovering", 2}, {"held", 7},
                     {"running", 1}});
    users.push_back({{"user", "alice"}, {"queued", 8}, {"recovering", 0}, {"held", 0},
                     {"running", 0}});
    const auto lines =
        top_lines(view({{"queue_total", 100007}, {"queue_users", users}}), screen());
    ASSERT_FALSE(lines.empty());
    EXPECT_THAT(lines[0], HasSubstr("1 running, 100000 queued, 7 held"));
    EXPECT_THAT(joined(lines), HasSubstr("QUEUE: the first 1 of 100007"));
}

// This test verifies the fair-share line (issue 23): with several users, each one's factor and a
// bar of usage ('#') against share ('|'); none with one user, or from a daemon without factors.
TEST(TopViewTest, FairShareLineShowsEachUsersFactorAndBar) {
    json users = json::array();
    users.push_back({{"user", "alice"}, {"queued", 190}, {"running", 3}, {"factor", 0.39},
                     {"usage_norm", 0.9}, {"shares_norm", 0.5}});
    users.push_back({{"user", "bob"}, {"queued", 2}, {"running", 1}, {"factor", 0.81},
                     {"usage_norm", 0.1}, {"shares_norm", 0.5}});
    const auto lines = top_lines(view({{"queue_users", users}}), screen());
    const std::string share = line_with(lines, "alice F 0.39");
    EXPECT_THAT(share, HasSubstr("alice F 0.39 "));
    EXPECT_THAT(share, HasSubstr("[####|## ]"));
    EXPECT_THAT(share, HasSubstr("bob F 0.81 "));
    EXPECT_THAT(share, HasSubstr("[#   |   ]"));
    users.erase(1);
    EXPECT_EQ(line_with(top_lines(view({{"queue_users", users}}), screen()), " F 0.39"), "");
}

// This test verifies a GPU's title line: index, name, health, risk verdict and rule, lock, source.
TEST(TopViewTest, GpuTitleLine) {
    const auto lines = top_lines(view(), screen());
    const std::string title = line_with(lines, "GPU 0");
    EXPECT_THAT(title, HasSubstr("A100-40GB"));
    EXPECT_THAT(title, HasSubstr("health ok"));
    EXPECT_THAT(title, HasSubstr("risk ok (paper)"));
    EXPECT_THAT(title, HasSubstr("unlocked"));
    EXPECT_THAT(title, HasSubstr("src emulated"));

    const json hot = gpu(1, {{"risk", {{"high", true}, {"rule", "smact-only"},
                                       {"reason", "SMACT 0.71 > 0.60"}}},
                             {"locked", true},
                             {"health", {{"state", "stale"}, {"reason", "no sample for 30 s"}}},
                             {"sources", {{"smact", "dcgm"}, {"smocc", "dcgm"}, {"drama", "nvml"},
                                          {"memory", "nvml"}}}});
    const auto hot_lines = top_lines(view({{"gpus", {hot}}}), screen(200));
    const std::string hot_title = line_with(hot_lines, "GPU 1");
    EXPECT_THAT(hot_title, HasSubstr("risk HIGH (smact-only): SMACT 0.71 > 0.60"));
    EXPECT_THAT(hot_title, HasSubstr("warm-up lock"));
    EXPECT_THAT(hot_title, HasSubstr("health stale: no sample for 30 s"));
    EXPECT_THAT(hot_title, HasSubstr("src SMACT dcgm, SMOCC dcgm, DRAMA nvml (memory nvml)"));
}

// This test verifies the memory bar: each task's share with its own fill, what is not CARMA's,
// the free rest, the sizes, and the legend naming each task's id, owner, name and MiB.
TEST(TopViewTest, MemoryBarShowsEachTask) {
    json g = gpu(0, {{"used_mib", 30000}, {"free_mib", 10960}, {"other_mib", 2000}});
    g["tasks"] = {{{"id", 7}, {"user", "alice"}, {"name", "resnet"}, {"used_mib", 20000}},
                  {{"id", 8}, {"user", "bob"}, {"name", "vgg"}, {"used_mib", 8000}}};
    const auto lines = top_lines(view({{"gpus", {g}}}), screen(100));
    const std::string bar = line_with(lines, "mem ");
    EXPECT_THAT(bar, HasSubstr("30,000 MiB/40,960 MiB"));
    const std::size_t open = bar.find('[');
    const std::size_t close = bar.find(']');
    ASSERT_NE(open, std::string::npos);
    ASSERT_NE(close, std::string::npos);
    const std::string cells = bar.substr(open + 1, close - open - 1);
    const auto count = [&](char c) { return std::count(cells.begin(), cells.end(), c); };
    // 20,000 of 40,960 MiB is about half the bar, 8,000 a fifth, 2,000 a twentieth.
    EXPECT_GT(count('#'), count('='));
    EXPECT_GT(count('='), count('~'));
    EXPECT_GT(count('~'), 0);
    EXPECT_GT(count('.'), 0);
    EXPECT_NEAR(static_cast<double>(count('#')) / cells.size(), 20000.0 / 40960, 0.05);
    // In order: task 7, task 8, others, free.
    EXPECT_LT(cells.rfind('#'), cells.find('='));
    EXPECT_LT(cells.rfind('='), cells.find('~'));
    EXPECT_LT(cells.rfind('~'), cells.find('.'));

    const std::string legend = line_with(lines, "7 alice resnet");
    EXPECT_THAT(legend, HasSubstr("# 7 alice resnet 20,000 MiB"));
    EXPECT_THAT(legend, HasSubstr("= 8 bob vgg 8,000 MiB"));
    EXPECT_THAT(legend, HasSubstr("~ other 2,000 MiB"));
}

// This test verifies processes CARMA did not start on the memory bar: their own fill ('x'),
// after the tasks and before the rest, each named with pid and user in the legend; and the
// header saying the GPUs are emulated.
TEST(TopViewTest, ForeignProcessesOnTheBarAndEmulatedInTheHeader) {
    json g = gpu(0, {{"used_mib", 30000}, {"free_mib", 10960}, {"other_mib", 1000},
                     {"foreign_mib", 17000}});
    g["foreign"] = {{{"pid", 4242}, {"user", "carol"}, {"used_mib", 17000}, {"owner", "foreign"}}};
    const auto lines = top_lines(view({{"gpus", {g}}}), screen(120));
    const std::string bar = line_with(lines, "mem ");
    const std::string cells = bar.substr(bar.find('[') + 1, bar.find(']') - bar.find('[') - 1);
    EXPECT_NEAR(static_cast<double>(std::count(cells.begin(), cells.end(), 'x')) / cells.size(),
                17000.0 / 40960, 0.05);
    EXPECT_LT(cells.rfind('#'), cells.find('x'));
    EXPECT_LT(cells.rfind('x'), cells.find('~'));
    EXPECT_THAT(joined(lines), HasSubstr("x foreign pid 4242 carol 17,000 MiB"));
    EXPECT_THAT(lines[0], HasSubstr("EMULATED GPUs"));
}

// This test verifies that a task too small for one cell of the bar still gets one.
TEST(TopViewTest, TinyTaskStillOnTheBar) {
    json g = gpu(0, {{"used_mib", 1}, {"other_mib", 0}});
    g["tasks"] = {{{"id", 5}, {"user", "carol"}, {"name", "tiny"}, {"used_mib", 1}}};
    const std::string bar = line_with(top_lines(view({{"gpus", {g}}}), screen(80)), "mem ");
    EXPECT_EQ(std::count(bar.begin(), bar.end(), '#'), 1) << bar;
}

// This test verifies the activity bars: the value as a fill, the threshold marked '|' where the
// risk filter's limit falls, and the value printed after the bar.
TEST(TopViewTest, ActivityBarsMarkThresholds) {
    const json g = gpu(0, {{"smact", 0.25}, {"smocc", 0.75}, {"drama", nullptr}});
    const auto lines = top_lines(view({{"gpus", {g}}}), screen(122));
    const std::string line = line_with(lines, "SMACT [");
    ASSERT_FALSE(line.empty()) << joined(lines);
    for (const char* metric : {"SMACT", "SMOCC", "DRAMA"}) {
        const std::size_t start = line.find(std::string(metric) + " [");
        ASSERT_NE(start, std::string::npos) << metric;
        const std::size_t open = start + 7;
        const std::size_t close = line.find(']', open);
        const std::string cells = line.substr(open, close - open);
        const std::size_t bar = cells.size();
        ASSERT_GE(bar, 10u) << line;
        const std::size_t mark = cells.find('|');
        ASSERT_NE(mark, std::string::npos) << metric << ": " << line;
        const double limit = std::string(metric) == "SMACT" ? 0.6 : 0.5;
        EXPECT_NEAR(static_cast<double>(mark) / bar, limit, 1.0 / bar + 1e-9) << line;
        const auto filled = static_cast<double>(std::count(cells.begin(), cells.end(), '#'));
        if (std::string(metric) == "SMACT") {
            EXPECT_NEAR(filled / bar, 0.25, 1.0 / bar + 1e-9);
            EXPECT_EQ(line.substr(close, 7), "] 0.25 ");
        } else if (std::string(metric) == "SMOCC") {
            // The mark sits inside the fill: 0.75 is over the 0.5 limit.
            EXPECT_NEAR((filled + 1) / bar, 0.75, 1.0 / bar + 1e-9);
            EXPECT_EQ(line.substr(close, 6), "] 0.75");
        } else {
            EXPECT_EQ(filled, 0) << "unknown DRAMA has no fill";
            EXPECT_EQ(line.substr(close, 3), "] ?");
        }
    }
}

// This test verifies the running tasks and the queue in the view's order, with the CLI's units.
TEST(TopViewTest, RunningAndQueueTables) {
    json q = view()["queue"];
    q.push_back({{"id", 12}, {"user", "carol"}, {"name", "bert"}, {"state", "held"}, {"gpus", 2},
                 {"need_mib", nullptr}, {"wait_s", 7300}, {"reason", "held by carol"}});
    const auto lines = top_lines(view({{"queue", q}}), screen());
    const std::string text = joined(lines);
    EXPECT_THAT(text, HasSubstr("RUNNING 1"));
    EXPECT_THAT(text, HasSubstr("QUEUE 2"));
    EXPECT_THAT(line_with(lines, "ID  USER   NAME    GPUS"), HasSubstr("TIME"));
    const std::string running_row = line_with(lines, "7   alice");
    EXPECT_THAT(running_row, HasSubstr("16m40s"));
    EXPECT_THAT(running_row, HasSubstr("12,000 MiB"));
    const std::string queued = line_with(lines, "9   bob");
    EXPECT_THAT(queued, HasSubstr("14,000 MiB"));
    EXPECT_THAT(queued, HasSubstr("1m40s"));
    EXPECT_THAT(queued, HasSubstr("waits for 14,000 MiB on one GPU"));
    const std::string held = line_with(lines, "12  carol");
    EXPECT_THAT(held, HasSubstr("held"));
    EXPECT_THAT(held, HasSubstr("?"));  // need unknown
    EXPECT_THAT(held, HasSubstr("2h01m"));
    EXPECT_THAT(held, HasSubstr("held by carol"));
    EXPECT_LT(text.find("9   bob"), text.find("12  carol")) << "the queue keeps its order";
}

// This test verifies that tasks that ended lately without succeeding are listed with why, in
// their own words (the last line of their stderr, in the daemon's message), and that successes
// and an empty list add no section.
TEST(TopViewTest, RecentFailuresSayWhy) {
    const json recent = json::parse(R"([
        {"id": 21, "array": {"id": 20, "index": 1}, "user": "bob", "name": "sweep",
         "state": "failed", "message": "failed after 1 attempt(s): exit code 1: ModuleNotFoundError: No module named 'torch'"},
        {"id": 19, "array": null, "user": "alice", "name": "ok", "state": "succeeded",
         "message": "succeeded"}])");
    const auto lines = top_lines(view({{"recent", recent}}), screen());
    EXPECT_THAT(joined(lines), HasSubstr("ENDED WITHOUT SUCCESS 1"));
    const std::string row = line_with(lines, "20_1  bob");
    EXPECT_THAT(row, HasSubstr("failed"));
    EXPECT_THAT(row, HasSubstr("ModuleNotFoundError: No module named 'torch'"));
    EXPECT_EQ(line_with(lines, "19  alice"), "");
    EXPECT_THAT(joined(top_lines(view(), screen())), Not(HasSubstr("ENDED WITHOUT SUCCESS")));
}

// This test verifies that without a wait or run time from the daemon, it is counted from the
// view's own clock.
TEST(TopViewTest, TimesFromTheViewsClockWhenNotGiven) {
    json v = view();
    v["running"][0].erase("run_s");
    v["queue"][0].erase("wait_s");
    const auto lines = top_lines(v, screen());
    EXPECT_THAT(line_with(lines, "7   alice"), HasSubstr("16m40s"));
    EXPECT_THAT(line_with(lines, "9   bob"), HasSubstr("1m40s"));
}

// This test verifies cutting to a small screen: never more lines than the height, each section
// ends with "… N more", and no line is wider than the screen.
TEST(TopViewTest, CutToSmallScreens) {
    json gpus = json::array();
    for (int i = 0; i < 8; ++i) {
        gpus.push_back(gpu(i));
    }
    json queue = json::array();
    json running = json::array();
    for (int i = 0; i < 30; ++i) {
        queue.push_back({{"id", 100 + i}, {"user", "bob"}, {"name", "vgg"}, {"state", "queued"},
                         {"gpus", 1}, {"need_mib", 14000}, {"wait_s", 5}, {"reason", "waits"}});
        running.push_back({{"id", 200 + i}, {"user", "alice"}, {"name", "resnet"}, {"gpus", {0}},
                           {"run_s", 10}, {"memory_mib", 1000}});
    }
    const json v = view({{"gpus", gpus}, {"queue", queue}, {"running", running}});
    const TopScreen s = screen(80, 24);
    const auto lines = top_lines(v, s);
    expect_fits(lines, s);
    EXPECT_EQ(lines.size(), 24u);
    const std::string text = joined(lines);
    EXPECT_THAT(text, HasSubstr("more GPUs"));
    EXPECT_THAT(text, HasSubstr("more running tasks"));
    EXPECT_THAT(text, HasSubstr("more queued tasks"));
    EXPECT_THAT(text, HasSubstr("\u2026 "));
    EXPECT_THAT(text, HasSubstr("GPU 0"));
    EXPECT_THAT(text, HasSubstr("QUEUE 30"));

    // Every size down to nothing: no crash, no overflow.
    for (std::size_t w : {0u, 1u, 3u, 10u, 20u, 40u, 79u}) {
        for (std::size_t h : {0u, 1u, 2u, 3u, 5u, 9u}) {
            const TopScreen tiny = screen(w, h, (w + h) % 2 == 0);
            expect_fits(top_lines(v, tiny), tiny);
        }
    }
}

// This test verifies that with room for everything nothing is cut and no "more" line appears.
TEST(TopViewTest, NothingCutWhenItFits) {
    const auto lines = top_lines(view(), screen(120, 40));
    EXPECT_THAT(joined(lines), ::testing::Not(HasSubstr("more")));
}

// This test verifies that long names, wide characters and control characters never make a line
// wider than the screen, and that nothing from the daemon reaches the terminal as an escape.
TEST(TopViewTest, LongNamesUtf8AndControlCharacters) {
    const std::string long_name(300, 'n');
    const std::string wide = "\u8a13\u7df4\u30b8\u30e7\u30d6\u8a13\u7df4\u30b8\u30e7\u30d6";  // 2 columns each
    const std::string evil = "x\033[2J\033]0;owned\007y\u202e";
    json g = gpu(0, {{"name", wide + wide + wide}});
    g["tasks"] = {{{"id", 7}, {"user", evil}, {"name", long_name}, {"used_mib", 12000}},
                  {{"id", 8}, {"user", "b\u00f6b"}, {"name", wide + wide}, {"used_mib", 100}}};
    json v = view({{"gpus", {g}}});
    v["running"][0]["name"] = wide + long_name;
    v["running"][0]["user"] = evil;
    v["queue"][0]["reason"] = evil + long_name;
    v["queue"][0]["name"] = wide + wide + wide + wide;
    for (bool colour : {false, true}) {
        for (std::size_t w : {30u, 61u, 80u, 121u}) {
            const TopScreen s = screen(w, 40, colour);
            const auto lines = top_lines(v, s);
            expect_fits(lines, s);
            for (const std::string& l : lines) {
                if (!colour) {
                    EXPECT_EQ(l.find('\033'), std::string::npos) << l;
                }
                EXPECT_EQ(l.find('\007'), std::string::npos) << l;
                EXPECT_EQ(l.find("\u202e"), std::string::npos) << l;
            }
        }
    }
    EXPECT_THAT(joined(top_lines(v, screen(200))), HasSubstr("x?[2J?]0;owned?y?"));
}

// This test verifies colour: SGR escapes only when asked, and they take no columns.
TEST(TopViewTest, ColourOnlyWhenAsked) {
    const json hot = gpu(0, {{"risk", {{"high", true}, {"rule", "paper"}, {"reason", "busy"}}}});
    const auto plain = top_lines(view({{"gpus", {hot}}}), screen(100, 40, false));
    const auto coloured = top_lines(view({{"gpus", {hot}}}), screen(100, 40, true));
    EXPECT_EQ(joined(plain).find('\033'), std::string::npos);
    EXPECT_THAT(joined(coloured), HasSubstr("\033[1;31mHIGH\033[0m"));
    ASSERT_EQ(plain.size(), coloured.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
        EXPECT_LE(screen_columns(coloured[i]), 100u);
    }
}

// This test verifies that fields missing, null or of the wrong type show as '?' or '-' and never
// throw: a newer or older daemon may send another shape.
TEST(TopViewTest, MissingNullAndOddFields) {
    const json sparse_gpu = {{"index", nullptr}, {"tasks", {{{"id", nullptr}}, 5, "x"}}};
    const json odd_gpu = {{"index", 2},
                          {"name", 17},
                          {"total_mib", "big"},
                          {"used_mib", nullptr},
                          {"smact", "high"},
                          {"health", "ok"},
                          {"risk", {{"high", "yes"}}},
                          {"locked", nullptr},
                          {"sources", 3},
                          {"tasks", {{"id", 3}}},
                          {"other_mib", -5}};
    const json views[] = {
        json(nullptr),
        json::array(),
        json("text"),
        json::object(),
        json{{"gpus", nullptr}, {"queue", 3}, {"running", "x"}, {"risk_thresholds", nullptr}},
        json{{"gpus", {sparse_gpu, odd_gpu, nullptr, 1}},
             {"queue", {nullptr, json::object(), {{"id", 1}, {"gpus", nullptr}}}},
             {"running", {json::object(), {{"gpus", "0,1"}, {"run_s", 1e300}, {"started_at", -1e300}}}},
             {"now", "noon"},
             {"time_scale", nullptr}},
    };
    for (const json& v : views) {
        for (bool colour : {false, true}) {
            const TopScreen s = screen(90, 60, colour);
            std::vector<std::string> lines;
            ASSERT_NO_THROW(lines = top_lines(v, s)) << v.dump();
            expect_fits(lines, s);
        }
    }
    const auto lines = top_lines(views[5], screen(120, 60));
    const std::string text = joined(lines);
    EXPECT_THAT(text, HasSubstr("GPU ?"));
    EXPECT_THAT(line_with(lines, "GPU ?"), HasSubstr("health ?"));
    EXPECT_THAT(line_with(lines, "GPU ?"), HasSubstr("risk ?"));
    EXPECT_THAT(line_with(lines, "GPU ?"), HasSubstr("lock ?"));
    EXPECT_THAT(line_with(lines, "GPU ?"), HasSubstr("src ?"));
    EXPECT_THAT(line_with(lines, "GPU 2"), HasSubstr("risk ?"));
    EXPECT_THAT(line_with(lines, "mem "), HasSubstr("?/?"));
    EXPECT_THAT(line_with(lines, "SMACT"), HasSubstr("?"));
    EXPECT_THAT(text, HasSubstr("policy ?"));
    EXPECT_THAT(text, HasSubstr("RUNNING 2"));
    EXPECT_THAT(text, HasSubstr("QUEUE 3"));
}

// This test verifies the daemon's error on screen: under the header, with the last answer still
// shown and its age; before any answer, the error alone.
TEST(TopViewTest, ErrorShownAboveTheLastView) {
    TopScreen s = screen(60);
    s.now = kNow + 65;
    s.error = "cannot reach the CARMA daemon at /run/x.sock: connection refused; retrying every 1s";
    const auto lines = top_lines(view(), s);
    expect_fits(lines, s);
    const std::string text = joined(lines);
    EXPECT_THAT(text, HasSubstr("carma: cannot reach the CARMA daemon"));
    EXPECT_THAT(text, HasSubstr("retrying every 1s"));
    EXPECT_THAT(text, HasSubstr("(1m05s ago)"));
    EXPECT_THAT(text, HasSubstr("GPU 0"));

    const auto first = top_lines(json(nullptr), s);
    EXPECT_THAT(joined(first), HasSubstr("connection refused"));
    EXPECT_THAT(joined(first), ::testing::Not(HasSubstr("GPU")));
    EXPECT_THAT(joined(top_lines(json(nullptr), screen())), HasSubstr("waiting for the daemon"));
}

// This test verifies the viewer's own tasks in bold (colour only).
TEST(TopViewTest, ViewersTasksInBold) {
    const auto lines = top_lines(view(), screen(120, 40, true));
    EXPECT_THAT(line_with(lines, "alice  resnet"), HasSubstr("\033[1m"));
    EXPECT_THAT(line_with(lines, "bob    vgg"), ::testing::Not(HasSubstr("\033[1m7")));
}

}  // namespace
}  // namespace carma::cli
