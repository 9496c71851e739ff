// The server's side of scheduling over nodes (cluster/hub.h) and the agents' wire
// (cluster/wire.h), driven with reports as an agent would send them.

#include "cluster/hub.h"
#include "cluster/reports.h"

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

// The commands of an answer of one kind (answers also carry log requests and checks).
std::vector<Command> of_kind(const json& answer, Command::Kind kind) {
    auto all = commands_from_json(answer);
    EXPECT_TRUE(all) << all.error().message;
    std::vector<Command> out;
    for (const Command& c : all ? *all : std::vector<Command>{}) {
        if (c.kind == kind) {
            out.push_back(c);
        }
    }
    return out;
}

AttemptReport attempt_of(const std::string& name,
                         AttemptReport::State state = AttemptReport::State::Running) {
    AttemptReport a;
    a.name = name;
    a.dir = "/agent/attempts/" + name;
    a.shim_pid = 4242;
    a.state = state;
    if (state == AttemptReport::State::Ended) {
        a.exit = exec::ExitRecord{true, 0, std::nullopt, false, 123.5, ""};
    }
    return a;
}

std::string test_support_read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

class HubTest : public testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / fs::path("carma-hub-" + std::to_string(::getpid()) +
                                                    "-" + testing::UnitTest::GetInstance()
                                                              ->current_test_info()
                                                              ->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::unique_ptr<Hub> hub(std::function<AllocationState(const std::string&)> alloc = nullptr,
                             double node_timeout_s = 30) {
        HubOptions o;
        o.token = "0123456789abcdef";
        o.state_dir = dir_.string();
        o.node_timeout_s = node_timeout_s;
        o.launch_timeout_s = 5;
        o.allocation_state = std::move(alloc);
        auto h = Hub::create(std::move(o));
        EXPECT_TRUE(h) << h.error().message;
        return std::move(*h);
    }
    fs::path dir_;
};

// This test verifies that a report survives the wire unchanged: GPUs, samples with unknown
// metrics left unknown, attempts with their exit record, and launch replies.
TEST(WireTest, ReportRoundTrips) {
    AgentReport r = report_of("n1", 2);
    r.samples[1].smocc.reset();
    AttemptReport a = ended_attempt();
    a.stderr_tail = "CUDA out of memory";
    r.attempts.push_back(a);
    r.replies.push_back(LaunchReply{9, true, 77, "/state/attempts/12-1", "", false});
    auto back = report_from_json(json::parse(to_json(r).dump()));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->node, "n1");
    ASSERT_EQ(back->gpus.size(), 2u);
    EXPECT_EQ(back->gpus[1].uuid, "GPU-n1-1");
    EXPECT_EQ(back->samples[0].smact, 0.25);
    EXPECT_FALSE(back->samples[1].smocc);
    EXPECT_EQ(back->samples[0].sources.smact, MetricSource::Emulated);
    EXPECT_EQ(back->samples[1].processes[0].pid, 101);
    ASSERT_EQ(back->attempts.size(), 1u);
    EXPECT_EQ(back->attempts[0].state, AttemptReport::State::Ended);
    EXPECT_EQ(back->attempts[0].exit->exit_code, 3);
    EXPECT_EQ(back->attempts[0].members, (std::set<pid_t>{5, 6}));
    EXPECT_EQ(back->replies[0].id, 9u);
}

// This test verifies that a malformed report or answer names the field, and that agents and
// servers of different wire versions are told to match.
TEST(WireTest, MistakesNameTheField) {
    json j = to_json(report_of("n1", 1));
    j["samples"][0]["smact"] = "high";
    auto bad = report_from_json(j);
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message, HasSubstr("report.samples[0].smact"));
    j = to_json(report_of("n1", 1));
    j["version"] = kWireVersion + 1;
    EXPECT_THAT(report_from_json(j).error().message, HasSubstr("same carma version"));
    json answer = {{"version", kWireVersion},
                   {"commands", {{{"type", "stop"}, {"name", "../etc"}}}}};
    EXPECT_THAT(commands_from_json(answer).error().message,
                HasSubstr("answer.commands[0].name"));
}

