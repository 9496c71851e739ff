// `carma submit [options] -- COMMAND ARGS... | FILE.yaml | FILE.rad | SCRIPT [ARGS]`: a task
// file, a command or an sbatch batch script (its `#SBATCH` lines read by the same options as the
// command line), the flags over it and the submitter's environment, sent as one POST /v1/tasks.

#include "cli/commands.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "api/submit_env.h"
#include "api/task_file.h"
#include "cli/commands/batch_script.h"
#include "cli/commands/client_common.h"
#include "cli/commands/task_flags.h"
#include "cli/common/die.h"
#include "cli/main/slurm_options.h"
#include "core/controls.h"
#include "core/dependency.h"
#include "core/gpu_share.h"
#include "core/mail.h"
#include "core/output_pattern.h"
#include "core/text.h"

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMaxAttemptsLimit = 100;  // docs/api.md: max_attempts is 1..100
constexpr std::uintmax_t kMaxScriptBytes = 1 << 20;  // as a task file

struct SubmitOptions {
    std::string socket;
    bool json = false;
    int gpus = 0;
    CLI::Option* gpus_option = nullptr;
    int cpus = 0;
    CLI::Option* cpus_option = nullptr;
    std::string memory;      // --mem: host memory, as sbatch's
    std::string gpu_memory;  // --gpu-mem: GPU memory per GPU
    std::string name;
    std::string workdir;
    std::vector<std::string> env;
    int max_attempts = 0;
    CLI::Option* max_attempts_option = nullptr;
    std::string gres;  // sbatch's --gres=gpu:N
    std::string workload;
    std::string export_spec = "ALL";
    CLI::Option* export_option = nullptr;
    std::string conda;
    std::string venv;
    std::string time_limit;
    std::vector<std::string> after;
    std::vector<std::string> dependency;
    bool hold = false;
    std::string array;
    std::string output;
    std::string error;
    std::string mail_type;
    std::string mail_user;
    bool exclusive = false;
    std::string max_slowdown;
    std::string gpu_share;
    std::string nice;
    bool requeue = false;
    std::vector<std::string> args;  // the command, or one task file
};

