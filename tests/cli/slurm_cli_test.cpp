// `carma slurm up|status|down` against a fake daemon (GET /v1/nodes, POST /v1/nodes/drain) and
// fake sbatch/squeue/scancel scripts first on PATH, which record what they were given.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

namespace carma {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const fs::path& p, const std::string& text, bool executable = false) {
    std::ofstream(p) << text;
    if (executable) {
        ::chmod(p.c_str(), 0755);
    }
}

// Fake Slurm programs in a temporary directory put first on PATH. Each records its arguments
// (one line per call) in DIR/<name>.args; sbatch saves its standard input (the script) in
// DIR/script. Their answers come from files the test writes: DIR/sbatch.out (stdout),
// DIR/sbatch.err + DIR/sbatch.rc (a failure), DIR/squeue.out; scancel creates DIR/cancelled,
// after which squeue lists nothing, as Slurm does once the job has ended.
class FakeSlurm {
public:
    FakeSlurm() : dir_(test_support::make_temp_dir()) {
        const std::string d = dir_.string();
        write_file(dir_ / "sbatch",
                   "#!/bin/sh\necho \"$@\" >> " + d + "/sbatch.args\ncat > " + d +
                       "/script\ncat " + d + "/sbatch.out 2>/dev/null\ncat " + d +
                       "/sbatch.err >&2 2>/dev/null\nexit $(cat " + d +
                       "/sbatch.rc 2>/dev/null || echo 0)\n",
                   true);
        write_file(dir_ / "squeue",
                   "#!/bin/sh\necho \"$@\" >> " + d + "/squeue.args\n[ -e " + d +
                       "/cancelled ] && exit 0\ncat " + d + "/squeue.out 2>/dev/null\nexit 0\n",
                   true);
        write_file(dir_ / "scancel",
                   "#!/bin/sh\necho \"$@\" >> " + d + "/scancel.args\ntouch " + d +
                       "/cancelled\n",
                   true);
        const char* path = std::getenv("PATH");
        old_path_ = path != nullptr ? path : "";
        ::setenv("PATH", (d + ":" + old_path_).c_str(), 1);
    }
    ~FakeSlurm() {
        ::setenv("PATH", old_path_.c_str(), 1);
        fs::remove_all(dir_);
    }
    const fs::path& dir() const { return dir_; }
    void set(const std::string& name, const std::string& text) { write_file(dir_ / name, text); }
    std::string get(const std::string& name) const { return read_file(dir_ / name); }
    bool exists(const std::string& name) const { return fs::exists(dir_ / name); }

private:
    fs::path dir_;
    std::string old_path_;
};

const char* kNodes = R"({
  "agents": "0.0.0.0:7070",
  "nodes": [
    {"node": "n1", "state": "up", "slurm_job": "42", "gpus": 4, "running": 1},
    {"node": "n2", "state": "up", "slurm_job": "42", "gpus": 4, "running": 0}
  ]
})";

// A daemon in cluster mode whose node n1 runs one task until the drain has been asked for
// `busy_polls` more GET /v1/nodes.
struct FakeClusterDaemon : test_support::FakeDaemon {
    explicit FakeClusterDaemon(int busy_polls = 2, bool drain_ok = true) {
        respond([this, busy_polls, drain_ok](const httplib::Request& req, httplib::Response& res) {
            if (req.method == "POST" && req.path == "/v1/nodes/drain") {
                if (!drain_ok) {
                    res.status = 404;
                    res.set_content(R"({"error": "no such endpoint"})", "application/json");
                    return;
                }
                drained = true;
                res.set_content(R"({"draining": ["n1", "n2"]})", "application/json");
                return;
            }
            json answer = json::parse(kNodes);
            if (drained && polls_after_drain++ >= busy_polls) {
                answer["nodes"][0]["running"] = 0;
            }
            res.set_content(answer.dump(), "application/json");
        });
    }
    std::atomic<bool> drained{false};
    std::atomic<int> polls_after_drain{0};
};

std::string slurm(std::vector<std::string> args) {
    args.insert(args.begin(), "slurm");
    return test_support::run_command(cli::add_slurm_command, std::move(args));
}

std::string slurm_error(std::vector<std::string> args) {
    args.insert(args.begin(), "slurm");
    return test_support::command_error(cli::add_slurm_command, std::move(args));
}

class SlurmCliTest : public ::testing::Test {
protected:
    SlurmCliTest() { write_file(fake.dir() / "token", "secret\n"); }
    std::string token() const { return (fake.dir() / "token").string(); }
    FakeSlurm fake;
};

char host[256] = {};