// This test verifies that nodes get server GPU indices in the order they first report, that
// the numbering survives a server restart (nodes.json), and that a node not reporting samples as
// an error naming it.
TEST_F(HubTest, NodesGetStableGpuIndices) {
    {
        auto h = hub();
        ASSERT_TRUE(h->handle_report(to_json(report_of("n2", 2))));
        ASSERT_TRUE(h->handle_report(to_json(report_of("n1", 3))));
        const auto gpus = h->gpus();
        ASSERT_EQ(gpus.size(), 5u);
        EXPECT_EQ(gpus[0].node, "n2");
        EXPECT_EQ(gpus[2].node, "n1");
        EXPECT_EQ(gpus[4].node_index, 2);
        const auto samples = h->samples();
        EXPECT_EQ(samples[3].index, 3);
        EXPECT_EQ(samples[3].free_mib, 30001);  // n1's GPU 1
        EXPECT_TRUE(samples[3].error.empty());
    }
    auto h = hub();  // restarted: same numbering before any node reports again
    const auto gpus = h->gpus();
    ASSERT_EQ(gpus.size(), 5u);
    EXPECT_EQ(gpus[2].node, "n1");
    EXPECT_EQ(gpus[2].uuid, "GPU-n1-0");
    EXPECT_THAT(h->samples()[2].error, HasSubstr("node n1 has not reported"));
    ASSERT_TRUE(h->handle_report(to_json(report_of("n1", 3))));
    EXPECT_TRUE(h->samples()[2].error.empty());
    EXPECT_THAT(h->samples()[0].error, HasSubstr("node n2"));
}

