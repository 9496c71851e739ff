// `carma report`: the answer of GET /v1/timeline turned into the report's record
// (cli/views/timeline_record.h), and the command end to end against a fake daemon on a temporary
// Unix socket that answers canned JSON.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/fake_daemon.h"
#include "cli/run_command.h"
#include "cli/views/timeline_record.h"
#include "sim/svg_check.h"

namespace carma {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// Six hours of a two-GPU daemon: resnet crashed out of memory on GPU 0 and succeeded on GPU 1;
// a two-GPU task still runs; bert waits; a task was cancelled while it waited.
const json kTimeline = json::parse(R"({
  "since": 1764578400.0, "until": 1764600000.0, "step_s": 36.0,
  "policy": "carma", "backend": "emulated", "time_scale": 60,
  "gpus": [
    {"index": 0, "name": "A100-40GB", "total_mib": 40960,
     "samples": [
       {"t": 1764578410.0, "used_mib": 13000, "smact": 0.4, "smocc": 0.3, "drama": 0.2, "power_w": 250.0},
       {"t": 1764590400.0, "used_mib": 40960, "smact": 0.9, "smocc": 0.6, "drama": 0.5, "power_w": 390.0},
       {"t": 1764590436.0, "used_mib": null, "smact": null, "smocc": null, "drama": null, "power_w": null}]},
    {"index": 1, "name": "A100-40GB", "total_mib": null,
     "samples": [
       {"t": 1764578410.0, "used_mib": 1000, "smact": 0.0, "smocc": 0.0, "drama": 0.0, "power_w": 60.0}]}],
  "tasks": [
    {"id": 7, "user": "alice", "name": "resnet", "gpus": 1, "state": "succeeded",
     "submitted_at": 1764590000.0, "started_at": 1764590010.0, "finished_at": 1764599000.0,
     "energy_j": 51234.0,
     "attempts": [
       {"number": 1, "gpus": [0], "started_at": 1764590010.0, "ended_at": 1764590400.0,
        "outcome": "out-of-memory"},
       {"number": 2, "gpus": [1], "started_at": 1764590500.0, "ended_at": 1764599000.0,
        "outcome": "succeeded"}]},
    {"id": 8, "user": "bob", "name": "vgg <b>", "gpus": 2, "state": "running",
     "submitted_at": 1764594000.0, "started_at": 1764595000.0, "finished_at": null,
     "energy_j": null,
     "attempts": [
       {"number": 1, "gpus": [0, 1], "started_at": 1764595000.0, "ended_at": null,
        "outcome": "running"}]},
    {"id": 9, "user": "carol", "name": "bert", "gpus": 1, "state": "queued",
     "submitted_at": 1764598000.0, "started_at": null, "finished_at": null, "energy_j": null,
     "attempts": []},
    {"id": 10, "user": "dave", "name": "gone", "gpus": 1, "state": "cancelled",
     "submitted_at": 1764596000.0, "started_at": null, "finished_at": 1764597000.0,
     "energy_j": null, "attempts": []}
  ]
})");
constexpr double kSince = 1764578400.0;

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// This test verifies the conversion: one daemon "policy" with every task, its attempts as spans
// on the window's clock (t = 0 at since), waits outside the attempts, unknown samples unknown,
// and the table's figures over the window.
TEST(ComparisonFromTimeline, ConvertsTasksAttemptsAndSamples) {
    const auto c = cli::comparison_from_timeline(kTimeline);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->kind, sim::RecordKind::DaemonHistory);
    EXPECT_EQ(c->origin_unix_s, kSince);
    EXPECT_EQ(c->span_s, 6 * 3600);
    EXPECT_EQ(c->gpus, "2xA100-40GB");
    EXPECT_EQ(c->backend, "emulated");
    ASSERT_EQ(c->results.size(), 1u);
    const sim::PolicyResult& r = c->results[0];
    EXPECT_EQ(r.policy, "carma");
    ASSERT_EQ(r.tasks.size(), 4u);

    const sim::TaskRecord& resnet = r.tasks[0];
    EXPECT_EQ(resnet.id, 7);
    EXPECT_EQ(resnet.user, "alice");
    EXPECT_EQ(resnet.state, "succeeded");
    ASSERT_EQ(resnet.spans.size(), 2u);
    EXPECT_EQ(resnet.spans[0].outcome, sim::AttemptOutcome::OutOfMemory);
    EXPECT_EQ(resnet.spans[0].gpus, std::vector<int>{0});
    EXPECT_EQ(resnet.spans[0].start_s, 11610);  // 1764590010 - since
    EXPECT_EQ(resnet.spans[0].end_s, 12000);
    EXPECT_EQ(resnet.spans[1].outcome, sim::AttemptOutcome::Succeeded);
    EXPECT_EQ(resnet.attempts, 2);
    EXPECT_EQ(resnet.oom_crashes, 1);
    EXPECT_EQ(resnet.submit_s, 11600);
    EXPECT_EQ(resnet.first_start_s, 11610);
    EXPECT_EQ(resnet.finish_s, 20600);
    EXPECT_EQ(resnet.left_s, -1);
    EXPECT_EQ(resnet.wait_s, 10 + 100);  // before attempt 1, between the two
    EXPECT_EQ(resnet.gpu_ids, std::vector<int>{1});

    const sim::TaskRecord& vgg = r.tasks[1];
    ASSERT_EQ(vgg.spans.size(), 1u);
    EXPECT_EQ(vgg.spans[0].end_s, -1);
    EXPECT_EQ(vgg.spans[0].outcome, sim::AttemptOutcome::Running);
    EXPECT_EQ(vgg.spans[0].gpus, (std::vector<int>{0, 1}));
    EXPECT_EQ(vgg.finish_s, -1);
    EXPECT_EQ(vgg.wait_s, 1000);

    EXPECT_EQ(r.tasks[2].wait_s, 2000);  // still waiting at the window's end
    EXPECT_EQ(r.tasks[2].first_start_s, -1);
    EXPECT_EQ(r.tasks[3].left_s, 18600);  // cancelled while it waited
    EXPECT_EQ(r.tasks[3].wait_s, 1000);

    EXPECT_EQ(r.tasks_completed, 1);
    EXPECT_EQ(r.tasks_rejected, 0);
    EXPECT_EQ(r.attempts, 3);
    EXPECT_EQ(r.oom_crashes, 1);
    EXPECT_EQ(r.mean_wait_s, 110);
    EXPECT_EQ(r.mean_jct_s, 9000);
    EXPECT_EQ(r.makespan_s, 20600 - 11610);

    ASSERT_EQ(r.timelines.size(), 2u);
    const auto& g0 = r.timelines[0].points;
    ASSERT_EQ(g0.size(), 3u);
    EXPECT_EQ(g0[0].t_s, 10);
    EXPECT_DOUBLE_EQ(g0[0].smact, 0.4);
    EXPECT_DOUBLE_EQ(g0[0].memory_used_frac, 13000.0 / 40960.0);
    EXPECT_DOUBLE_EQ(g0[1].memory_used_frac, 1.0);
    EXPECT_TRUE(std::isnan(g0[2].smact));  // unknown, not 0
    EXPECT_TRUE(std::isnan(g0[2].memory_used_frac));
    EXPECT_TRUE(std::isnan(r.timelines[1].points[0].memory_used_frac));  // no total_mib
    // Each sample holds one step (36 s) at most: 250 W + 390 W for 36 s on GPU 0, 60 W on GPU 1.
    EXPECT_DOUBLE_EQ(r.energy_j, (250.0 + 390.0 + 60.0) * 36);
}

