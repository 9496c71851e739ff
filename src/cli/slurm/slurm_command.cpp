// `carma slurm up|status|down`: CARMA inside Slurm allocations (issue 11). Slurm owns the nodes;
// `up` asks it for one allocation whose batch script starts a `carma agent` per node, `status`
// joins squeue with the daemon's GET /v1/nodes, `down` drains the nodes (POST /v1/nodes/drain),
// waits for their tasks and ends the allocation with scancel. sbatch, squeue and scancel are
// found on PATH and run with fork/exec (no shell); their stderr is quoted in errors.
//
//   carma slurm up --nodes N --gpus-per-node G [--time T] [--partition P] [--gpus SPEC]
//                  [--server HOST:PORT] [--token-file F] [--output F] [--socket S]
//   carma slurm status [--json] [--socket S]
//   carma slurm down [--now] [--timeout T] [--job ID] [--socket S]

#include "cli/commands.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/slurm/slurm_script.h"
#include "core/text.h"
#include "core/time_text.h"
#include "exec/run_program.h"
#include "exec/self.h"

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kProgramTimeout = 60;  // seconds; sbatch/squeue/scancel answer in well under
constexpr auto kPollInterval = std::chrono::milliseconds(500);
constexpr double kGoneTimeout = 120;  // seconds for squeue to stop listing a cancelled job
constexpr const char* kDefaultDrainTimeout = "10m";

// ---- running sbatch, squeue, scancel --------------------------------------------------------

// Runs argv[0] (found on PATH) with `input` on its stdin. Bounded: a Slurm controller that does
// not answer would otherwise hang the command.
Result<exec::ProgramRun> run_slurm_program(const std::vector<std::string>& argv,
                                           const std::string& input) {
    exec::ProgramOptions o;
    o.input = input;
    o.timeout_s = kProgramTimeout;
    auto run = exec::run_program(argv, o);
    if (!run) {
        return run;
    }
    if (!run->started()) {
        return fail(ErrorCode::NotFound,
                    fmt::format("cannot run {}: {}; is Slurm's client (slurm-client) installed and "
                                "on PATH, and is this a Slurm login or compute node?",
                                argv[0], errno_text(run->start_error)));
    }
    if (run->timed_out) {
        return fail(ErrorCode::Io,
                    fmt::format("`{}` did not finish within {} s and was killed; is the Slurm "
                                "controller answering (`scontrol ping`)?",
                                exec::command_text(argv), kProgramTimeout));
    }
    return run;
}

// The program's stdout, or an error quoting its stderr.
Result<std::string> run_ok(const std::vector<std::string>& argv, const std::string& input = {}) {
    auto run = run_slurm_program(argv, input);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!run->succeeded()) {
        const std::string_view err = trim(run->err);
        return fail(ErrorCode::Io, fmt::format("`{}` failed ({}): {}", exec::command_text(argv),
                                               run->how_it_ended(kProgramTimeout),
                                               err.empty() ? "it printed no error" : err));
    }
    return std::move(run->out);
}

std::vector<std::string> with_program(const char* program, std::vector<std::string> args) {
    args.insert(args.begin(), program);
    return args;
}

std::string user_name() {
    if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
        return pw->pw_name;
    }
    const char* user = std::getenv("USER");
    return user != nullptr ? user : std::to_string(::geteuid());
}

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
        return "localhost";
    }
    return buf;
}

std::vector<SlurmJob> agent_jobs(const std::string& job_id = {}) {
    return or_die(parse_squeue(or_die(run_ok(with_program("squeue", squeue_args(user_name(), job_id))))));
}

// ---- up -----------------------------------------------------------------------------------

struct UpOptions {
    int nodes = 0;
    int gpus_per_node = 0;
    std::string time;
    std::string partition;
    std::string gpus;
    std::string server;
    std::string token_file;
    std::string output = "carma-agents-%j.out";
    std::string socket;
    bool allow_root_tasks = false;
    std::string munge_socket;
};