// This test verifies a launch's round trip: queued for the node, delivered in the answer to its
// next report, and completed by the reply in the report after; the attempt is then followed
// from the node's reports, and forgetting it is passed on.
TEST_F(HubTest, LaunchIsAnsweredThroughReports) {
    auto h = hub();
    ASSERT_TRUE(h->handle_report(to_json(report_of("n1", 1))));
    exec::LaunchRequest req;
    req.argv = {"train.py"};
    req.workdir = "/home/ann";
    req.attempt_dir = "7-1";
    auto launched = std::async(std::launch::async, [&] { return h->launch("n1", req); });
    json answer;
    for (int i = 0; i < 100; ++i) {
        answer = *h->handle_report(to_json(report_of("n1", 1)));
        if (!answer["commands"].empty()) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto commands = commands_from_json(answer);
    ASSERT_TRUE(commands) << commands.error().message;
    ASSERT_EQ(commands->size(), 1u);
    const Command c = (*commands)[0];
    EXPECT_EQ(c.kind, Command::Kind::Launch);
    EXPECT_EQ(c.name, "7-1");
    EXPECT_EQ(c.request.argv, std::vector<std::string>{"train.py"});
    AgentReport r = report_of("n1", 1);
    r.replies.push_back(LaunchReply{c.id, true, 4242, "/agent/attempts/7-1", "", false});
    AttemptReport a;
    a.name = "7-1";
    a.dir = "/agent/attempts/7-1";
    a.shim_pid = 4242;
    a.members = {100};
    r.attempts.push_back(a);
    ASSERT_TRUE(h->handle_report(to_json(r)));
    auto handle = launched.get();
    ASSERT_TRUE(handle) << handle.error().message;
    EXPECT_EQ(handle->node, "n1");
    EXPECT_EQ(handle->shim_pid, 4242);
    EXPECT_EQ(handle->attempt_dir, "/agent/attempts/7-1");
    const RemoteAttempt seen = h->attempt("n1", "7-1");
    EXPECT_EQ(seen.state, RemoteAttempt::State::Running);
    EXPECT_EQ(seen.members, std::set<pid_t>{100});
    // Its end is stored while its last log bytes are still on the node: they are asked for,
    // and the agent is told to forget it once they are in.
    h->forget("n1", "7-1");
    r.replies.clear();
    r.attempts[0] = attempt_of("7-1", AttemptReport::State::Ended);
    json asked = *h->handle_report(to_json(r));
    EXPECT_TRUE(of_kind(asked, Command::Kind::Forget).empty());
    ASSERT_EQ(of_kind(asked, Command::Kind::Logs).size(), 1u);
    r.attempts[0].logs = {LogChunk{false, 0, "done\n", true}, LogChunk{true, 0, "", true}};
    json forget = *h->handle_report(to_json(r));
    EXPECT_EQ(of_kind(forget, Command::Kind::Forget).size(), 1u);
    EXPECT_EQ(test_support_read(h->log_file("n1", "7-1", false)), "done\n");
}

// This test verifies that a launch on a node that is not reporting fails at once, naming it.
TEST_F(HubTest, LaunchOnASilentNodeFails) {
    auto h = hub();
    exec::LaunchRequest req;
    req.argv = {"x"};
    req.attempt_dir = "1-1";
    auto r = h->launch("n9", req);
    ASSERT_FALSE(r);
    EXPECT_THAT(r.error().message, HasSubstr("node n9"));
}

// This test verifies that an attempt running on a node that the server does not know (its launch
// answer was lost) is told to stop, once; a known one (restored) is left alone.
TEST_F(HubTest, StrayAttemptsAreStopped) {
    auto h = hub();
    h->expect("n1", "3-1");
    AgentReport r = report_of("n1", 1);
    for (const char* name : {"3-1", "4-1"}) {
        AttemptReport a;
        a.name = name;
        a.dir = std::string("/agent/attempts/") + name;
        r.attempts.push_back(a);
    }
    auto first = of_kind(*h->handle_report(to_json(r)), Command::Kind::Stop);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].name, "4-1");
    EXPECT_TRUE(of_kind(*h->handle_report(to_json(r)), Command::Kind::Stop).empty());
    // Once the stray has ended, the agent is told to let it go instead of reporting it forever.
    r.attempts[1] = attempt_of("4-1", AttemptReport::State::Ended);
    auto forget = of_kind(*h->handle_report(to_json(r)), Command::Kind::Forget);
    ASSERT_EQ(forget.size(), 1u);
    EXPECT_EQ(forget[0].name, "4-1");
}

// This test verifies that an agent that cannot list its attempts (its directory renamed, NFS
// down) loses nothing: its known attempts stay as they were; once it lists again, one missing
// is asked about and is gone only when the agent confirms its directory is gone.
TEST_F(HubTest, AnAttemptIsGoneOnlyWhenTheAgentConfirmsIt) {
    auto h = hub();
    h->expect("n1", "3-1");
    AgentReport r = report_of("n1", 1);
    r.attempts.push_back(attempt_of("3-1"));
    ASSERT_TRUE(h->handle_report(to_json(r)));
    r.attempts.clear();
    r.scan_error = "cannot read the attempts directory /s/attempts: No such file or directory";
    for (int i = 0; i < kMissingReports + 2; ++i) {
        json answer = *h->handle_report(to_json(r));
        EXPECT_TRUE(of_kind(answer, Command::Kind::Check).empty());
        EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Running);
    }
    r.scan_error.clear();
    auto check = of_kind(*h->handle_report(to_json(r)), Command::Kind::Check);
    ASSERT_EQ(check.size(), 1u);
    EXPECT_EQ(check[0].name, "3-1");
    EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Unknown);
    r.absent = {"3-1"};
    ASSERT_TRUE(h->handle_report(to_json(r)));
    EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Vanished);
}