// This test verifies that every malformed answer is a clear error naming the field by its path,
// never a crash.
TEST(ComparisonFromTimeline, NamesTheBadField) {
    struct Case {
        const char* what;
        void (*change)(json&);
        const char* expected;
    };
    const Case cases[] = {
        {"not an object", [](json& j) { j = json::array(); }, "the answer should be a JSON object"},
        {"no since", [](json& j) { j.erase("since"); }, "since is missing"},
        {"since null", [](json& j) { j["since"] = nullptr; }, "since is null"},
        {"until before since", [](json& j) { j["until"] = 1764500000.0; },
         "until (1764500000) is not after since"},
        {"no gpus", [](json& j) { j.erase("gpus"); }, "gpus is missing"},
        {"gpus an object", [](json& j) { j["gpus"] = json::object(); }, "gpus should be an array"},
        {"gpu index 1.5", [](json& j) { j["gpus"][0]["index"] = 1.5; },
         "gpus[0].index should be a whole number, not 1.5"},
        {"sample time text", [](json& j) { j["gpus"][0]["samples"][1]["t"] = "noon"; },
         "gpus[0].samples[1].t should be a number, not \"noon\""},
        {"smact text", [](json& j) { j["gpus"][1]["samples"][0]["smact"] = "high"; },
         "gpus[1].samples[0].smact should be a number or null"},
        {"no tasks", [](json& j) { j.erase("tasks"); }, "tasks is missing"},
        {"task a number", [](json& j) { j["tasks"][2] = 5; },
         "tasks[2] should be an object, not 5"},
        {"no submitted_at", [](json& j) { j["tasks"][1].erase("submitted_at"); },
         "tasks[1].submitted_at is missing"},
        {"id text", [](json& j) { j["tasks"][0]["id"] = "seven"; },
         "tasks[0].id should be a whole number"},
        {"unknown outcome", [](json& j) { j["tasks"][0]["attempts"][0]["outcome"] = "suspended"; },
         "tasks[0].attempts[0].outcome is 'suspended', not one of running, succeeded, "
         "out-of-memory"},
        {"gpu index text", [](json& j) { j["tasks"][0]["attempts"][1]["gpus"][0] = "a"; },
         "tasks[0].attempts[1].gpus[0] should be a GPU index"},
        {"attempt without gpus", [](json& j) { j["tasks"][1]["attempts"][0].erase("gpus"); },
         "tasks[1].attempts[0].gpus is missing"},
        {"policy a number", [](json& j) { j["policy"] = 3; }, "policy should be a string or null"},
    };
    for (const Case& c : cases) {
        json answer = kTimeline;
        c.change(answer);
        const auto converted = cli::comparison_from_timeline(answer);
        ASSERT_FALSE(converted) << c.what;
        EXPECT_EQ(converted.error().code, ErrorCode::InvalidArgument) << c.what;
        EXPECT_THAT(converted.error().message, HasSubstr(c.expected)) << c.what;
        EXPECT_THAT(converted.error().message, HasSubstr("GET /v1/timeline")) << c.what;
    }
}