// The flags given on the command line override a task file's fields.
void apply_flags(const SubmitOptions& o, const fs::path& cwd, api::SubmitRequest& r) {
    if (!o.gres.empty()) {
        std::vector<std::string> notes;
        r.gpus = or_die(parse_gres_flag(o.gres, notes));
        for (const std::string& n : notes) {
            print_line(stderr, "carma: note: {}", n);
        }
    }
    if (o.gpus_option->count() > 0) {
        r.gpus = or_die(check_gpus_flag(o.gpus));
    }
    if (o.cpus_option->count() > 0) {
        r.cpus = or_die(check_cpus_flag(o.cpus));
    }
    if (!o.memory.empty()) {
        r.host_mem_mib = or_die(parse_mem_flag(o.memory, "--mem"));
        // Before, --mem was GPU memory per GPU: a command line written then now asks for host
        // memory, and says so rather than silently meaning something else.
        if (o.gpu_memory.empty() && r.gpus.value_or(1) > 0 && !r.memory.declared_mib) {
            print_line(stderr,
                       "carma: note: --mem {} is the task's host memory, as sbatch's --mem; for "
                       "GPU memory per GPU write --gpu-mem {}",
                       o.memory, o.memory);
        }
    }
    if (!o.gpu_memory.empty()) {
        r.memory.declared_mib = or_die(parse_mem_flag(o.gpu_memory, "--gpu-mem"));
    }
    if (!o.name.empty()) {
        r.name = o.name;
    }
    if (!o.workdir.empty()) {
        r.workdir = (cwd / o.workdir).lexically_normal().string();  // absolute stays absolute
    }
    for (const std::string& pair : o.env) {
        const std::size_t eq = pair.find('=');
        if (eq == std::string::npos || eq == 0) {
            die(fmt::format("--env '{}' must be NAME=VALUE", pair));
        }
        r.env[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
    if (o.max_attempts_option->count() > 0) {
        if (o.max_attempts < 1 || o.max_attempts > kMaxAttemptsLimit) {
            die(fmt::format("--max-attempts must be from 1 to {} (got {})", kMaxAttemptsLimit,
                            o.max_attempts));
        }
        r.max_attempts = o.max_attempts;
    }
    if (!o.workload.empty()) {
        r.workload = o.workload;
    }
    if (!o.conda.empty()) {
        r.conda = o.conda;
        r.venv.clear();
    }
    if (!o.venv.empty()) {
        r.venv = (cwd / o.venv).lexically_normal().string();
        r.conda.clear();
    }
    if (!o.time_limit.empty()) {
        r.time_limit_s = or_die(parse_time_limit(o.time_limit));
    }
    for (const std::string& list : o.after) {
        const std::vector<Dependency> deps = or_die(parse_after_list(list));
        r.dependencies.insert(r.dependencies.end(), deps.begin(), deps.end());
    }
    for (const std::string& spec : o.dependency) {
        const std::vector<Dependency> deps = or_die(parse_dependency_spec(spec));
        r.dependencies.insert(r.dependencies.end(), deps.begin(), deps.end());
    }
    for (auto [flag, pattern, slot] : {std::tuple{"--output", &o.output, &r.output},
                                       std::tuple{"--error", &o.error, &r.error}}) {
        if (!pattern->empty()) {
            or_die(check_output_pattern(*pattern, flag));
            *slot = *pattern;
        }
    }
    if (!o.mail_type.empty()) {
        or_die(parse_mail_types(o.mail_type));
        r.mail_type = o.mail_type;
    }
    if (!o.mail_user.empty()) {
        if (!plausible_mail_address(o.mail_user)) {
            die(fmt::format("--mail-user '{}' must be a user name or an address user@host",
                            o.mail_user));
        }
        r.mail_user = o.mail_user;
    }
    if (o.hold) {
        r.hold = true;
    }
    if (o.exclusive) {
        r.exclusive = true;
    }
    if (!o.max_slowdown.empty()) {
        r.max_slowdown = or_die(parse_max_slowdown_value(o.max_slowdown));
    }
    if (!o.gpu_share.empty()) {
        r.gpu_share_milli = or_die(parse_gpu_share(o.gpu_share));
    }
    if (!o.nice.empty()) {
        r.nice = or_die(parse_nice_value(o.nice));
    }
    if (o.requeue) {
        r.requeue = true;
    }
    if (!o.array.empty()) {
        or_die(parse_array_spec(o.array));
        r.array = o.array;
    }
}

// What the submitter's side contributes, as sbatch does: the exported environment (the task
// file's and --env's variables win), the Python environment's prefix, and the executable found
// in the submitter's PATH (the environment's bin first).
void apply_submitter_side(const std::string& export_spec, const fs::path& cwd,
                          api::SubmitRequest& r) {
    const api::EnvMap caller = api::current_environment();
    const api::ExportedEnv exported = or_die(api::export_environment(export_spec, caller));
    if (!exported.dropped.empty()) {
        print_line(stderr, "carma: note: not passed to the task: {}",
                   fmt::join(exported.dropped, "; "));
    }
    // What the file and --env set are the run's own; the shell's exports are only its
    // surroundings (`carma show` lists the first, and only they count for history).
    std::vector<std::string> chosen;
    for (const auto& [k, v] : r.env) {
        chosen.push_back(k);
    }
    r.explicit_env = std::move(chosen);
    for (const auto& [k, v] : exported.vars) {
        r.env.emplace(k, v);  // keeps what the file or --env set
    }
    if (auto ok = api::resolve_environment_and_command(r, caller, cwd); !ok) {
        die(ok.error().message);
    }
}


// The file `carma submit FILE` names, when there is one: a path, or a bare name in the current
// directory (a batch script is run where it is, as sbatch runs it).
std::optional<fs::path> named_file(const std::string& first, const fs::path& cwd) {
    const fs::path p = (cwd / first).lexically_normal();
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
        return std::nullopt;
    }
    return p;
}

std::string read_script(const fs::path& path) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec || size > kMaxScriptBytes) {
        die(fmt::format("{}: {}", path.string(),
                        ec ? ec.message() : "larger than 1 MiB; is it a batch script?"));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        die(fmt::format("cannot read {}; check that you may read it", path.string()));
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Whether the file's first two bytes are "#!", as sbatch requires of a batch script.
bool starts_with_shebang(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    char head[2] = {};
    return in.read(head, 2) && head[0] == '#' && head[1] == '!';
}

// A file given as the command that is neither runnable nor a batch script: how to make it one.
[[noreturn]] void die_not_executable(const std::string& given) {
    const bool python = given.ends_with(".py");
    die(fmt::format("{} is not executable (no run bit) and has no #! line or #SBATCH lines, so "
                    "it is not a batch script either: `chmod +x {}` to run it as a command, or "
                    "give it a first line such as {} and `carma submit {}` runs it as sbatch "
                    "would{}",
                    given, shell_quote(given), python ? "#!/usr/bin/env python3" : "#!/bin/bash",
                    shell_quote(given),
                    python ? fmt::format(" (or `carma submit -- python3 {}`)", shell_quote(given))
                           : std::string()));
}

struct ScriptSubmission {
    fs::path path;
    BatchScript script;
    std::string text;
};

// Whether args name an sbatch batch script (batch_script.h's is_batch_script); dies with chmod
// advice for a file that is neither runnable nor a script.
std::optional<ScriptSubmission> batch_script_of(const std::vector<std::string>& args,
                                                const fs::path& cwd) {
    if (args.empty() || api::is_task_file_name(args.front())) {
        return std::nullopt;
    }
    const std::optional<fs::path> path = named_file(args.front(), cwd);
    if (!path) {
        return std::nullopt;
    }
    const bool executable = ::access(path->c_str(), X_OK) == 0;
    if (executable && !starts_with_shebang(*path)) {
        return std::nullopt;  // a program (an ELF binary, say): #SBATCH lines need a #! first
    }
    const std::string text = read_script(*path);
    BatchScript script = or_die(read_batch_script(text, args.front()));
    if (is_batch_script(path->filename().string(), script, executable)) {
        return ScriptSubmission{*path, std::move(script), text};
    }
    if (!executable) {
        die_not_executable(args.front());
    }
    return std::nullopt;
}

// `carma submit -- bash train.sbatch`: the script's #SBATCH lines are not read (it is a command
// like any other); say how to have them read.
void note_unread_directives(const std::vector<std::string>& command, const fs::path& cwd) {
    if (command.size() < 2) {
        return;
    }
    const std::string shell = fs::path(command.front()).filename().string();
    if (shell != "bash" && shell != "sh" && shell != "zsh") {
        return;
    }
    const std::optional<fs::path> path = named_file(command[1], cwd);
    std::error_code ec;
    if (!path || fs::file_size(*path, ec) > kMaxScriptBytes || ec) {
        return;
    }
    std::ifstream in(*path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (auto script = read_batch_script(text, command[1]);
        script && !script->directives.empty()) {
        print_line(stderr,
                   "carma: note: the #SBATCH lines of {} are read only when the script itself is "
                   "submitted: `carma submit {}`",
                   command[1], shell_quote(command[1]));
    }
}

void add_task_options(CLI::App* cmd, SubmitOptions& o);

// An option that takes one value (or a flag): given twice on one command line CLI11 refuses it,
// while sbatch keeps the last of a script's lines.
bool single_valued(const CLI::Option* opt) {
    return opt->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw &&
           opt->get_items_expected_max() <= 1;
}

// A script's #SBATCH lines through the command line's own options (add_task_options). Those
// CARMA does not use are named on stderr, each with what CARMA does instead; a bad value of one
// it uses is an error naming the line; a single-valued option given on two lines takes the
// later one, as sbatch does, with a note naming both. `out` stays bound to `app`, which must
// outlive its use.
void script_options(const ScriptSubmission& s, const std::string& source, CLI::App& app,
                    SubmitOptions& out) {
    std::vector<std::string> kept;
    std::map<std::string, int> set_on_line;  // single-valued option -> the line that last set it
    for (const ScriptDirective& d : s.script.directives) {
        const std::string line = fmt::format("{}:{}: #SBATCH {}", source, d.line,
                                             fmt::join(d.words, " "));
        const std::string option = directive_option(d.words.front());
        if (!option.starts_with('-')) {
            print_line(stderr, "carma: note: {}: not an option; left out", line);
            continue;
        }
        if (const auto instead = slurm_option_instead(option)) {
            print_line(stderr, "carma: note: {}: not used: {}", line, *instead);
            continue;
        }
        CLI::App probe;
        SubmitOptions alone;
        add_task_options(&probe, alone);
        std::vector<std::string> words(d.words.rbegin(), d.words.rend());  // CLI11 reads backwards
        try {
            probe.parse(words);
        } catch (const CLI::ExtrasError&) {
            print_line(stderr, "carma: note: {}: not an sbatch option CARMA knows; left out",
                       line);
            continue;
        } catch (const CLI::ParseError& e) {
            die(fmt::format("{}: {}", line, e.what()));
        }
        if (!alone.args.empty()) {
            die(fmt::format("{}: '{}' is not part of an option; quote a value with spaces "
                            "(#SBATCH -J \"my run\")",
                            line, alone.args.front()));
        }
        for (const CLI::Option* opt : std::as_const(probe).get_options()) {
            if (opt->count() == 0 || !single_valued(opt)) {
                continue;
            }
            const auto [it, first] = set_on_line.try_emplace(opt->get_name(), d.line);
            if (!first) {
                print_line(stderr, "carma: note: {}: {} was also given on line {}; the later "
                                   "line wins, as in sbatch",
                           line, opt->get_name(), it->second);
                it->second = d.line;
            }
        }
        kept.insert(kept.end(), d.words.begin(), d.words.end());
    }
    add_task_options(&app, out);
    for (CLI::Option* opt : app.get_options()) {
        if (single_valued(opt)) {
            opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        }
    }
    std::vector<std::string> words(kept.rbegin(), kept.rend());
    try {
        app.parse(words);
    } catch (const CLI::ParseError& e) {
        die(fmt::format("{}: #SBATCH lines: {}", source, e.what()));
    }
}

api::SubmitRequest build_submit_request(const SubmitOptions& o) {
    if (o.args.empty()) {
        die("nothing to submit; write `carma submit [options] -- COMMAND ARGS...` or "
            "`carma submit task.yaml`");
    }
    if (o.args.size() > 1 && api::is_task_file_name(o.args.front())) {
        std::vector<std::string> files;
        for (const std::string& a : o.args) {
            if (api::is_task_file_name(a)) {
                files.push_back(shell_quote(a));
            }
        }
        if (files.size() > 1) {
            // Before, the first file was taken for a command: "command 'a.rad' not found".
            die(fmt::format("one task file per submit: got {}; submit each on its own, e.g. "
                            "`for f in {}; do carma submit \"$f\"; done`",
                            fmt::join(files, ", "), fmt::join(files, " ")));
        }
        // Everything after the first word is the task's (as sbatch gives it to the script).
        die(fmt::format("a task file takes no arguments, and options go before it: got {} after "
                        "{}; e.g. `carma submit {} {}`",
                        shell_quote(o.args[1]), shell_quote(o.args.front()),
                        o.args[1].starts_with('-') ? shell_quote(o.args[1]) : "--json",
                        shell_quote(o.args.front())));
    }
    const fs::path cwd = fs::current_path();
    api::SubmitRequest r;
    std::string export_spec = o.export_spec;
    if (o.args.size() == 1 && api::is_task_file_name(o.args.front())) {
        r = or_die(api::load_task_file(o.args.front(), cwd));
        for (const std::string& w : r.warnings) {
            print_line(stderr, "carma: warning: {}", w);  // also kept in the task's events
        }
    } else if (const auto script = batch_script_of(o.args, cwd)) {
        // As sbatch: run by its #! interpreter (no run bit needed), named after its file, its
        // #SBATCH lines under the command line's flags.
        r.command = script->script.interpreter;
        r.command.push_back(script->path.string());
        r.command.insert(r.command.end(), o.args.begin() + 1, o.args.end());
        // As sbatch, the script as it is now runs, whatever the file says by then.
        if (invalid_utf8_at(script->text) == std::string::npos &&
            script->text.find('\0') == std::string::npos) {
            r.script = script->text;
            r.script_arg = script->script.interpreter.size();
        } else {
            print_line(stderr, "carma: note: {} is not UTF-8 text, so no copy of it is kept: the "
                               "task runs the file as it is when the task starts",
                       o.args.front());
        }
        r.workdir = cwd.string();
        r.name = script->path.filename().string();
        CLI::App parser;
        SubmitOptions directives;
        script_options(*script, o.args.front(), parser, directives);
        apply_flags(directives, cwd, r);
        if (o.export_option->count() == 0 && directives.export_option->count() > 0) {
            export_spec = directives.export_spec;
        }
    } else {
        r.command = o.args;
        r.workdir = cwd.string();
        note_unread_directives(o.args, cwd);
    }
    apply_flags(o, cwd, r);
    apply_submitter_side(export_spec, cwd, r);
    return r;
}

int run_submit(const SubmitOptions& o) {
    const api::SubmitRequest request = build_submit_request(o);
    api::ApiClient client = connect(o.socket);
    const json task = or_die(client.submit(api::request_body(request)));
    if (o.json) {
        print_json(task);
    } else {
        print_line(stdout, "submitted {}", task_label(task));
    }
    return 0;
}

// The options a task is described by: the command line's and a batch script's #SBATCH lines'.
void add_task_options(CLI::App* cmd, SubmitOptions& options) {
    SubmitOptions* o = &options;
    o->gpus_option = cmd->add_option("-g,--gpus", o->gpus,
                                     "Number of GPUs (default 1); 0: a CPU-only task, which "
                                     "never waits for or holds a GPU");
    o->cpus_option = cmd->add_option("-c,--cpus-per-task", o->cpus,
                                     "Cores of its own, as sbatch's -c (default: the server's "
                                     "host.default_cpus_per_task); fenced to them");
    cmd->add_option("--mem", o->memory,
                    "Host memory, as sbatch's --mem, e.g. 32GiB; the task is stopped at it");
    cmd->add_option("--gpu-mem", o->gpu_memory,
                    "GPU memory the task needs per GPU, e.g. 12GiB or 12000MiB");
    cmd->add_option("-J,--name,--job-name", o->name,
                    "Task name (default: the daemon derives one)");
    cmd->add_option("-D,--workdir,--chdir", o->workdir,
                    "Directory to run in (default: the current one)");
    cmd->add_option("--env", o->env, "Environment variable NAME=VALUE for the task (repeatable)")
        ->allow_extra_args(false);  // `--env A=1 python x` must not swallow the command
    o->max_attempts_option = cmd->add_option("--max-attempts", o->max_attempts,
                                             "Launches at most, counting out-of-memory retries");
    cmd->add_option("--gres", o->gres,
                    "As sbatch: gpu:N is N GPUs (as -g N); a GPU type (gpu:a100:2) is not used");
    cmd->add_option("--workload", o->workload, "Workload profile name (for fake jobs)");
    o->export_option = cmd->add_option("--export", o->export_spec,
                    "Environment variables the task gets: ALL (default, as sbatch), NONE, or "
                    "NAME[=VALUE],... (may start with ALL)");
    cmd->add_option("--conda", o->conda,
                    "Run in this conda environment (name or path); a .rad file's `conda "
                    "activate NAME` line does the same");
    cmd->add_option("--venv", o->venv, "Run in this Python virtual environment (path)");
    cmd->add_option("-t,--time-limit,--time", o->time_limit,
                    "Stop the task after this long: 45s, 90m, 2h, 1h30m, 2d, or as sbatch: "
                    "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS (SIGTERM, then SIGKILL after the "
                    "grace period; state timeout)");
    // Repeatable, one value each: `--after 12 python x` must not swallow the command.
    cmd->add_option("--after", o->after,
                    "Start only after these tasks succeeded: ID[:ID...], an array member ID_N, "
                    "an array's id for all its members (fails if one does not)")
        ->allow_extra_args(false);
    cmd->add_option("-d,--dependency", o->dependency,
                    "As sbatch: afterok|afterany|afternotok:ID[:ID...][,...] (ends without "
                    "starting when it can never hold)")
        ->allow_extra_args(false);
    cmd->add_flag("-H,--hold", o->hold, "Submit held: it waits for `carma release`");
    cmd->add_flag("--exclusive", o->exclusive,
                  "No co-runner on its GPUs while it runs (for runs that measure speed), as "
                  "sbatch's --exclusive; it waits for idle GPUs");
    cmd->add_option("--max-slowdown", o->max_slowdown,
                    "carma places co-runners beside it only while its predicted slowdown stays "
                    "at most X (e.g. 1.3); the paper's policies run it alone");
    cmd->add_option("--gpu-share", o->gpu_share,
                    "Reserve this share of one GPU (e.g. 0.5), as Kubernetes' gpu_milli: shares "
                    "on a GPU never add up to more than 1, and under `carma serve --mps` the "
                    "share caps its SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)");
    cmd->add_option("--nice", o->nice,
                    "As sbatch: lower the task's priority by N (only root may give a negative N)");
    cmd->add_flag("--requeue", o->requeue,
                  "As sbatch: where the daemon preempts for fair share (preemption: true), it "
                  "may stop the task (SIGTERM, then SIGKILL after kill_grace_s) for an "
                  "under-served user's and queue it again; resume from your own checkpoints");
    cmd->add_option("-a,--array", o->array,
                    "One task per index: 0-9, 0-20:5, 1,3,8-12 (CARMA_ARRAY_INDEX tells each "
                    "which)");
    cmd->add_option("-o,--output", o->output,
                    "Also write the task's stdout (and stderr, without --error) to this file, as "
                    "you, relative to the workdir; %j id, %A array id, %a index, %x name, %u "
                    "user, %% a '%'");
    cmd->add_option("-e,--error", o->error, "Also write the task's stderr to this file (as -o)");
    cmd->add_option("--mail-type", o->mail_type,
                    "Mail when it BEGINs, ENDs, FAILs, is REQUEUEd (after running out of "
                    "memory), hits its TIME_LIMIT, or ALL; ARRAY_TASKS: each array member. "
                    "Needs the server's sendmail");
    cmd->add_option("--mail-user", o->mail_user, "Whom to mail (default: you)");
    cmd->add_option("args", o->args,
                    "The command and its arguments, a task file, or a batch script and its "
                    "arguments; as with sbatch, everything from the first of them on is the "
                    "task's, options included (`--` before it is optional)");
}

}  // namespace

Action add_submit_command(CLI::App& app) {
    auto o = std::make_shared<SubmitOptions>();
    CLI::App* cmd = app.add_subcommand(
        "submit",
        "Queue a task: `carma submit [options] -- COMMAND ARGS...`, a task file (.yaml, .rad), "
        "or an sbatch script (its #SBATCH lines are read; the command line's flags win)");
    add_task_options(cmd, *o);
    cmd->add_flag("--json", o->json, "Print the task object the daemon returns");
    add_socket_option(cmd, o->socket);
    // `carma submit train.sbatch --lr 0.1` passes --lr to the script, as sbatch and srun do.
    cmd->positionals_at_end();
    return [o] { return run_submit(*o); };
}

}  // namespace carma::cli
