// carma demo: a whole CARMA run in under two minutes on emulated GPUs. It starts a daemon in a
// temporary directory, replays the built-in `demo` trace through it time-compressed (the same
// `carma replay` a user would run), prints what happened and stops the daemon. The trace is
// chosen so that under OR-MAGM (no memory information) tasks share GPUs and one of them crashes
// with out-of-memory and is relaunched alone.

#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "api/client.h"
#include "cli/commands.h"
#include "exec/self.h"

extern char** environ;

namespace carma::cli {

namespace {

namespace fs = std::filesystem;

struct DemoOptions {
    double time_scale = 60;
    std::string policy = "OR-MAGM";
    bool keep = false;
};

pid_t spawn(const std::vector<std::string>& args, const std::string& output_file) {
    std::vector<char*> argv;
    for (const std::string& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!output_file.empty()) {
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_file.c_str(),
                                         O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    }
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(rc)));
    }
    return pid;
}

int wait_exit(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string self_path() {
    auto exe = exec::this_executable();
    if (!exe) {
        throw std::runtime_error(exe.error().message);
    }
    return exe->string();
}

void print_summary(const nlohmann::json& tasks, const nlohmann::json& events) {
    int collocated = 0, ooms = 0, recovered = 0;
    double first_start = 0, last_end = 0;
    for (const auto& e : events["events"]) {
        const std::string kind = e["kind"].get<std::string>();
        const std::string msg = e["message"].get<std::string>();
        if (kind == "placed" && msg.find("(collocated)") != std::string::npos) {
            ++collocated;
        }
        if (kind == "placed" && msg.find("recovered from out-of-memory") != std::string::npos) {
            ++recovered;
        }
        if (kind == "oom") {
            ++ooms;
        }
    }
    fmt::print("\n{:<4} {:<26} {:<10} {:>8}  {}\n", "ID", "TASK", "STATE", "ATTEMPTS", "GPUS");
    int succeeded = 0;
    for (const auto& t : tasks["tasks"]) {
        std::string gpus;
        for (const auto& a : t.value("attempt_list", nlohmann::json::array())) {
            gpus += (gpus.empty() ? "" : " then ") + a["gpus"].dump() +
                    (a["outcome"] == "out-of-memory" ? " (out of memory)" : "");
            const double s = a["started_at"].get<double>();
            first_start = first_start == 0 ? s : std::min(first_start, s);
            if (a["ended_at"].is_number()) {
                last_end = std::max(last_end, a["ended_at"].get<double>());
            }
        }
        succeeded += t["state"] == "succeeded" ? 1 : 0;
        fmt::print("{:<4} {:<26} {:<10} {:>8}  {}\n", t["id"].get<long>(),
                   t["name"].get<std::string>(), t["state"].get<std::string>(),
                   t["attempts"].get<int>(), gpus);
    }
    fmt::print("\n{} of {} tasks succeeded; {} placement(s) shared a busy GPU; {} attempt(s) ran "
               "out of GPU memory and {} were relaunched on an idle GPU; wall time {:.0f} s\n",
               succeeded, tasks["tasks"].size(), collocated, ooms, recovered,
               std::max(0.0, last_end - first_start));
}

int run_demo(const DemoOptions& o) {
    char tmpl[] = "/tmp/carma-demo-XXXXXX";
    if (!mkdtemp(tmpl)) {
        throw std::runtime_error(fmt::format("cannot create a temporary directory: {}",
                                             std::strerror(errno)));
    }
    const std::string dir = tmpl;
    const std::string socket = dir + "/carma.sock";
    const std::string self = self_path();
    const std::string scale = fmt::format("{}", o.time_scale);
    fmt::print("carma demo: daemon on emulated 4xA100-40GB, policy {}, time x{}, in {}\n",
               o.policy, scale, dir);
    std::fflush(stdout);  // before the children write to the same terminal
    // Only root may fence tasks in cgroups; a user's demo runs them unfenced, as it says.
    const bool fenced = ::geteuid() == 0;
    if (!fenced) {
        fmt::print("carma demo: not root, so tasks run unfenced (--fences off)\n");
    }
    const pid_t daemon =
        spawn({self, "serve", "--gpus", "emulated:4xA100-40GB", "--state-dir", dir + "/state",
               "--socket", socket, "--time-scale", scale, "--policy", o.policy, "--fences",
               fenced ? "auto" : "off"},
              dir + "/daemon.log");
    auto stop_daemon = [&] {
        kill(daemon, SIGTERM);
        wait_exit(daemon);
    };
    api::ApiClient client(socket);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
        up = client.healthz().has_value();
        if (!up) {
            int status = 0;
            if (waitpid(daemon, &status, WNOHANG) == daemon) {
                throw std::runtime_error(fmt::format("the daemon exited at start; see {}/daemon.log",
                                                     dir));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    if (!up) {
        stop_daemon();
        throw std::runtime_error(fmt::format("the daemon did not answer in 20 s; see {}/daemon.log",
                                             dir));
    }
    const pid_t replay = spawn({self, "replay", "demo", "--socket", socket, "--time-scale", scale,
                                "--wait"},
                               "");
    const int replay_rc = wait_exit(replay);
    auto tasks = client.list_tasks(true);
    auto events = client.events(api::EventQuery{std::nullopt, std::nullopt, 10000});
    if (tasks && events) {
        nlohmann::json detailed = {{"tasks", nlohmann::json::array()}};
        for (const auto& t : (*tasks)["tasks"]) {
            auto one = client.task(t["id"].get<TaskId>());
            detailed["tasks"].push_back(one ? *one : t);
        }
        print_summary(detailed, *events);
    }
    stop_daemon();
    if (o.keep) {
        fmt::print("state, logs and the daemon log are kept in {}\n", dir);
    } else {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    return replay_rc;
}

}  // namespace

Action add_demo_command(CLI::App& app) {
    auto o = std::make_shared<DemoOptions>();
    CLI::App* cmd = app.add_subcommand(
        "demo", "Run a daemon on emulated GPUs, replay a short trace through it, show the result");
    cmd->add_option("--time-scale", o->time_scale, "How many times faster than real time")
        ->capture_default_str();
    cmd->add_option("--policy", o->policy, "Placement policy of the demo daemon")
        ->capture_default_str();
    cmd->add_flag("--keep", o->keep, "Keep the temporary state directory and logs");
    return [o] { return run_demo(*o); };
}

}  // namespace carma::cli
