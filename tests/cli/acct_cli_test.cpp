// `carma acct`: parsing --format, the table and totals it prints, and what it asks the daemon
// (GET /v1/acct) for its flags, against a small fake daemon on a temporary Unix socket.

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/fake_daemon.h"
#include "cli/run_command.h"
#include "cli/views/acct_view.h"

namespace carma {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// The fake daemon answers every request with kAnswer; targets() are "GET /v1/acct?...".
struct FakeAcctDaemon : test_support::FakeDaemon {
    explicit FakeAcctDaemon(json answer) {
        respond([answer](const httplib::Request&, httplib::Response& res) {
            res.set_content(answer.dump(), "application/json");
        });
    }
};

std::string run_acct(std::vector<std::string> args) {
    return test_support::run_command(cli::add_acct_command, std::move(args));
}

std::string acct_error(std::vector<std::string> args) {
    return test_support::command_error(cli::add_acct_command, std::move(args));
}

const json kAnswer = json::parse(R"({
  "tasks": [
    {"id": 7, "name": "maskrcnn", "user": "alice", "state": "succeeded",
     "submitted_at": 1000.0, "started_at": 1012.0, "finished_at": 4700.0,
     "wait_s": 12.0, "run_s": 3650.0, "gpus": 1, "gpu_hours": 1.0139, "energy_j": 812345.6,
     "peak_mib": 28606,
     "attempts": [
       {"number": 1, "outcome": "out-of-memory", "gpus": [1], "started_at": 1012.0,
        "ended_at": 1062.0, "run_s": 50.0, "energy_j": 4500.0, "peak_mib": 11000},
       {"number": 2, "outcome": "succeeded", "gpus": [0], "started_at": 1100.0,
        "ended_at": 4700.0, "run_s": 3600.0, "energy_j": 807845.6, "peak_mib": 28606}]},
    {"id": 9, "name": "echo", "user": "bob", "state": "cancelled",
     "submitted_at": 2000.0, "started_at": null, "finished_at": 2005.0,
     "wait_s": null, "run_s": 0.0, "gpus": 2, "gpu_hours": 0.0, "energy_j": null,
     "peak_mib": null, "attempts": []}
  ],
  "totals": [
    {"user": "alice", "tasks": 1, "attempts": 2, "run_s": 3650.0, "gpu_hours": 1.0139,
     "energy_j": 812345.6, "mean_wait_s": 12.0},
    {"user": "bob", "tasks": 1, "attempts": 0, "run_s": 0.0, "gpu_hours": 0.0,
     "energy_j": null, "mean_wait_s": null}
  ]
})");

std::string fixed_time(double t) { return fmt::format("t{:.0f}", t); }

// This test verifies --format: fields in the order given, any case, spaces allowed; an unknown
// one is named with the nearest valid field and the list of all.
TEST(AcctCliTest, ParsesFormat) {
    EXPECT_EQ(*cli::parse_acct_format("id,user,state,wait,run,energy"),
              (std::vector<std::string>{"id", "user", "state", "wait", "run", "energy"}));
    EXPECT_EQ(*cli::parse_acct_format(" ID , GPU_Hours"),
              (std::vector<std::string>{"id", "gpu_hours"}));
    auto typo = cli::parse_acct_format("id,enrgy");
    ASSERT_FALSE(typo);
    EXPECT_THAT(typo.error().message, HasSubstr("unknown field 'enrgy' (did you mean 'energy'?)"));
    EXPECT_THAT(typo.error().message, HasSubstr("fields: id, name, user, state, submitted"));
    auto far = cli::parse_acct_format("colour");
    ASSERT_FALSE(far);
    EXPECT_THAT(far.error().message, HasSubstr("unknown field 'colour'; fields:"));
    EXPECT_FALSE(cli::parse_acct_format("id,,run"));
    EXPECT_FALSE(cli::parse_acct_format(""));
    for (const std::string& f : cli::acct_default_fields()) {
        EXPECT_TRUE(cli::parse_acct_format(f)) << f;
    }
}

// This test verifies the table: a row per task with the chosen columns (unknown figures as
// "-"), numbers right-aligned, then the totals per user.
TEST(AcctCliTest, TableAndTotals) {
    const std::string out = cli::format_acct(
        kAnswer, {"id", "user", "state", "start", "wait", "run", "outcomes", "gpu_hours", "peak",
                  "energy"},
        fixed_time);
    EXPECT_THAT(out, HasSubstr("ID  USER   STATE      START  WAIT    RUN  OUTCOMES"));
    EXPECT_THAT(out, HasSubstr("7   alice  succeeded  t1012   12s  1h00m  "
                               "out-of-memory,succeeded   1.01  28,606 MiB  812.3 kJ\n"));
    EXPECT_THAT(out, HasSubstr("9   bob    cancelled  -         -     0s  -"));
    EXPECT_THAT(out, HasSubstr("totals per user\n"));
    EXPECT_THAT(out, HasSubstr("USER   TASKS  ATTEMPTS    RUN  GPU_TIME    ENERGY  MEAN_WAIT\n"));
    EXPECT_THAT(out, HasSubstr("alice      1         2  1h00m     1h00m  812.3 kJ        12s\n"));
    EXPECT_THAT(out, HasSubstr("bob        1         0     0s        0s         -          -\n"));
    EXPECT_EQ(cli::format_acct(json{{"tasks", json::array()}, {"totals", json::array()}},
                               cli::acct_default_fields(), fixed_time),
              "no finished task matches\n");
}