// This test verifies the fields the page can do without: absent or null descriptions, an empty
// history, and an attempt not launched yet.
TEST(ComparisonFromTimeline, ToleratesAbsentDescriptionsAndEmptyHistory) {
    json answer = kTimeline;
    answer.erase("policy");
    answer.erase("backend");
    answer.erase("step_s");
    answer["gpus"][0].erase("name");
    answer["tasks"][0].erase("user");
    answer["tasks"][2]["attempts"] = json::array({{{"number", 1},
                                                   {"gpus", {0}},
                                                   {"started_at", nullptr},
                                                   {"ended_at", nullptr},
                                                   {"outcome", "running"}}});
    auto c = cli::comparison_from_timeline(answer);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->gpus, "GPU, A100-40GB");  // names differ: each named
    EXPECT_TRUE(c->results[0].tasks[2].spans.empty());

    c = cli::comparison_from_timeline(
        json::parse(R"({"since": 0, "until": 3600, "gpus": [], "tasks": []})"));
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->results[0].tasks.size(), 0u);
    EXPECT_EQ(c->gpus, "no GPUs");
}

// ---------------------------------------------------------------------------------------------
// The command

class ReportCommand : public ::testing::Test {
  protected:
    void SetUp() override {
        daemon_.respond([](const httplib::Request&, httplib::Response& res) {
            res.set_content(kTimeline.dump(), "application/json");
        });
        dir_ = test_support::make_temp_dir() / "report";
    }
    void TearDown() override { fs::remove_all(dir_.parent_path()); }

