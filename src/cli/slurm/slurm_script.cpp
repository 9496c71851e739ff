#include "cli/slurm/slurm_script.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common/json_read.h"
#include "core/text.h"

namespace carma::cli {

namespace {

using nlohmann::json;

constexpr std::size_t kQuoteExcerpt = 200;  // how much of a program's odd answer an error quotes

std::string excerpt(std::string_view text) {
    text = trim(text);
    if (text.size() <= kQuoteExcerpt) {
        return std::string(text);
    }
    return std::string(text.substr(0, kQuoteExcerpt)) + "...";
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A Slurm job id as CARMA stores it: a string, though a daemon may send a number.
std::string job_text(const json& node) {
    const json* job = member(node, "slurm_job");
    if (job == nullptr) {
        return "";
    }
    if (job->is_string()) {
        return job->get<std::string>();
    }
    if (job->is_number_integer()) {
        return std::to_string(job->get<long long>());
    }
    return "";
}

const json& node_list(const json* nodes_answer) {
    static const json kEmpty = json::array();
    return nodes_answer == nullptr ? kEmpty : array_of(*nodes_answer, "nodes");
}

// A node's field as the status table shows it: agents name their nodes, so through printable().
std::string cell(const json& node, const char* key) {
    return printable(text_of(node, key, "-"));
}

}  // namespace

Result<void> check_up_request(const SlurmUpRequest& r) {
    if (r.nodes < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--nodes {} asks for no node; give 1 or more", r.nodes));
    }
    if (r.gpus_per_node < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gpus-per-node {} asks for no GPU; CARMA's agents pack tasks onto "
                                "GPUs, so give 1 or more",
                                r.gpus_per_node));
    }
    if (r.server.empty() || r.server.find(':') == std::string::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the server address '{}' is not HOST:PORT; give --server with the "
                                "address `carma serve --agents` listens on",
                                r.server));
    }
    if (r.token_file.empty() && !r.munge) {
        return fail(ErrorCode::InvalidArgument,
                    "no --token-file: give the file holding the token `carma serve "
                    "--agent-token-file` reads (on a path every node can read), or run the "
                    "daemon with --agent-auth munge");
    }
    if (r.carma.empty()) {
        return fail(ErrorCode::Internal, "the carma executable for the nodes is unknown");
    }
    for (const std::string* text : {&r.time, &r.partition}) {
        if (text->find_first_of(" \t\n'\"") != std::string::npos) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' has white space or quotes, which sbatch's --time and "
                                    "--partition never hold",
                                    *text));
        }
    }
    return {};
}

std::string agents_batch_script(const SlurmUpRequest& r) {
    std::vector<std::string> words = {r.carma, "agent", "--server", r.server};
    if (r.munge) {
        words.emplace_back("--munge");
        if (!r.munge_socket.empty()) {
            words.insert(words.end(), {"--munge-socket", r.munge_socket});
        }
        if (!r.server_uid.empty()) {
            words.insert(words.end(), {"--server-uid", r.server_uid});
        }
    } else {
        words.insert(words.end(), {"--token-file", r.token_file});
    }
    if (!r.gpus.empty()) {
        words.insert(words.end(), {"--gpus", r.gpus});
    }
    // Slurm ends an allocation with SIGTERM: the agent then stops its tasks itself, so the server
    // hears they ended instead of finding them gone.
    words.emplace_back("--stop-tasks-on-exit");
    if (r.allow_root_tasks) {
        words.emplace_back("--allow-root-tasks");
    }
    std::string agent;
    for (const std::string& w : words) {
        agent += agent.empty() ? "" : " ";
        agent += shell_quote(w);
    }
    // One step per node, each in a loop: an agent that dies (killed, crashed) is started again
    // on its node and picks up the tasks still running there; the allocation lives on until
    // `carma slurm down`, scancel or its time limit.
    return fmt::format(
        "#!/bin/bash\n"
        "# Written by `carma slurm up`: one CARMA agent per node of this allocation, started again\n"
        "# if it dies. Each agent names itself $SLURMD_NODENAME and tags its attempts with\n"
        "# $SLURM_JOB_ID; it sees every GPU Slurm gave its node (no --gres on the step).\n"
        "trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 0' TERM INT\n"
        "for node in $(scontrol show hostnames \"$SLURM_JOB_NODELIST\"); do\n"
        "    (\n"
        "        trap 'exit 0' TERM INT\n"
        "        while true; do\n"
        "            srun --overlap --nodes=1 --ntasks=1 --nodelist=\"$node\" {}\n"
        "            sleep 2\n"
        "        done\n"
        "    ) &\n"
        "done\n"
        "wait\n",
        agent);
}