// This test verifies REASON: why a task that did not succeed ended, in its own words, cut to fit
// (`carma show` has it whole); a success has none.
TEST(AcctCliTest, ReasonColumn) {
    json answer = kAnswer;
    for (json& row : answer["tasks"]) {
        row["message"] = row["state"] == "succeeded"
                             ? std::string("succeeded")
                             : "failed after 1 attempt(s): exit code 1: ModuleNotFoundError: No "
                               "module named 'torch' " + std::string(40, 'x');
    }
    const std::string out = cli::format_acct(answer, {"id", "state", "reason"}, fixed_time);
    EXPECT_THAT(out, HasSubstr("7   succeeded  -\n"));
    EXPECT_THAT(out, HasSubstr("9   cancelled  failed after 1 attempt(s): exit code 1: "
                               "ModuleNotFoundError: No mod"));
    EXPECT_THAT(out, Not(HasSubstr("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")));
    EXPECT_EQ(cli::acct_default_fields().back(), "reason");
}

// This test verifies that GPU time reads as the run time does, by magnitude (a five-minute task
// showed "0.07" GPU-hours), and is the default column; GPU-hours stay a field for scripts.
TEST(AcctCliTest, GpuTimeByMagnitude) {
    const std::string out = cli::format_acct(kAnswer, {"id", "gpu_time"}, fixed_time);
    EXPECT_THAT(out, HasSubstr("ID  GPU_TIME\n7      1h00m\n9         0s\n"));
    const auto& defaults = cli::acct_default_fields();
    EXPECT_NE(std::find(defaults.begin(), defaults.end(), "gpu_time"), defaults.end());
    EXPECT_EQ(std::find(defaults.begin(), defaults.end(), "gpu_hours"), defaults.end());
}

// This test verifies how energy is written: joules, then kJ, then MJ.
TEST(AcctCliTest, EnergyUnits) {
    EXPECT_EQ(cli::format_energy(0), "0 J");
    EXPECT_EQ(cli::format_energy(8250.4), "8,250 J");
    EXPECT_EQ(cli::format_energy(12500), "12.5 kJ");
    EXPECT_EQ(cli::format_energy(3.25e6), "3250.0 kJ");
    EXPECT_EQ(cli::format_energy(32.5e6), "32.50 MJ");
}

// This test verifies what `carma acct` asks for: its filters as query parameters (the user
// escaped, --since turned into unix time), the table by default and the answer as it came with
// --json; bad flags fail before asking.
TEST(AcctCliTest, CommandAsksTheDaemon) {
    FakeAcctDaemon daemon(kAnswer);
    const std::string out = run_acct({"acct", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("ID  NAME      USER   STATE      SUBMITTED"));
    EXPECT_THAT(out, HasSubstr("totals per user"));
    const std::string js = run_acct({"acct", "--json", "-u", "al ice&x", "--state",
                                     "FAILED,cancelled", "--since", "1764441600",
                                     "--socket", daemon.socket()});
    EXPECT_EQ(json::parse(js), kAnswer);
    const std::string fields = run_acct({"acct", "-o", "id,energy", "--socket", daemon.socket()});
    EXPECT_THAT(fields, HasSubstr("ID    ENERGY\n7   812.3 kJ\n9          -\n"));
    EXPECT_THAT(fields, Not(HasSubstr("USER   STATE")));
    const std::vector<std::string> targets = daemon.targets();
    ASSERT_EQ(targets.size(), 3u);
    EXPECT_EQ(targets[0], "GET /v1/acct?limit=10000");
    EXPECT_EQ(targets[1],
              "GET /v1/acct?limit=10000&since=1764441600.000&state=failed,cancelled&user=al ice&x");

    EXPECT_THAT(acct_error({"acct", "-o", "id,enrgy", "--socket", daemon.socket()}),
                HasSubstr("--format: unknown field 'enrgy' (did you mean 'energy'?)"));
    EXPECT_THAT(acct_error({"acct", "--since", "yesterday", "--socket", daemon.socket()}),
                HasSubstr("--since: 'yesterday' is not a time"));
    EXPECT_EQ(daemon.targets().size(), 3u);  // neither was sent
}

// This test verifies that a relative --since is counted back from now.
TEST(AcctCliTest, RelativeSince) {
    FakeAcctDaemon daemon(kAnswer);
    // The command's clock has a fraction of a second; bracket it with the same clock. The query
    // carries milliseconds, rounded to nearest, so allow half of one on either side.
    const auto unix_now = [] {
        using namespace std::chrono;
        return duration<double>(system_clock::now().time_since_epoch()).count();
    };
    const double before = unix_now();
    run_acct({"acct", "--since", "2h", "--socket", daemon.socket()});
    const double after = unix_now();
    ASSERT_EQ(daemon.targets().size(), 1u);
    const std::string target = daemon.targets()[0];
    const std::string prefix = "GET /v1/acct?limit=10000&since=";
    ASSERT_EQ(target.rfind(prefix, 0), 0u) << target;
    const double since = std::stod(target.substr(prefix.size()));
    constexpr double kWireRounding = 0.0005;
    EXPECT_GE(since, before - 7200 - kWireRounding);
    EXPECT_LE(since, after - 7200 + kWireRounding);
}

}  // namespace
}  // namespace carma
