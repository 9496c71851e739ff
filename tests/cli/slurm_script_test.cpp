// The pure part of `carma slurm`: the batch script and sbatch's arguments, the reading of
// sbatch/squeue answers and of GET /v1/nodes, and the status table.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/slurm/slurm_script.h"

namespace carma::cli {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

SlurmUpRequest two_nodes() {
    SlurmUpRequest r;
    r.nodes = 2;
    r.gpus_per_node = 4;
    r.gpus = "emulated:4xA100-40GB";
    r.server = "login1:7070";
    r.token_file = "/home/ann/.carma/agent token";
    r.carma = "/opt/carma/bin/carma";
    r.output = "/home/ann/carma-agents-%j.out";
    return r;
}

const json kNodes = json::parse(R"({
  "agents": "login1:7070",
  "nodes": [
    {"node": "n1", "state": "up", "slurm_job": "42", "gpus": 4, "running": 2},
    {"node": "n2", "state": "draining", "slurm_job": "42", "gpus": 4, "running": 0},
    {"node": "old", "state": "lost", "slurm_job": "7", "gpus": 2, "running": 0}
  ]
})");

// This test verifies that the script starts one agent per node with srun --overlap and the
// agent's flags, each word quoted for the shell where it needs it.
TEST(SlurmScriptTest, BatchScriptStartsOneAgentPerNode) {
    const std::string script = agents_batch_script(two_nodes());
    EXPECT_THAT(script, ::testing::StartsWith("#!/bin/bash\n"));
    EXPECT_THAT(script,
                HasSubstr("srun --overlap --nodes=1 --ntasks=1 --nodelist=\"$node\" "
                          "/opt/carma/bin/carma agent --server login1:7070 "
                          "--token-file '/home/ann/.carma/agent token' --gpus "
                          "emulated:4xA100-40GB --stop-tasks-on-exit\n"));
    // One agent per node of the allocation, each started again if it dies.
    EXPECT_THAT(script, HasSubstr("scontrol show hostnames \"$SLURM_JOB_NODELIST\""));
    EXPECT_THAT(script, HasSubstr("while true; do"));
}

// This test verifies that without --gpus the agents choose their own GPUs (no flag passed).
TEST(SlurmScriptTest, NoGpusFlagWhenNotGiven) {
    SlurmUpRequest r = two_nodes();
    r.gpus.clear();
    EXPECT_THAT(agents_batch_script(r), Not(HasSubstr("--gpus")));
}

// This test verifies that sbatch asks for one allocation of N nodes x G GPUs, one task each.
TEST(SlurmScriptTest, SbatchArgs) {
    SlurmUpRequest r = two_nodes();
    EXPECT_THAT(sbatch_args(r),
                ElementsAre("--parsable", "--job-name=carma-agents", "--nodes=2",
                            "--ntasks-per-node=1", "--gres=gpu:4",
                            "--output=/home/ann/carma-agents-%j.out"));
    r.time = "2:00:00";
    r.partition = "gpu";
    EXPECT_THAT(sbatch_args(r),
                ElementsAre("--parsable", "--job-name=carma-agents", "--nodes=2",
                            "--ntasks-per-node=1", "--gres=gpu:4", "--time=2:00:00",
                            "--partition=gpu", "--output=/home/ann/carma-agents-%j.out"));
}

TEST(SlurmScriptTest, CheckUpRequestNamesTheBadFlag) {
    EXPECT_TRUE(check_up_request(two_nodes()).has_value());
    SlurmUpRequest r = two_nodes();
    r.nodes = 0;
    EXPECT_THAT(check_up_request(r).error().message, HasSubstr("--nodes 0"));
    r = two_nodes();
    r.gpus_per_node = 0;
    EXPECT_THAT(check_up_request(r).error().message, HasSubstr("--gpus-per-node 0"));
    r = two_nodes();
    r.server = "login1";
    EXPECT_THAT(check_up_request(r).error().message, HasSubstr("--server"));
    r = two_nodes();
    r.token_file.clear();
    EXPECT_THAT(check_up_request(r).error().message, HasSubstr("--token-file"));
    r = two_nodes();
    r.time = "2 h";
    EXPECT_THAT(check_up_request(r).error().message, HasSubstr("'2 h'"));
}

TEST(SlurmScriptTest, ParsesSbatchParsable) {
    EXPECT_EQ(parse_sbatch_job_id("42\n").value(), "42");
    EXPECT_EQ(parse_sbatch_job_id("42;lab\n").value(), "42");
    EXPECT_EQ(parse_sbatch_job_id("\n17\n\n").value(), "17");
    const auto bad = parse_sbatch_job_id("Submitted batch job 42\n");
    ASSERT_FALSE(bad.has_value());
    EXPECT_THAT(bad.error().message, HasSubstr("'Submitted batch job 42'"));
    EXPECT_THAT(bad.error().message, HasSubstr("no job id"));
    EXPECT_FALSE(parse_sbatch_job_id("").has_value());
}

