#pragma once
// What a user tells CARMA about a training task. Everything about memory is optional: the
// policies differ precisely in how much of it they may use (spec §2.2).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dependency.h"
#include "core/task_id.h"
#include "core/units.h"

namespace carma {

// Enough of a network's shape for the Horus-style analytic estimate (spec §3.2).
struct ModelDescriptor {
    double parameters = 0;              // P: trainable parameters
    double activations_per_sample = 0;  // A: output elements per sample summed over layers
    int batch_size = 0;                 // B
};

struct MemoryInfo {
    std::optional<MiB> declared_mib;    // what the submitter says the task needs per GPU
    std::optional<MiB> profiled_mib;    // peak of a standalone run ("oracle"), per GPU
    std::optional<MiB> horus_mib;       // precomputed estimates, as in the .rad files
    std::optional<MiB> faketensor_mib;
    std::optional<MiB> gpumemnet_mib;
    std::optional<ModelDescriptor> model;
};

// What CARMA knows of a task from sources a deployment really has (history of earlier runs,
// what the user declared, estimators), never the profiled oracle value. The daemon and the
// simulator fill it with core/knowledge's derive_knowledge() before a task is enqueued; the
// `carma` policy reads only this.
struct Learned {
    std::optional<MiB> need_mib;       // peak per GPU to plan for, margin not included
    MiB margin_mib = 0;                // margin this figure deserves (shrinks as history agrees)
    MiB lower_bound_mib = 0;           // the most an attempt held when it ran out of memory
    int runs = 0;                      // finished runs of the same command behind need_mib
    std::optional<double> duration_s;  // expected run time alone
    std::optional<double> activity;    // expected SM activity alone, 0..1
    std::string basis;                 // one line for people: where each figure comes from
};

struct TaskSpec {
    std::string name;
    std::vector<std::string> command;  // argv; empty in the simulator
    int gpus = 1;  // whole GPUs; 0: a CPU-only task, which never waits for or holds a GPU
    // Host resources (core/host.h), Slurm's `-c/--cpus-per-task` and `--mem`: the cores and the
    // host memory the task holds while it runs, fenced by the daemon. 0: none asked (the
    // simulator's traces without those columns); the daemon gives every submission its defaults.
    int cpus = 0;
    MiB host_mem_mib = 0;
    // Cluster-scale requests (core/cluster_pack.h), as Kubernetes and openb state them:
    // - `cpu_milli`: CPU in thousandths of a core where whole `cpus` cannot say it (openb's
    //   cpu_milli); 0: `cpus` whole cores. The daemon, which pins whole cores, never sets it.
    // - `gpu_milli`: a share of one GPU in thousandths (1..999, with gpus == 1), as openb's
    //   gpu_milli, HAMi's gpucores or `carma submit --gpu-share 0.5`; 0: whole GPUs.
    // - `gpu_models`: the GPU models it may run on (openb's gpu_spec "V100M16|V100M32");
    //   empty: any.
    int cpu_milli = 0;
    int gpu_milli = 0;
    std::vector<std::string> gpu_models;
    MemoryInfo memory;  // GPU memory (`--gpu-mem`), per GPU
    std::string workload;  // profile name for the simulator and fake jobs; may be empty
    Learned learned;
    // The Python environment an attempt runs in, activated by CARMA (core/python_env): an
    // absolute prefix, at most one of the two; empty = none.
    std::string conda;  // a conda environment's prefix (the CLI resolves names)
    std::string venv;   // a virtual environment's directory
    // Scheduling controls (like sbatch --time, --dependency, --array).
    std::optional<double> time_limit_s;  // stopped (SIGTERM, then SIGKILL) after this long
    std::vector<Dependency> dependencies;  // starts only once all of them hold
    std::optional<ArrayMember> array;
    // sbatch's --output/--error: files the task's stdout and stderr are also written to, by the
    // shim as the task's user, beside CARMA's own copy (core/output_pattern.h); relative to the
    // workdir; "" = none. With only `output`, stderr goes there too, as with sbatch.
    std::string output;
    std::string error;
    // sbatch's copy of a batch script (`carma submit SCRIPT`): its text as submitted, which the
    // attempt runs in place of the file command[script_arg] names, so that an edit after submit
    // changes later submissions only, as with sbatch. Empty: the command runs as given.
    std::string script;
    std::size_t script_arg = 0;
    // sbatch's --mail-type bits (core/mail.h) and --mail-user; 0 = no mail.
    unsigned mail_types = 0;
    std::string mail_user;
    // Under `carma serve --mps`: the user whose MPS server the task will join (its owner), set by
    // the daemon for a task on one GPU; empty: it will not be an MPS client (core/mps_share.h).
    std::string mps_user;
    // The environment variables the submitter set on purpose (a task file's `env:`, `--env`), by
    // name; the rest of the task's environment was exported from the submitter's shell, as
    // sbatch does. nullopt: all of it was set on purpose (what the API's own callers send).
    std::optional<std::vector<std::string>> explicit_env;
    // Those variables with their values as a key (core/fingerprint's env_key; "" when none): part
    // of the exact fingerprint, since `EPOCHS=1` and `EPOCHS=90` are not the same run. A hash, so
    // the values (which may be secrets) stay in the environment only.
    std::string explicit_env_key;
    // Fair share (core/fair_share.h): the account the task is charged to and ordered by; "" is
    // one anonymous user (the simulator's traces without a user column).
    std::string user = {};
    // `--exclusive`: no co-runner on its GPUs while it runs, and never placed beside one.
    bool exclusive = false;
    // `--max-slowdown X`: `carma` places it only where its predicted slowdown (1 / speed,
    // corrected by what it learned) is at most X, and a co-runner beside it only while that stays
    // so. The paper's policies cannot predict slowdowns: there it runs as if exclusive.
    std::optional<double> max_slowdown = {};
    // `--nice N` (Slurm's): subtracted from the task's priority; a positive N lowers it.
    int nice = 0;
    // `--requeue` (sbatch's): CARMA may stop it (SIGTERM, then SIGKILL after the grace) to let
    // an under-served user's task run, and queue it again (core/preemption.h); the task resumes
    // from its own checkpoints.
    bool requeue = false;
};

// The CPU the task asks for in thousandths of a core, from whichever field states it.
inline std::int64_t requested_cpu_milli(const TaskSpec& t) {
    return t.cpu_milli > 0 ? t.cpu_milli : std::int64_t{t.cpus} * 1000;
}

// A whole GPU in the thousandths `gpu_milli` counts in.
inline constexpr int kMilliPerGpu = 1000;

// Thousandths of a GPU per GPU asked for: a share, or kMilliPerGpu for each whole GPU.
inline int milli_per_gpu(const TaskSpec& t) {
    return t.gpus == 0 ? 0 : (t.gpu_milli > 0 ? t.gpu_milli : kMilliPerGpu);
}

// Whether a task must have its GPUs to itself under a policy: `--exclusive`, or a slowdown bound
// that the policy cannot predict (`carma` can: `predicts_slowdown`).
inline bool runs_alone(bool exclusive, bool bounds_slowdown, bool predicts_slowdown) {
    return exclusive || (bounds_slowdown && !predicts_slowdown);
}
inline bool runs_alone(const TaskSpec& task, bool predicts_slowdown) {
    return runs_alone(task.exclusive, task.max_slowdown.has_value(), predicts_slowdown);
}

}  // namespace carma
