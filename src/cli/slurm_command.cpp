#include "cli/slurm_command.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/json_read.h"
#include "cli/slurm_script.h"
#include "core/text.h"
#include "core/time_text.h"
#include "exec/self.h"

extern char** environ;

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kProgramTimeout = 60;  // seconds; sbatch/squeue/scancel answer in well under
constexpr auto kPollInterval = std::chrono::milliseconds(500);
constexpr double kGoneTimeout = 120;  // seconds for squeue to stop listing a cancelled job
constexpr const char* kDefaultDrainTimeout = "10m";

[[noreturn]] void die(const std::string& message) {
    throw std::runtime_error(message);
}

template <typename T>
T or_die(Result<T> r) {
    if (!r) {
        die(r.error().message);
    }
    return std::move(*r);
}

void or_die(Result<void> r) {
    if (!r) {
        die(r.error().message);
    }
}

std::string errno_text(int err) {
    return std::error_code(err, std::generic_category()).message();
}

// ---- running sbatch, squeue, scancel --------------------------------------------------------

struct ProgramRun {
    int status = 0;  // waitpid's
    std::string out;
    std::string err;
};

class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }
    int get() const { return fd_; }
    void reset() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = -1;
    }

private:
    int fd_;
};

std::string command_text(const std::vector<std::string>& argv) {
    std::string out;
    for (const std::string& a : argv) {
        out += out.empty() ? "" : " ";
        out += shell_quote(a);
    }
    return out;
}

// Runs argv[0] (found on PATH) with `input` on its stdin; its stdout and stderr come back.
// Bounded: a Slurm controller that does not answer would otherwise hang the command.
Result<ProgramRun> run_program(const std::vector<std::string>& argv, const std::string& input) {
    int in_pipe[2];
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
        return fail(ErrorCode::Io, fmt::format("cannot run {}: pipe: {}", argv[0], errno_text(errno)));
    }
    Fd in_read(in_pipe[0]);
    Fd in_write(in_pipe[1]);
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        return fail(ErrorCode::Io, fmt::format("cannot run {}: pipe: {}", argv[0], errno_text(errno)));
    }
    Fd out_read(out_pipe[0]);
    Fd out_write(out_pipe[1]);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
        return fail(ErrorCode::Io, fmt::format("cannot run {}: pipe: {}", argv[0], errno_text(errno)));
    }
    Fd err_read(err_pipe[0]);
    Fd err_write(err_pipe[1]);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_read.get(), 0);
    posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
    std::vector<char*> args;
    for (const std::string& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        return fail(ErrorCode::NotFound,
                    fmt::format("cannot run {}: {}; is Slurm's client (slurm-client) installed and "
                                "on PATH, and is this a Slurm login or compute node?",
                                argv[0], errno_text(rc)));
    }
    in_read.reset();
    out_write.reset();
    err_write.reset();
    // The input is a batch script of a few hundred bytes: it fits the pipe's buffer.
    if (!input.empty()) {
        const ssize_t n = ::write(in_write.get(), input.data(), input.size());
        (void)n;  // a program that does not read its input fails on its own and says so
    }
    in_write.reset();

    ProgramRun run;
    const auto deadline = Clock::now() + std::chrono::duration<double>(kProgramTimeout);
    pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    std::string* sinks[2] = {&run.out, &run.err};
    int open_fds = 2;
    bool timed_out = false;
    while (open_fds > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        const int ready = ::poll(fds, 2, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            char buf[4096];
            const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
            if (n > 0) {
                sinks[i]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    if (timed_out) {
        ::kill(pid, SIGKILL);
    }
    while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        return fail(ErrorCode::Io,
                    fmt::format("`{}` did not finish within {} s and was killed; is the Slurm "
                                "controller answering (`scontrol ping`)?",
                                command_text(argv), kProgramTimeout));
    }
    return run;
}

bool exited_ok(const ProgramRun& run) {
    return WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
}

std::string how_it_ended(const ProgramRun& run) {
    if (WIFEXITED(run.status)) {
        return fmt::format("exit status {}", WEXITSTATUS(run.status));
    }
    if (WIFSIGNALED(run.status)) {
        return fmt::format("signal {}", WTERMSIG(run.status));
    }
    return "an unknown end";
}

// The program's stdout, or an error quoting its stderr.
Result<std::string> run_ok(const std::vector<std::string>& argv, const std::string& input = {}) {
    auto run = run_program(argv, input);
    if (!run) {
        return tl::unexpected(run.error());
    }
    if (!exited_ok(*run)) {
        const std::string_view err = trim(run->err);
        return fail(ErrorCode::Io, fmt::format("`{}` failed ({}): {}", command_text(argv),
                                               how_it_ended(*run),
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
    auto run = run_program(with_program("squeue", squeue_args(user_name(), job)), {});
    if (!run) {
        die(run.error().message);
    }
    if (!exited_ok(*run)) {
        // squeue -j of a job the controller has forgotten: "Invalid job id specified".
        if (run->err.find("Invalid job id") != std::string::npos) {
            return true;
        }
        die(fmt::format("`squeue` failed ({}): {}", how_it_ended(*run), trim(run->err)));
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
                    "The daemon's socket (default: $CARMA_SOCKET, else " +
                        api::default_socket_path() + ")");
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