// This test verifies that the agents' address comes from the daemon, that a wildcard host
// becomes this machine's name, and that a daemon not in cluster mode is an error naming --server.
TEST(SlurmScriptTest, AgentsAddressFromTheDaemon) {
    EXPECT_EQ(agents_address(json{{"agents", "10.1.2.3:7070"}}, "login1").value(), "10.1.2.3:7070");
    EXPECT_EQ(agents_address(json{{"agents", "0.0.0.0:7070"}}, "login1").value(), "login1:7070");
    EXPECT_EQ(agents_address(json{{"agents", "[::]:7070"}}, "login1").value(), "login1:7070");
    EXPECT_EQ(agents_address(json{{"agents", ":7070"}}, "login1").value(), "login1:7070");
    const auto single = agents_address(json{{"agents", nullptr}, {"nodes", json::array()}}, "h");
    ASSERT_FALSE(single.has_value());
    EXPECT_THAT(single.error().message, HasSubstr("not in cluster mode"));
    EXPECT_THAT(single.error().message, HasSubstr("--server"));
    EXPECT_FALSE(agents_address(json::object(), "h").has_value());
    EXPECT_THAT(agents_address(json{{"agents", "login1"}}, "h").error().message,
                HasSubstr("'login1'"));
}

TEST(SlurmScriptTest, SqueueArgs) {
    EXPECT_THAT(squeue_args("ann"),
                ElementsAre("--noheader", "--format=%i|%T|%D|%N|%L", "--name=carma-agents",
                            "--user=ann"));
    EXPECT_THAT(squeue_args("ann", "42"),
                ElementsAre("--noheader", "--format=%i|%T|%D|%N|%L", "--jobs=42"));
}

TEST(SlurmScriptTest, ParsesSqueue) {
    const auto jobs = parse_squeue("42|RUNNING|2|n[1-2]|1:59:58\n43|PENDING|2||INVALID\n");
    ASSERT_TRUE(jobs.has_value());
    ASSERT_EQ(jobs->size(), 2u);
    EXPECT_EQ((*jobs)[0].id, "42");
    EXPECT_EQ((*jobs)[0].state, "RUNNING");
    EXPECT_EQ((*jobs)[0].nodes, "2");
    EXPECT_EQ((*jobs)[0].node_list, "n[1-2]");
    EXPECT_EQ((*jobs)[0].time_left, "1:59:58");
    EXPECT_EQ((*jobs)[1].node_list, "");
    EXPECT_TRUE(parse_squeue("").value().empty());
    const auto bad = parse_squeue("JOBID PARTITION NAME\n");
    ASSERT_FALSE(bad.has_value());
    EXPECT_THAT(bad.error().message, HasSubstr("'JOBID PARTITION NAME'"));
}

// This test verifies that draining waits for every node of the job, and only of that job.
TEST(SlurmScriptTest, JobNodesIdle) {
    EXPECT_EQ(nodes_of_job(kNodes, "42").size(), 2u);
    EXPECT_FALSE(job_nodes_idle(kNodes, "42"));  // n1 runs 2
    EXPECT_TRUE(job_nodes_idle(kNodes, "7"));
    json idle = kNodes;
    idle["nodes"][0]["running"] = 0;
    EXPECT_TRUE(job_nodes_idle(idle, "42"));
    // A node that does not say what it runs counts as busy.
    idle["nodes"][1].erase("running");
    EXPECT_FALSE(job_nodes_idle(idle, "42"));
    // A job id sent as a number is the same job.
    json numeric = json::parse(R"({"nodes": [{"node": "n1", "slurm_job": 42, "running": 0}]})");
    EXPECT_EQ(nodes_of_job(numeric, "42").size(), 1u);
}

// This test verifies that status lists the allocation, its nodes under it, then other nodes.
TEST(SlurmScriptTest, StatusTable) {
    const std::vector<SlurmJob> jobs = {{"42", "RUNNING", "2", "n[1-2]", "1:59:58"}};
    const std::string text = format_slurm_status(jobs, &kNodes, "");
    EXPECT_THAT(text, HasSubstr("42         RUNNING         2  n[1-2]           1:59:58\n"));
    const auto n1 = text.find("\nn1 ");
    const auto n2 = text.find("\nn2 ");
    const auto old = text.find("\nold ");
    ASSERT_NE(n1, std::string::npos);
    ASSERT_NE(n2, std::string::npos);
    ASSERT_NE(old, std::string::npos);
    EXPECT_LT(n1, n2);
    EXPECT_LT(n2, old);
    EXPECT_THAT(text, HasSubstr("draining"));

    const std::string none = format_slurm_status({}, nullptr, "cannot reach the CARMA daemon");
    EXPECT_THAT(none, HasSubstr("no Slurm allocation named carma-agents"));
    EXPECT_THAT(none, HasSubstr("unknown (cannot reach the CARMA daemon)"));
}

TEST(SlurmScriptTest, StatusJson) {
    const std::vector<SlurmJob> jobs = {{"42", "RUNNING", "2", "n[1-2]", "1:59:58"}};
    const json doc = slurm_status_json(jobs, &kNodes);
    ASSERT_EQ(doc["allocations"].size(), 1u);
    EXPECT_EQ(doc["allocations"][0]["job"], "42");
    EXPECT_EQ(doc["allocations"][0]["carma_nodes"].size(), 2u);
    EXPECT_EQ(doc["nodes"].size(), 3u);
    EXPECT_TRUE(slurm_status_json(jobs, nullptr)["nodes"].is_null());
}

}  // namespace
}  // namespace carma::cli