int run_up(const UpOptions& o) {
    SlurmUpRequest r;
    r.nodes = o.nodes;
    r.gpus_per_node = o.gpus_per_node;
    r.time = o.time;
    r.partition = o.partition;
    r.gpus = o.gpus;
    r.server = o.server;
    if (r.server.empty() || o.token_file.empty()) {
        api::ApiClient client(api::resolve_socket_path(o.socket));
        auto answer = client.nodes();
        if (!answer) {
            die(fmt::format("cannot learn where and how agents connect from the CARMA daemon "
                            "({}); give --server HOST:PORT and --token-file F",
                            answer.error().message));
        }
        if (r.server.empty()) {
            r.server = or_die(agents_address(*answer, host_name()));
        }
        // A daemon on the cluster's munged: the agents use it too, and accept its uid's answers.
        if (answer->value("auth", "") == "munge") {
            r.munge = true;
            r.munge_socket = o.munge_socket;
            if (auto uid = answer->find("server_uid");
                uid != answer->end() && uid->is_number_unsigned()) {
                r.server_uid = std::to_string(uid->get<std::uint64_t>());
            }
        }
    }
    if (!o.token_file.empty() && !r.munge) {
        std::error_code ec;
        const fs::path token = fs::absolute(o.token_file, ec);
        if (ec || !fs::is_regular_file(token, ec)) {
            die(fmt::format("token file {}: not a readable file; give the file `carma serve "
                            "--agent-token-file` reads",
                            o.token_file));
        }
        r.token_file = token.string();
    }
    r.carma = or_die(exec::this_executable()).string();
    std::error_code ec;
    r.output = o.output.empty() ? std::string() : fs::absolute(o.output, ec).string();
    r.allow_root_tasks = o.allow_root_tasks;
    or_die(check_up_request(r));

    const std::string output =
        or_die(run_ok(with_program("sbatch", sbatch_args(r)), agents_batch_script(r)));
    const std::string job = or_die(parse_sbatch_job_id(output));
    std::printf("Slurm job %s: %s, %d node%s x %d GPU%s; agents connect to %s\n", job.c_str(),
                std::string(kAgentsJobName).c_str(), r.nodes, r.nodes == 1 ? "" : "s",
                r.gpus_per_node, r.gpus_per_node == 1 ? "" : "s", printable(r.server).c_str());
    std::printf("`carma slurm status` shows its nodes as their agents connect\n");
    return 0;
}

// ---- status -------------------------------------------------------------------------------

struct StatusOptions {
    bool json = false;
    std::string socket;
};

int run_status(const StatusOptions& o) {
    const std::vector<SlurmJob> jobs = agent_jobs();
    api::ApiClient client(api::resolve_socket_path(o.socket));
    auto answer = client.nodes();
    const json* nodes = answer ? &*answer : nullptr;
    if (o.json) {
        json doc = slurm_status_json(jobs, nodes);
        if (!answer) {
            doc["daemon_error"] = answer.error().message;
        }
        std::printf("%s\n", doc.dump(2).c_str());
        return 0;
    }
    const std::string text =
        format_slurm_status(jobs, nodes, answer ? std::string() : answer.error().message);
    std::fputs(text.c_str(), stdout);
    return 0;
}

// ---- down ---------------------------------------------------------------------------------

struct DownOptions {
    bool now = false;
    std::string timeout = kDefaultDrainTimeout;
    std::string job;
    std::string socket;
};

std::string node_names(const json& answer, const std::string& job) {
    std::string out;
    for (const json& node : nodes_of_job(answer, job)) {
        out += out.empty() ? "" : ",";
        out += printable(text_of(node, "node", "?"));  // agents name their nodes
    }
    return out.empty() ? "none" : out;
}

long long running_on(const json& answer, const std::string& job) {
    long long n = 0;
    for (const json& node : nodes_of_job(answer, job)) {
        n += integer_of(node, "running").value_or(0);
    }
    return n;
}

// Waits until the job's nodes run nothing; an error when the timeout passes first.
void wait_drained(api::ApiClient& client, const std::string& job, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    bool told = false;
    for (;;) {
        const json answer = or_die(client.nodes());
        if (job_nodes_idle(answer, job)) {
            return;
        }
        if (!told) {
            std::printf("draining Slurm job %s: waiting for %lld running task%s on %s\n",
                        job.c_str(), running_on(answer, job),
                        running_on(answer, job) == 1 ? "" : "s", node_names(answer, job).c_str());
            std::fflush(stdout);
            told = true;
        }
        if (Clock::now() >= deadline) {
            die(fmt::format("Slurm job {} still runs {} task(s) on {} after {} s of draining; its "
                            "nodes take no new tasks. Wait longer (--timeout) or end it now "
                            "(`carma slurm down --now`: the running tasks are re-queued)",
                            job, running_on(answer, job), node_names(answer, job), timeout_s));
        }
        std::this_thread::sleep_for(kPollInterval);
    }
}

bool job_gone(const std::string& job) {
    auto run = run_slurm_program(with_program("squeue", squeue_args(user_name(), job)), {});
    if (!run) {
        die(run.error().message);
    }
    if (!run->succeeded()) {
        // squeue -j of a job the controller has forgotten: "Invalid job id specified".
        if (run->err.find("Invalid job id") != std::string::npos) {
            return true;
        }
        die(fmt::format("`squeue` failed ({}): {}", run->how_it_ended(kProgramTimeout),
                        trim(run->err)));
    }
    for (const SlurmJob& j : or_die(parse_squeue(run->out))) {
        if (j.id == job && (j.state == "PENDING" || j.state == "RUNNING" ||
                            j.state == "COMPLETING" || j.state == "CONFIGURING" ||
                            j.state == "SUSPENDED" || j.state == "REQUEUED" ||
                            j.state == "RESIZING" || j.state == "STOPPED" ||
                            j.state == "SIGNALING" || j.state == "STAGE_OUT")) {
            return false;
        }
    }
    return true;
}