// This test verifies the rule without a confirmation: missing from kMissingReports reports in a
// row (each listed without error) is gone; reappearing before that resets the count.
TEST_F(HubTest, AnAttemptMissingFromManyReportsIsGone) {
    auto h = hub();
    h->expect("n1", "3-1");
    AgentReport r = report_of("n1", 1);
    for (int i = 0; i < kMissingReports - 1; ++i) {
        ASSERT_TRUE(h->handle_report(to_json(r)));
    }
    EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Unknown);
    r.attempts.push_back(attempt_of("3-1"));
    ASSERT_TRUE(h->handle_report(to_json(r)));
    r.attempts.clear();
    for (int i = 0; i < kMissingReports - 1; ++i) {
        ASSERT_TRUE(h->handle_report(to_json(r)));
    }
    EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Unknown);
    ASSERT_TRUE(h->handle_report(to_json(r)));
    EXPECT_EQ(h->attempt("n1", "3-1").state, RemoteAttempt::State::Vanished);
}

// This test verifies that a second agent started with a node name already live is refused with
// the first agent's host, and that a restarted agent takes over once the first is silent.
TEST_F(HubTest, ASecondAgentOfALiveNodeIsRefused) {
    auto h = hub();
    AgentReport first = report_of("n1", 1);
    first.host = "gpu-a";
    first.instance = "aaaa";
    ASSERT_TRUE(h->handle_report(to_json(first)));
    AgentReport second = first;
    second.host = "gpu-b";
    second.instance = "bbbb";
    auto refused = h->handle_report(to_json(second));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::Conflict);
    EXPECT_THAT(refused.error().message, HasSubstr("gpu-a"));
    EXPECT_TRUE(h->handle_report(to_json(first)));
    EXPECT_EQ(h->nodes()[0].host, "gpu-a");
}

// This test verifies that the server keeps a remote attempt's logs from the chunks its agent
// sends, in order: a repeated chunk is not appended twice, and the answer says where to go on.
TEST_F(HubTest, LogsArriveThroughReports) {
    auto h = hub();
    h->expect("n1", "5-1");
    AgentReport r = report_of("n1", 1);
    r.attempts.push_back(attempt_of("5-1"));
    auto ask = of_kind(*h->handle_report(to_json(r)), Command::Kind::Logs);
    ASSERT_EQ(ask.size(), 1u);
    EXPECT_EQ(ask[0].stdout_offset, 0u);
    r.attempts[0].logs = {LogChunk{false, 0, std::string("epoch 1\n\xff\x00", 10), false}};
    ASSERT_TRUE(h->handle_report(to_json(r)));
    ask = of_kind(*h->handle_report(to_json(r)), Command::Kind::Logs);  // the same chunk again
    ASSERT_EQ(ask.size(), 1u);
    EXPECT_EQ(ask[0].stdout_offset, 10u);
    EXPECT_EQ(test_support_read(h->log_file("n1", "5-1", false)),
              std::string("epoch 1\n\xff\x00", 10));
    EXPECT_EQ(h->log_file("n1", "../../etc", false), "");
}

// This test verifies that a node outside Slurm whose agent is silent past the node timeout is
// unreachable (out of placement, said why), and that an administrator can give it up; a node
// that reports cannot be given up.
TEST_F(HubTest, UnreachableNodeCanBeGivenUp) {
    auto h = hub(nullptr, 1);
    AgentReport r = report_of("n1", 1);
    r.slurm_job.clear();
    ASSERT_TRUE(h->handle_report(to_json(r)));
    auto busy = h->declare_lost("n1");
    ASSERT_FALSE(busy);
    EXPECT_THAT(busy.error().message, HasSubstr("reporting"));
    EXPECT_FALSE(h->declare_lost("n9"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5200));  // past 3 periods + 2 s
    EXPECT_EQ(h->nodes()[0].state, "unreachable");
    EXPECT_THAT(h->unschedulable_reason("n1"), HasSubstr("unreachable"));
    EXPECT_THAT(h->samples()[0].error, HasSubstr("has not reported"));
    ASSERT_TRUE(h->declare_lost("n1"));
    EXPECT_TRUE(h->lost("n1"));
    EXPECT_EQ(h->nodes()[0].state, "lost");
}

