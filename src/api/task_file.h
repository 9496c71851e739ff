#pragma once
// Task files: what `carma submit FILE` reads and turns into the body of POST /v1/tasks
// (docs/api.md). Two formats:
//  - YAML (.yaml/.yml), CARMA's own:
//        name: resnet3
//        command: python resnet50.py --batch_size 128   # or a list: [python, resnet50.py, ...]
//        gpus: 1                    # 0: a CPU-only task
//        memory: 13GiB              # declared GPU memory need per GPU; a bare number is MiB
//        cpus_per_task: 8           # cores (sbatch's -c); host_memory: 32GiB (sbatch's --mem)
//        profiled_memory: 13236     # peak of a standalone run, per GPU
//        estimates: {horus: 28923, faketensor: 10666, gpumemnet: 24000}
//        workdir: exp               # relative: against the file's directory
//        env: {EPOCHS: "3"}
//        max_attempts: 3
//        workload: resnet3          # profile name, for fake jobs and the simulator
//        conda: tf                  # a conda environment (name or path), or
//        venv: .venv               #   a Python virtual environment (relative: to the file)
//        time_limit: 2h             # or sbatch's forms: 120 (minutes), 2:00:00, 1-12
//        after: [12, 13_2]          # afterok; or dependency: afterany:12,afternotok:14
//        output: train-%j.out       # also written here, relative to the workdir; and error:
//  - the paper's .rad files (carma-spec.md §1.4), read the way the original server reads them.
// The parse functions are pure (text in, request out); load_task_file() is the thin I/O layer.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "core/task.h"

namespace carma::api {

// A task as the client asks for it. Unset fields are left out of the request so the daemon's
// defaults apply (gpus 1, its own max_attempts, a name derived from the command).
struct SubmitRequest {
    std::string name;
    std::vector<std::string> command;
    std::optional<int> gpus;  // 0: a CPU-only task
    // Host resources (Slurm's -c/--cpus-per-task and --mem); unset: the daemon's defaults.
    std::optional<int> cpus;
    std::optional<MiB> host_mem_mib;
    MemoryInfo memory;    // GPU memory; `model` is not part of the API and is ignored
    std::string workdir;  // absolute
    std::map<std::string, std::string> env;
    // Which of `env`'s variables were set on purpose (the task file's env:, --env) when the rest
    // came from the submitter's shell; nullopt: all of them were (docs/api.md's explicit_env).
    std::optional<std::vector<std::string>> explicit_env;
    std::optional<int> max_attempts;
    std::string workload;
    // As given (a conda name or path; a venv path); `carma submit` resolves both to absolute
    // prefixes before sending, which is all the API takes.
    std::string conda;
    std::string venv;
    // Scheduling controls (docs/api.md): sent as given; the daemon checks them.
    std::optional<double> time_limit_s;
    std::vector<Dependency> dependencies;  // --after, --dependency
    bool hold = false;
    std::string array;  // "0-9", "1,3,8-12:2"
    std::string output;  // sbatch's --output/--error patterns (core/output_pattern.h)
    std::string error;
    std::string mail_type;  // sbatch's --mail-type ("END,FAIL") and --mail-user, as given
    std::string mail_user;
    // Fair share (issue 23): no co-runner, a bound on its slowdown, Slurm's --nice.
    bool exclusive = false;
    std::optional<double> max_slowdown;
    // `--gpu-share 0.5`: a share of one GPU, in thousandths (core/gpu_share.h).
    std::optional<int> gpu_share_milli;
    std::optional<int> nice;
    // sbatch's --requeue: may be stopped for an under-served user's task and queued again.
    bool requeue = false;
    // `carma submit SCRIPT`: the batch script's text, run in place of the file command[script_arg]
    // names (sbatch's copy, core/task.h); "": the command runs as given.
    std::string script;
    std::size_t script_arg = 0;
    // What the reader noticed and did not read ("gpt2_xl.rad:13: ..."): printed at submit and
    // kept in the task's events, so a file that says more than CARMA reads does not lose it
    // silently.
    std::vector<std::string> warnings;
};

// The JSON body of POST /v1/tasks for a request.
nlohmann::json request_body(const SubmitRequest& request);

// What a parser needs to know about where the text came from; the parsers only use the paths
// lexically, never touching the file system.
struct TaskFileContext {
    std::string source;                     // how errors name the file, e.g. "exp/task.yaml"
    std::string default_name;               // the task name when the file gives none: its stem
    std::filesystem::path base_dir;         // relative workdirs resolve against this
    std::filesystem::path default_workdir;  // the workdir when the file gives none
};

// Splits a command line into argv on whitespace. Single quotes keep everything literally;
// double quotes keep whitespace and let \" and \\ through; a backslash outside quotes escapes
// the next character. No variables, globs or redirections: this is not a shell.
Result<std::vector<std::string>> split_command(std::string_view line);

Result<SubmitRequest> parse_yaml_task(std::string_view text, const TaskFileContext& context);

// .rad: line 1 `conda activate NAME` (or `source activate NAME`) names the conda environment;
// from 0-based line 2 on, the first line containing "python" is the command (run with
// /bin/sh -c when it uses shell syntax, as the original ran it through bash); line 7 is the GPU
// count; lines 8-11, when present, are the oracle MiB (-> memory.profiled_mib) and the Horus,
// FakeTensor and GPUMemNet estimates; numbers are read as Python's int(float(line)).
Result<SubmitRequest> parse_rad_task(std::string_view text, const TaskFileContext& context);

// True when `arg` names a task file by its extension (.yaml, .yml, .rad).
bool is_task_file_name(std::string_view arg);

// Reads `path` (relative: against `cwd`) and parses it by its extension. Relative workdirs in
// YAML resolve against the file's directory; a file without a workdir runs in `cwd`; the default
// name is the file's stem.
Result<SubmitRequest> load_task_file(const std::filesystem::path& path,
                                     const std::filesystem::path& cwd);

}  // namespace carma::api