// This test verifies that `up` submits one carma-agents allocation whose script starts the
// agents against the daemon's agents address (its wildcard host replaced by this host's name).
TEST_F(SlurmCliTest, UpSubmitsTheAgentsAllocation) {
    FakeClusterDaemon daemon;
    fake.set("sbatch.out", "42\n");
    const std::string out =
        slurm({"up", "--nodes", "2", "--gpus-per-node", "4", "--gpus", "emulated:4xA100-40GB",
               "--time", "30", "--token-file", token(), "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("Slurm job 42"));
    EXPECT_THAT(daemon.targets(), ::testing::ElementsAre("GET /v1/nodes"));
    const std::string args = fake.get("sbatch.args");
    EXPECT_THAT(args, HasSubstr("--parsable --job-name=carma-agents --nodes=2 "
                                "--ntasks-per-node=1 --gres=gpu:4 --time=30 --output="));
    ::gethostname(host, sizeof(host) - 1);
    const std::string script = fake.get("script");
    EXPECT_THAT(script, HasSubstr("srun --overlap --nodes=1 --ntasks=1 --nodelist=\"$node\""));
    EXPECT_THAT(script, HasSubstr(std::string("agent --server ") + host + ":7070 --token-file " +
                                  token() + " --gpus emulated:4xA100-40GB --stop-tasks-on-exit"));
}

// This test verifies that --server is used as given, without asking the daemon.
TEST_F(SlurmCliTest, UpWithServerDoesNotNeedTheDaemon) {
    fake.set("sbatch.out", "43;lab\n");
    const std::string out = slurm({"up", "--nodes", "1", "--gpus-per-node", "2", "--server",
                                   "10.0.0.5:7070", "--token-file", token(), "--socket",
                                   "/nonexistent/carma.sock"});
    EXPECT_THAT(out, HasSubstr("Slurm job 43"));
    EXPECT_THAT(fake.get("script"), HasSubstr("--server 10.0.0.5:7070"));
}

TEST_F(SlurmCliTest, UpWithoutClusterModeNamesServer) {
    test_support::FakeDaemon daemon;
    daemon.respond([](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"agents": null, "nodes": []})", "application/json");
    });
    const std::string err = slurm_error({"up", "--nodes", "2", "--gpus-per-node", "4",
                                         "--token-file", token(), "--socket", daemon.socket()});
    EXPECT_THAT(err, HasSubstr("not in cluster mode"));
    EXPECT_THAT(err, HasSubstr("--server"));
    EXPECT_FALSE(fake.exists("sbatch.args"));
}

// This test verifies that sbatch's own complaint reaches the user.
TEST_F(SlurmCliTest, UpShowsSbatchStderr) {
    fake.set("sbatch.err", "sbatch: error: Batch job submission failed: Invalid partition name\n");
    fake.set("sbatch.rc", "1\n");
    const std::string err =
        slurm_error({"up", "--nodes", "2", "--gpus-per-node", "4", "--server", "h:1",
                     "--partition", "nope", "--token-file", token()});
    EXPECT_THAT(err, HasSubstr("sbatch"));
    EXPECT_THAT(err, HasSubstr("exited with status 1"));
    EXPECT_THAT(err, HasSubstr("Invalid partition name"));
}

TEST_F(SlurmCliTest, UpRejectsAnAnswerWithoutJobId) {
    fake.set("sbatch.out", "Submitted batch job 42\n");
    const std::string err = slurm_error(
        {"up", "--nodes", "2", "--gpus-per-node", "4", "--server", "h:1", "--token-file", token()});
    EXPECT_THAT(err, HasSubstr("no job id"));
}

TEST_F(SlurmCliTest, UpNeedsAReadableTokenFile) {
    const std::string err =
        slurm_error({"up", "--nodes", "2", "--gpus-per-node", "4", "--server", "h:1",
                     "--token-file", (fake.dir() / "missing").string()});
    EXPECT_THAT(err, HasSubstr("token file"));
    EXPECT_THAT(err, HasSubstr("missing"));
}

TEST_F(SlurmCliTest, MissingSlurmIsNamed) {
    const char* path = std::getenv("PATH");
    const std::string old = path != nullptr ? path : "";
    ::setenv("PATH", "/nonexistent", 1);
    const std::string err = slurm_error(
        {"up", "--nodes", "2", "--gpus-per-node", "4", "--server", "h:1", "--token-file", token()});
    ::setenv("PATH", old.c_str(), 1);
    EXPECT_THAT(err, HasSubstr("cannot run sbatch"));
    EXPECT_THAT(err, HasSubstr("slurm-client"));
}

