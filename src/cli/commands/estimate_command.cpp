// `carma estimate [options] [task.yaml | task.rad | -- COMMAND ARGS...]`: what every knowledge
// source says about a task and the need CARMA would plan with, and why. The daemon answers from
// the caller's history (POST /v1/estimate, docs/api.md); nothing is submitted.

#include "cli/commands.h"

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "api/submit_env.h"
#include "api/task_file.h"
#include "cli/commands/task_flags.h"
#include "cli/common/die.h"
#include "cli/views/estimate_view.h"

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct EstimateOptions {
    std::string socket;
    bool json = false;
    int gpus = 0;
    CLI::Option* gpus_option = nullptr;
    std::string memory;
    std::vector<std::string> args;
};

api::SubmitRequest build_request(const EstimateOptions& o) {
    if (o.args.empty()) {
        die("nothing to estimate; write `carma estimate [options] -- COMMAND ARGS...` or "
            "`carma estimate task.yaml`");
    }
    const fs::path cwd = fs::current_path();
    api::SubmitRequest r;
    if (o.args.size() == 1 && api::is_task_file_name(o.args.front())) {
        auto loaded = api::load_task_file(o.args.front(), cwd);
        if (!loaded) {
            die(loaded.error().message);
        }
        r = std::move(*loaded);
    } else {
        r.command = o.args;
        r.workdir = cwd.string();
    }
    if (o.gpus_option->count() > 0) {
        auto gpus = check_gpus_flag(o.gpus);
        if (!gpus) {
            die(gpus.error().message);
        }
        r.gpus = *gpus;
    }
    if (!o.memory.empty()) {
        auto declared = parse_mem_flag(o.memory, "--gpu-mem");
        if (!declared) {
            die(declared.error().message);
        }
        r.memory.declared_mib = *declared;
    }
    // As `carma submit` sends it, so the fingerprint is the one its runs were recorded under.
    if (auto ok = api::resolve_environment_and_command(r, api::current_environment(), cwd); !ok) {
        die(ok.error().message);
    }
    return r;
}

int run_estimate(const EstimateOptions& o) {
    const api::SubmitRequest request = build_request(o);
    api::ApiClient client(api::resolve_socket_path(o.socket));
    auto answer = client.estimate(api::request_body(request));
    if (!answer) {
        die(answer.error().message);
    }
    if (o.json) {
        fmt::print("{}\n", answer->dump(2));
    } else {
        fmt::print("{}", format_estimate(*answer));
    }
    return 0;
}

}  // namespace

Action add_estimate_command(CLI::App& app) {
    auto o = std::make_shared<EstimateOptions>();
    CLI::App* cmd = app.add_subcommand(
        "estimate",
        "What CARMA knows of a task's memory, run time and activity, and what it would plan with: "
        "`carma estimate [options] -- COMMAND ARGS...` or a task file (.yaml, .rad)");
    o->gpus_option = cmd->add_option("-g,--gpus", o->gpus, "Number of GPUs (default 1)");
    cmd->add_option("--gpu-mem", o->memory,
                    "GPU memory the task would declare per GPU, e.g. 12GiB");
    cmd->add_flag("--json", o->json, "Print the daemon's answer as JSON");
    cmd->add_option("--socket", o->socket,
                    api::socket_option_help());
    cmd->add_option("args", o->args, "The command and its arguments (after --), or a task file");
    return [o] { return run_estimate(*o); };
}

}  // namespace carma::cli
