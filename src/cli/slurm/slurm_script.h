#pragma once
// The pure part of `carma slurm up|status|down`: what is handed to sbatch/squeue/scancel and how
// their answers and the daemon's GET /v1/nodes are read. No I/O: slurm_command.cpp runs the
// programs and calls these, so every line here is unit-tested.
//
// The shape (issue 11): one Slurm allocation named carma-agents holds N whole nodes with G GPUs
// each; its batch script starts one `carma agent` per node with `srun --overlap` (one task per
// node, no --gres, so each agent sees all the GPUs Slurm gave its node). Slurm owns the nodes;
// the CARMA server packs tasks onto their GPUs.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/result.h"

namespace carma::cli {

// The job name of the allocation: `status` and `down` find the allocation by it.
inline constexpr std::string_view kAgentsJobName = "carma-agents";

struct SlurmUpRequest {
    int nodes = 1;
    int gpus_per_node = 1;
    std::string time;         // sbatch --time, Slurm's format ("30", "2:00:00", "1-0"); empty: none
    std::string partition;    // sbatch --partition; empty: the cluster's default
    std::string gpus;         // the agents' --gpus (emulated:4xA100-40GB, nvml, ...); empty: theirs
    std::string server;       // HOST:PORT the agents connect to
    std::string token_file;   // absolute path, readable on every node
    std::string carma;        // the carma executable the nodes run (absolute path)
    std::string output;       // sbatch --output (%j is the job id)
    bool allow_root_tasks = false;  // the agents' --allow-root-tasks
    // MUNGE instead of a token file (the daemon's --agent-auth munge): the agents' --munge,
    // --munge-socket and --server-uid (the daemon's uid, whose answers they accept).
    bool munge = false;
    std::string munge_socket;
    std::string server_uid;
};

// Refuses what sbatch would refuse later with a vaguer message (or accept and misbehave).
Result<void> check_up_request(const SlurmUpRequest& request);

// The batch script: starts the agents and waits for them (the allocation lives as long as they).
std::string agents_batch_script(const SlurmUpRequest& request);

// sbatch's arguments (without "sbatch"); the script comes on its standard input.
std::vector<std::string> sbatch_args(const SlurmUpRequest& request);

// The job id in `sbatch --parsable`'s answer ("12" or "12;cluster"), else an error quoting it.
Result<std::string> parse_sbatch_job_id(std::string_view output);

// The address agents connect to, from an answer of GET /v1/nodes: its "agents" field. A
// wildcard host (0.0.0.0, ::, empty) becomes `this_host`, which the nodes can reach. An error
// naming --server when the daemon is not in cluster mode (agents is null or absent).
Result<std::string> agents_address(const nlohmann::json& nodes_answer, std::string_view this_host);

// One allocation as squeue shows it.
struct SlurmJob {
    std::string id;
    std::string state;      // RUNNING, PENDING, COMPLETING, ...
    std::string nodes;      // how many
    std::string node_list;  // n[1-2]
    std::string time_left;  // 1:59:58, UNLIMITED, INVALID (pending)
};

// squeue's arguments listing `user`'s allocations named carma-agents (or only `job_id`).
std::vector<std::string> squeue_args(std::string_view user, std::string_view job_id = {});

// The lines of squeue_args' output ("id|state|nodes|list|left"); an error quoting a bad line.
Result<std::vector<SlurmJob>> parse_squeue(std::string_view output);

// The nodes of GET /v1/nodes that belong to `job_id` (their "slurm_job").
std::vector<nlohmann::json> nodes_of_job(const nlohmann::json& nodes_answer,
                                         std::string_view job_id);

// True when every node of `job_id` runs nothing, so `down` may end the allocation. A node that
// does not report "running" counts as busy: ending the job on a guess could kill tasks.
bool job_nodes_idle(const nlohmann::json& nodes_answer, std::string_view job_id);

// `carma slurm status`: the allocations, each with its nodes as the daemon sees them, then the
// daemon's nodes outside any listed allocation. `nodes_answer` is null when the daemon could not
// be asked (`daemon_note` then says why).
// `carma nodes`: one row per node of a GET /v1/nodes answer (names through printable()).
std::string format_node_table(const nlohmann::json& nodes_answer);

std::string format_slurm_status(const std::vector<SlurmJob>& jobs,
                                const nlohmann::json* nodes_answer, std::string_view daemon_note);

// The same as JSON: {"allocations": [{"job", "state", "nodes", "node_list", "time_left",
// "carma_nodes": [...]}], "nodes": [...all of GET /v1/nodes...]}.
nlohmann::json slurm_status_json(const std::vector<SlurmJob>& jobs,
                                 const nlohmann::json* nodes_answer);

}  // namespace carma::cli