// This test verifies that status joins the caller's carma-agents allocations with the nodes.
TEST_F(SlurmCliTest, StatusJoinsSqueueAndNodes) {
    FakeClusterDaemon daemon;
    fake.set("squeue.out", "42|RUNNING|2|n[1-2]|29:40\n");
    const std::string out = slurm({"status", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("42         RUNNING         2  n[1-2]           29:40"));
    EXPECT_THAT(out, HasSubstr("n1               up        42            4        1"));
    EXPECT_THAT(fake.get("squeue.args"), HasSubstr("--name=carma-agents --user="));
    const json doc = json::parse(slurm({"status", "--json", "--socket", daemon.socket()}));
    EXPECT_EQ(doc["allocations"][0]["carma_nodes"].size(), 2u);
}

// This test verifies that node names and states, which agents report, reach the terminal
// without their escapes (a window title, a clipboard write, clear screen, a C1 CSI), while
// --json keeps them as the daemon sent them.
TEST_F(SlurmCliTest, StatusShowsNodesWithoutEscapes) {
    const std::string evil =
        std::string("n\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[2J\xc2\x9b") + "1";
    const json nodes = {
        {"agents", "0.0.0.0:7070"},
        {"nodes",
         {{{"node", evil}, {"state", evil}, {"slurm_job", "42"}, {"gpus", 4}, {"running", 0}}}}};
    test_support::FakeDaemon daemon;
    daemon.respond([&](const httplib::Request&, httplib::Response& res) {
        res.set_content(nodes.dump(), "application/json");
    });
    fake.set("squeue.out", "42|RUNNING|1|n1|29:40\n");
    const std::string out = slurm({"status", "--socket", daemon.socket()});
    for (const char bad : {'\x1b', '\x07'}) {
        EXPECT_EQ(out.find(bad), std::string::npos) << out;
    }
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
    EXPECT_THAT(out, HasSubstr("n?]0;pwned??]52;c;aGk=??[2J?1 n?]0;pwned??]52;c;aGk=??[2J?1 42"));
    const json doc = json::parse(slurm({"status", "--json", "--socket", daemon.socket()}));
    EXPECT_EQ(doc["nodes"][0]["node"], evil);
}

TEST_F(SlurmCliTest, StatusWithoutDaemonStillShowsSlurm) {
    fake.set("squeue.out", "42|PENDING|2||INVALID\n");
    const std::string out = slurm({"status", "--socket", "/nonexistent/carma.sock"});
    EXPECT_THAT(out, HasSubstr("PENDING"));
    EXPECT_THAT(out, HasSubstr("CARMA nodes: unknown (cannot reach the CARMA daemon"));
}

// This test verifies that down drains the job's nodes, waits until they run nothing, then
// cancels the job and waits for squeue to drop it.
TEST_F(SlurmCliTest, DownDrainsWaitsAndCancels) {
    FakeClusterDaemon daemon(/*busy_polls=*/2);
    fake.set("squeue.out", "42|RUNNING|2|n[1-2]|29:40\n");
    const std::string out = slurm({"down", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("waiting for 1 running task on n1,n2"));
    EXPECT_THAT(out, HasSubstr("ended Slurm job 42"));
    const auto seen = daemon.seen();
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen[0].method + " " + seen[0].target, "POST /v1/nodes/drain");
    EXPECT_EQ(json::parse(seen[0].body), (json{{"slurm_job", "42"}}));
    EXPECT_GE(daemon.polls_after_drain.load(), 3);  // busy, busy, idle
    EXPECT_EQ(fake.get("scancel.args"), "42\n");
    EXPECT_THAT(fake.get("squeue.args"), HasSubstr("--jobs=42"));
}

TEST_F(SlurmCliTest, DownTimesOutWithAHint) {
    FakeClusterDaemon daemon(/*busy_polls=*/1000000);
    fake.set("squeue.out", "42|RUNNING|2|n[1-2]|29:40\n");
    const std::string err = slurm_error({"down", "--timeout", "1s", "--socket", daemon.socket()});
    EXPECT_THAT(err, HasSubstr("still runs 1 task(s) on n1,n2"));
    EXPECT_THAT(err, HasSubstr("--now"));
    EXPECT_FALSE(fake.exists("scancel.args"));
}

// This test verifies that --now ends the job even when the daemon cannot drain.
TEST_F(SlurmCliTest, DownNowCancelsEvenWithoutDrain) {
    FakeClusterDaemon daemon(/*busy_polls=*/1000000, /*drain_ok=*/false);
    fake.set("squeue.out", "42|RUNNING|2|n[1-2]|29:40\n");
    const std::string out = slurm({"down", "--now", "--socket", daemon.socket()});
    EXPECT_THAT(out, HasSubstr("ended Slurm job 42"));
    EXPECT_EQ(fake.get("scancel.args"), "42\n");
    EXPECT_THAT(slurm_error({"down", "--job", "42", "--socket", daemon.socket()}),
                HasSubstr("cannot drain the nodes of Slurm job 42"));
}

TEST_F(SlurmCliTest, DownWithoutAllocation) {
    EXPECT_THAT(slurm_error({"down", "--socket", "/nonexistent/carma.sock"}),
                HasSubstr("no Slurm allocation named carma-agents"));
    fake.set("squeue.out", "42|RUNNING|2|n[1-2]|29:40\n43|PENDING|2||INVALID\n");
    EXPECT_THAT(slurm_error({"down", "--socket", "/nonexistent/carma.sock"}),
                HasSubstr("2 allocations named carma-agents (42, 43): name the one to end with --job"));
}

}  // namespace
}  // namespace carma