    std::string run(std::vector<std::string> extra) {
        std::vector<std::string> args = {"report", "--socket", daemon_.socket()};
        args.insert(args.end(), extra.begin(), extra.end());
        args.push_back(dir_.string());
        return test_support::run_command(cli::add_report_command, args);
    }

    std::string error(std::vector<std::string> extra) {
        std::vector<std::string> args = {"report", "--socket", daemon_.socket()};
        args.insert(args.end(), extra.begin(), extra.end());
        args.push_back(dir_.string());
        return test_support::command_error(cli::add_report_command, args);
    }

    // since and until of the one request.
    std::pair<double, double> window() const {
        const auto seen = daemon_.targets();
        EXPECT_EQ(seen.size(), 1u);
        static const std::regex re(R"(since=([0-9.]+)&until=([0-9.]+))");
        std::smatch m;
        if (seen.empty() || !std::regex_search(seen[0], m, re)) {
            ADD_FAILURE() << "no window in the request";
            return {0, 0};
        }
        return {std::stod(m[1].str()), std::stod(m[2].str())};
    }

    test_support::FakeDaemon daemon_;
    fs::path dir_;
};

// This test verifies the command end to end: one request for the window, the page with every
// task and the out-of-memory crash marked, well formed and self-contained, and the CSVs.
TEST_F(ReportCommand, WritesThePageOfTheDaemonsHistory) {
    const std::string out = run({"--since", "1764578400", "--until", "1764600000"});
    EXPECT_EQ(daemon_.targets(),
              std::vector<std::string>{"GET /v1/timeline?limit=10000&points=1000&since="
                                       "1764578400.000&until=1764600000.000"});
    EXPECT_THAT(out, HasSubstr("report written to " + (dir_ / "index.html").string() +
                               " (4 tasks, 6h00m of history)"));

    const std::string html = read_file(dir_ / "index.html");
    EXPECT_THAT(html, HasSubstr("CARMA daemon report"));
    EXPECT_THAT(html, HasSubstr("hours since 2025-12-01 08:40 UTC"));
    for (const char* name : {">resnet<", ">vgg &lt;b&gt;<", ">bert<", ">gone<"}) {
        EXPECT_THAT(html, HasSubstr(name));
    }
    EXPECT_THAT(html, HasSubstr("class=\"oom-mark\""));
    EXPECT_THAT(html, HasSubstr("resnet: attempt 1 out of memory on GPU 0 at 3.33 h"));
    EXPECT_THAT(html, HasSubstr("<rect class=\"attempt oom\""));
    EXPECT_THAT(html, HasSubstr("<rect class=\"attempt running\""));
    EXPECT_EQ(test_support::tag_balance_error(html), std::nullopt);
    EXPECT_THAT(html, HasSubstr("<meta charset=\"utf-8\">"));
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("src="), std::string::npos);
    EXPECT_EQ(html.find("nan"), std::string::npos);
    for (const std::string& svg : test_support::svgs_of(html)) {
        const auto overlaps = test_support::overlapping_labels(svg);
        EXPECT_TRUE(overlaps.empty()) << overlaps.front();
    }

    const std::string tasks = read_file(dir_ / "tasks.csv");
    EXPECT_THAT(tasks, HasSubstr("\ncarma,7,alice,resnet,1,succeeded,1764590000.0,1764590010.0,"
                                 "1764599000.0,110.0,2,1,1764590010.0-1764590400.0@0:out-of-"
                                 "memory 1764590500.0-1764599000.0@1:succeeded\n"));
    EXPECT_THAT(tasks, HasSubstr("\ncarma,8,bob,vgg <b>,2,running,"));
    EXPECT_THAT(read_file(dir_ / "results.csv"), HasSubstr("\ncarma,2.49722,"));
}