// Tests for an agent that holds the token but lies (ctest -R RogueNode).
TEST_F(HubTest, RogueNodeGpuIndexBombIsRefused) {
    auto h = hub();
    AgentReport r = report_of("n1", 1);
    r.gpus[0].index = 2000000000;
    auto refused = h->handle_report(to_json(r));
    ASSERT_FALSE(refused);
    EXPECT_THAT(refused.error().message, HasSubstr("at most 64 GPUs"));
    r.gpus[0].index = 20000;
    EXPECT_FALSE(h->handle_report(to_json(r)));
    EXPECT_TRUE(h->gpus().empty());
}

TEST_F(HubTest, RogueNodeCannotReportForAnotherNode) {
    auto h = hub();
    h->expect("n2", "8-1");
    AgentReport r = report_of("n2", 1);
    r.attempts.push_back(attempt_of("8-1", AttemptReport::State::Ended));
    auto refused = h->handle_report(to_json(r), "n1");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::Forbidden);
    EXPECT_THAT(refused.error().message, HasSubstr("node n1"));
    EXPECT_NE(h->attempt("n2", "8-1").state, RemoteAttempt::State::Ended);
}

// The server never opens a path a node reported: an attempt directory whose stdout.log links to
// a secret is just a name; its logs are only the bytes the agent sent, kept in the server's own
// directory, where a link planted in place of the file is not followed either.
TEST_F(HubTest, RogueNodeSymlinkedLogIsNotFollowed) {
    const fs::path secret = dir_ / "secret";
    std::ofstream(secret) << "root:$6$hash\n";
    const fs::path node_dir = dir_ / "rogue" / "9-1";
    fs::create_directories(node_dir);
    fs::create_symlink(secret, node_dir / "stdout.log");
    auto h = hub();
    h->expect("n1", "9-1");
    AgentReport r = report_of("n1", 1);
    r.attempts.push_back(attempt_of("9-1"));
    r.attempts[0].dir = node_dir.string();
    ASSERT_TRUE(h->handle_report(to_json(r)));
    const std::string kept = h->log_file("n1", "9-1", false);
    EXPECT_FALSE(fs::exists(kept));
    fs::create_directories(fs::path(kept).parent_path());
    fs::create_symlink(secret, kept);
    r.attempts[0].logs = {LogChunk{false, 0, "overwrite\n", false}};
    ASSERT_TRUE(h->handle_report(to_json(r)));
    EXPECT_EQ(test_support_read(secret.string()), "root:$6$hash\n");
}

// This test verifies draining by Slurm job and that a silent node is declared lost only once
// its allocation is gone.
TEST_F(HubTest, DrainAndLoss) {
    std::atomic<bool> gone{false};
    auto h = hub([&](const std::string& job) {
        EXPECT_EQ(job, "417");
        return gone ? AllocationState::Gone : AllocationState::Running;
    }, 1);
    ASSERT_TRUE(h->handle_report(to_json(report_of("n1", 1))));
    EXPECT_EQ(h->unschedulable_reason("n1"), "");
    EXPECT_EQ(h->drain("", "417"), std::vector<std::string>{"n1"});
    EXPECT_THAT(h->unschedulable_reason("n1"), HasSubstr("draining"));
    ASSERT_TRUE(h->listen());
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // silent past its timeout
    EXPECT_FALSE(h->lost("n1"));  // the allocation still holds it: its tasks may run
    EXPECT_EQ(h->attempt("n1", "1-1").state, RemoteAttempt::State::Unknown);
    gone = true;
    for (int i = 0; i < 60 && !h->lost("n1"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(h->lost("n1"));
    EXPECT_THAT(h->samples()[0].error, HasSubstr("lost"));
    EXPECT_EQ(h->nodes()[0].state, "lost");
}

}  // namespace
}  // namespace carma::cluster