std::vector<std::string> sbatch_args(const SlurmUpRequest& r) {
    std::vector<std::string> args = {
        "--parsable",
        fmt::format("--job-name={}", kAgentsJobName),
        fmt::format("--nodes={}", r.nodes),
        "--ntasks-per-node=1",
        fmt::format("--gres=gpu:{}", r.gpus_per_node),
    };
    if (!r.time.empty()) {
        args.push_back(fmt::format("--time={}", r.time));
    }
    if (!r.partition.empty()) {
        args.push_back(fmt::format("--partition={}", r.partition));
    }
    if (!r.output.empty()) {
        args.push_back(fmt::format("--output={}", r.output));
    }
    return args;
}

Result<std::string> parse_sbatch_job_id(std::string_view output) {
    // --parsable prints "jobid" or "jobid;cluster" (warnings go to stderr); the last line counts.
    std::string id;
    for (const std::string& line : split_list(output, '\n')) {
        const std::string_view t = trim(line);
        if (!t.empty()) {
            const std::string_view first = t.substr(0, t.find(';'));
            id = all_digits(first) ? std::string(first) : std::string();
        }
    }
    if (id.empty()) {
        return fail(ErrorCode::Internal,
                    fmt::format("sbatch --parsable answered '{}', which holds no job id; is `sbatch` "
                                "Slurm's?",
                                excerpt(output)));
    }
    return id;
}

Result<std::string> agents_address(const json& nodes_answer, std::string_view this_host) {
    const json* agents = member(nodes_answer, "agents");
    if (agents == nullptr || !agents->is_string() || agents->get<std::string>().empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "the CARMA daemon is not in cluster mode (GET /v1/nodes has no \"agents\" "
                    "address): start it with `carma serve --agents HOST:PORT --agent-token-file "
                    "F`, or give --server HOST:PORT");
    }
    const std::string address = agents->get<std::string>();
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon + 1 == address.size()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the CARMA daemon's agents address '{}' is not HOST:PORT; give "
                                "--server HOST:PORT",
                                address));
    }
    std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    // The daemon listens on every interface: the nodes reach it by this machine's name.
    if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") {
        return fmt::format("{}:{}", this_host, port);
    }
    return address;
}

std::vector<std::string> squeue_args(std::string_view user, std::string_view job_id) {
    std::vector<std::string> args = {"--noheader", "--format=%i|%T|%D|%N|%L"};
    if (!job_id.empty()) {
        args.push_back(fmt::format("--jobs={}", job_id));
    } else {
        args.push_back(fmt::format("--name={}", kAgentsJobName));
        args.push_back(fmt::format("--user={}", user));
    }
    return args;
}

Result<std::vector<SlurmJob>> parse_squeue(std::string_view output) {
    std::vector<SlurmJob> jobs;
    for (const std::string& line : split_list(output, '\n')) {
        const std::string_view t = trim(line);
        if (t.empty()) {
            continue;
        }
        const std::vector<std::string> f = split_list(t, '|');
        if (f.size() != 5 || !all_digits(trim(f[0]))) {
            return fail(ErrorCode::Internal,
                        fmt::format("squeue printed '{}' where CARMA asked for "
                                    "'JOBID|STATE|NODES|NODELIST|TIME_LEFT'; is `squeue` Slurm's?",
                                    excerpt(t)));
        }
        jobs.push_back(SlurmJob{std::string(trim(f[0])), std::string(trim(f[1])),
                                std::string(trim(f[2])), std::string(trim(f[3])),
                                std::string(trim(f[4]))});
    }
    return jobs;
}

std::vector<json> nodes_of_job(const json& nodes_answer, std::string_view job_id) {
    std::vector<json> out;
    for (const json& node : array_of(nodes_answer, "nodes")) {
        if (!job_id.empty() && job_text(node) == job_id) {
            out.push_back(node);
        }
    }
    return out;
}