// This test verifies the window: 24 h up to now by default, --since alone up to now, relative
// times taken from the same now.
TEST_F(ReportCommand, DefaultWindowIsTheLastDay) {
    run({});
    auto [since, until] = window();
    EXPECT_DOUBLE_EQ(until - since, 24 * 3600);
    EXPECT_GT(until, 1.7e9);
}

TEST_F(ReportCommand, SinceTakesWhatAcctTakes) {
    run({"--since", "2h"});
    auto [since, until] = window();
    EXPECT_DOUBLE_EQ(until - since, 2 * 3600);
}

TEST_F(ReportCommand, IsoDatesInUtc) {
    run({"--since", "2025-12-01T08:40Z", "--until", "2025-12-01T14:40Z"});
    auto [since, until] = window();
    EXPECT_EQ(since, 1764578400);
    EXPECT_EQ(until, 1764600000);
}

// This test verifies where history starts: the earliest sample, submission or attempt start, never
// before the answer's `since`; an answer with nothing in it has none.
TEST(FirstRecorded, EarliestSampleSubmissionOrStart) {
    EXPECT_EQ(cli::first_recorded(kTimeline), 1764578410.0);
    json later = kTimeline;
    later["gpus"] = json::array();
    EXPECT_EQ(cli::first_recorded(later), 1764590000.0);  // resnet's submission
    later["since"] = 1764595000.0;                       // tasks submitted earlier still wait
    EXPECT_EQ(cli::first_recorded(later), 1764595000.0);
    EXPECT_EQ(cli::first_recorded(json::parse(R"({"since": 1, "until": 2, "gpus": [],
                                                   "tasks": []})")),
              std::nullopt);
    EXPECT_EQ(cli::first_recorded(json::parse("[]")), std::nullopt);
}

// This test verifies that a window mostly before the daemon's first record is asked again from
// just before that record (2 % of what remains ahead of it), so the page draws the history, not
// a sliver of it; one whose history starts at once is asked once (the tests above).
TEST_F(ReportCommand, DrawsFromJustBeforeTheFirstRecord) {
    const std::string out = run({"--since", "1764500000", "--until", "1764600000"});
    const auto seen = daemon_.targets();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_THAT(seen[0], HasSubstr("since=1764500000.000&until=1764600000.000"));
    EXPECT_THAT(seen[1], HasSubstr("since=1764577978.200&until=1764600000.000"));
}

// This test verifies the errors: bad times before any request, the daemon's refusal (a daemon
// without the endpoint), a malformed answer naming its field, and no daemon at all.
TEST_F(ReportCommand, FailsClearly) {
    EXPECT_THAT(error({"--since", "yesterday"}), HasSubstr("--since: "));
    EXPECT_THAT(error({"--since", "1h", "--until", "2h"}), HasSubstr("must be before --until"));
    EXPECT_TRUE(daemon_.targets().empty());

    daemon_.respond([](const httplib::Request&, httplib::Response& res) {
        res.status = 404;
        res.set_content(R"({"error": "no such endpoint: /v1/timeline"})", "application/json");
    });
    const std::string not_found = error({});
    EXPECT_THAT(not_found, HasSubstr("HTTP 404 to GET /v1/timeline: no such endpoint"));
    EXPECT_THAT(not_found, HasSubstr("older than this carma"));

    daemon_.respond([](const httplib::Request&, httplib::Response& res) {
        json bad = kTimeline;
        bad["tasks"][0]["attempts"][0].erase("outcome");
        res.set_content(bad.dump(), "application/json");
    });
    EXPECT_THAT(error({}), HasSubstr("tasks[0].attempts[0].outcome is missing"));
    EXPECT_FALSE(fs::exists(dir_ / "index.html"));

    daemon_.respond([](const httplib::Request&, httplib::Response& res) {
        res.set_content("<html>", "text/html");
    });
    EXPECT_THAT(error({}), HasSubstr("is not JSON"));

    const std::string nowhere = test_support::command_error(
        cli::add_report_command,
        {"report", "--socket", (dir_.parent_path() / "none.sock").string(), dir_.string()});
    EXPECT_THAT(nowhere, HasSubstr("none.sock"));
}

}  // namespace
}  // namespace carma