int run_down(const DownOptions& o) {
    const double timeout_s = or_die(parse_duration(o.timeout));
    std::string job = o.job;
    if (job.empty()) {
        const std::vector<SlurmJob> jobs = agent_jobs();
        if (jobs.empty()) {
            die(fmt::format("no Slurm allocation named {} of user {}: nothing to end (`squeue "
                            "--me` lists your jobs)",
                            kAgentsJobName, user_name()));
        }
        if (jobs.size() > 1) {
            std::string ids;
            for (const SlurmJob& j : jobs) {
                ids += ids.empty() ? j.id : ", " + j.id;
            }
            die(fmt::format("{} allocations named {} ({}): name the one to end with --job ID",
                            jobs.size(), kAgentsJobName, ids));
        }
        job = jobs.front().id;
    }

    api::ApiClient client(api::resolve_socket_path(o.socket));
    auto drained = client.drain_nodes(json{{"slurm_job", job}});
    if (!drained) {
        if (!o.now) {
            die(fmt::format("cannot drain the nodes of Slurm job {}: {}; `carma slurm down --now` "
                            "ends the allocation without draining",
                            job, drained.error().message));
        }
        std::fprintf(stderr,
                     "carma: cannot drain the nodes of Slurm job %s (%s); ending it anyway\n",
                     job.c_str(), printable(drained.error().message).c_str());
    } else if (!o.now) {
        wait_drained(client, job, timeout_s);
    }

    or_die(run_ok({"scancel", job}));
    const auto deadline = Clock::now() + std::chrono::duration<double>(kGoneTimeout);
    while (!job_gone(job)) {
        if (Clock::now() >= deadline) {
            die(fmt::format("scancel {} was accepted but squeue still lists the job after {} s; "
                            "see `scontrol show job {}`",
                            job, kGoneTimeout, job));
        }
        std::this_thread::sleep_for(kPollInterval);
    }
    std::printf("ended Slurm job %s (%s)%s\n", job.c_str(), std::string(kAgentsJobName).c_str(),
                o.now ? "; tasks still running were stopped and are re-queued" : "");
    return 0;
}

void add_socket(CLI::App* cmd, std::string& socket) {
    cmd->add_option("--socket", socket,
                    api::socket_option_help());
}

}  // namespace

Action add_slurm_command(CLI::App& app) {
    CLI::App* slurm = app.add_subcommand(
        "slurm", "Run CARMA's agents inside a Slurm allocation: up, status, down");
    slurm->require_subcommand(1);

    auto up_o = std::make_shared<UpOptions>();
    CLI::App* up = slurm->add_subcommand(
        "up", "Ask Slurm for one allocation that runs a CARMA agent on each of its nodes");
    up->add_option("--nodes", up_o->nodes, "How many nodes")->required();
    up->add_option("--gpus-per-node", up_o->gpus_per_node, "GPUs per node (sbatch --gres=gpu:G)")
        ->required();
    up->add_option("--time", up_o->time, "Time limit of the allocation (sbatch --time)");
    up->add_option("--partition", up_o->partition, "Slurm partition (sbatch --partition)");
    up->add_option("--gpus", up_o->gpus,
                   "The agents' GPUs: nvml, dcgm, auto, emulated:4xA100-40GB (default: theirs)");
    up->add_option("--server", up_o->server,
                   "HOST:PORT the agents connect to (default: the daemon's --agents address)");
    up->add_option("--token-file", up_o->token_file,
                   "Token mode: the file of `carma serve --agent-token-file` (or a node key), on "
                   "a path every node reads; not needed when the daemon uses munge");
    up->add_option("--munge-socket", up_o->munge_socket,
                   "MUNGE mode: munged's socket on the nodes (default: munged's own)");
    up->add_flag("--allow-root-tasks", up_o->allow_root_tasks,
                 "Agents that run as root run tasks of uid 0 too (refused by default)");
    up->add_option("--output", up_o->output,
                   "The allocation's log (sbatch --output; %j is the job id)")
        ->capture_default_str();
    add_socket(up, up_o->socket);

    auto status_o = std::make_shared<StatusOptions>();
    CLI::App* status =
        slurm->add_subcommand("status", "Show the carma-agents allocations and their nodes");
    status->add_flag("--json", status_o->json, "Print JSON");
    add_socket(status, status_o->socket);

    auto down_o = std::make_shared<DownOptions>();
    CLI::App* down = slurm->add_subcommand(
        "down", "Drain the allocation's nodes, wait for their tasks, end it with scancel");
    down->add_flag("--now", down_o->now,
                   "Do not wait for running tasks (they are stopped and re-queued)");
    down->add_option("--timeout", down_o->timeout, "How long to wait for running tasks")
        ->capture_default_str();
    down->add_option("--job", down_o->job,
                     "The Slurm job to end (default: your only carma-agents allocation)");
    add_socket(down, down_o->socket);

    return [=] {
        if (up->parsed()) {
            return run_up(*up_o);
        }
        if (status->parsed()) {
            return run_status(*status_o);
        }
        return run_down(*down_o);
    };
}

}  // namespace carma::cli