bool job_nodes_idle(const json& nodes_answer, std::string_view job_id) {
    for (const json& node : nodes_of_job(nodes_answer, job_id)) {
        const auto running = integer_of(node, "running");
        if (!running || *running != 0) {
            return false;
        }
    }
    return true;
}

std::string format_slurm_status(const std::vector<SlurmJob>& jobs, const json* nodes_answer,
                                std::string_view daemon_note) {
    std::string out;
    if (jobs.empty()) {
        out += fmt::format("no Slurm allocation named {} (start one with `carma slurm up`)\n",
                           kAgentsJobName);
    } else {
        out += fmt::format("{:<10} {:<11} {:>5}  {:<16} {}\n", "JOB", "STATE", "NODES",
                           "NODELIST", "TIME LEFT");
        for (const SlurmJob& j : jobs) {
            out += printable(fmt::format("{:<10} {:<11} {:>5}  {:<16} {}", j.id, j.state, j.nodes,
                                         j.node_list, j.time_left)) +
                   "\n";
        }
    }
    if (nodes_answer == nullptr) {
        out += fmt::format("\nCARMA nodes: unknown ({})\n", printable(daemon_note));
        return out;
    }
    const json& nodes = node_list(nodes_answer);
    if (nodes.empty()) {
        out += "\nCARMA nodes: none has connected yet\n";
        return out;
    }
    std::set<std::string> listed;
    for (const SlurmJob& j : jobs) {
        listed.insert(j.id);
    }
    out += fmt::format("\n{:<16} {:<9} {:<10} {:>4} {:>8}\n", "NODE", "STATE", "JOB", "GPUS",
                       "RUNNING");
    // Nodes of the listed allocations first, in squeue's order, then any other (an earlier
    // allocation's nodes still known to the daemon, or agents started by hand).
    auto row = [](const json& node) {
        return fmt::format("{:<16} {:<9} {:<10} {:>4} {:>8}\n", cell(node, "node"),
                           cell(node, "state"),
                           job_text(node).empty() ? "-" : printable(job_text(node)),
                           cell(node, "gpus"), cell(node, "running"));
    };
    for (const SlurmJob& j : jobs) {
        for (const json& node : nodes_of_job(*nodes_answer, j.id)) {
            out += row(node);
        }
    }
    for (const json& node : nodes) {
        if (listed.count(job_text(node)) == 0) {
            out += row(node);
        }
    }
    return out;
}

std::string format_node_table(const json& nodes_answer) {
    const json& nodes = node_list(&nodes_answer);
    if (nodes.empty()) {
        return "no node has connected (agents: `carma agent` or `carma slurm up`)\n";
    }
    std::string out = fmt::format("{:<16} {:<11} {:<10} {:<20} {:>4} {:>8}\n", "NODE", "STATE",
                                  "JOB", "HOST", "GPUS", "RUNNING");
    for (const json& node : nodes) {
        const json* gpus = node.is_object() && node.contains("gpus") ? &node["gpus"] : nullptr;
        out += fmt::format("{:<16} {:<11} {:<10} {:<20} {:>4} {:>8}\n", cell(node, "node"),
                           cell(node, "state"),
                           job_text(node).empty() ? "-" : printable(job_text(node)),
                           cell(node, "host"),
                           gpus && gpus->is_array() ? std::to_string(gpus->size()) : "-",
                           cell(node, "running"));
    }
    return out;
}

json slurm_status_json(const std::vector<SlurmJob>& jobs, const json* nodes_answer) {
    json allocations = json::array();
    for (const SlurmJob& j : jobs) {
        json carma_nodes = json::array();
        if (nodes_answer != nullptr) {
            for (json& node : nodes_of_job(*nodes_answer, j.id)) {
                carma_nodes.push_back(std::move(node));
            }
        }
        allocations.push_back({{"job", j.id},
                               {"state", j.state},
                               {"nodes", j.nodes},
                               {"node_list", j.node_list},
                               {"time_left", j.time_left},
                               {"carma_nodes", std::move(carma_nodes)}});
    }
    json out = {{"allocations", std::move(allocations)}};
    out["nodes"] = nodes_answer == nullptr ? json(nullptr) : node_list(nodes_answer);
    return out;
}

}  // namespace carma::cli
