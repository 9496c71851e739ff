#pragma once
// One rule, shared by the daemon and the simulator, that turns what a deployment can know about a
// task into the figures the `carma` policy plans with (core/task.h, Learned): the memory need per
// GPU with a margin, the run time and the GPU activity. Sources, best first:
//   memory:   history of the same command (fingerprint) > what the user declared > history of
//             its family (same owner, program, script and GPU count) > estimators (Horus,
//             FakeTensor, GPUMemNet numbers or the Horus formula over a model descriptor) >
//             unknown; the user knows what this run's arguments need better than a sibling run
//             with other arguments (batch 16 against 256) does;
//   duration: history median of the same command > the user's time limit > unknown;
//   activity: history of the command > of its family > a class default.
// A run that crashed out of memory teaches only a lower bound (what it held when it crashed),
// never a need; a sibling's crash bounds only a need the family itself supplied. A run CARMA
// never saw on its GPUs (Observation) teaches its run time only: its peak of 0 is not a need of
// 0. The profiled ("oracle") value is never read.
// Pure: no I/O, no clock.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/task.h"
#include "core/units.h"

namespace carma {

// One finished attempt of a task, as history keeps it.
struct RunFacts {
    MiB peak_mib = 0;                  // most held on any one of its GPUs
    double run_s = 0;                  // wall time of the attempt
    std::optional<double> activity;    // mean SM activity of its GPUs while it ran, 0..1
    bool succeeded = false;
    bool out_of_memory = false;        // then peak_mib is what it held when it crashed
    bool observed = true;              // false: never seen on its GPUs (Observation)
};

// Whether CARMA saw an attempt on its GPUs. It finds a task's processes by pid in the driver's
// process list, which gives pids as the daemon's PID namespace sees them (on an H200, a task
// under `unshare --pid` was listed by its pid there, and seen). It cannot match GPU work done by
// processes outside the task's process tree (`docker run` inside the task: the container runtime
// starts them), nor any task when the daemon runs in a container without the host's PID
// namespace; some drivers list processes without their memory (usedGpuMemory unavailable); and
// a run may end between two samples.
enum class Observation {
    Seen,      // its processes showed up holding memory on at least one of its GPUs
    NotSeen,   // no process of it was ever listed on its GPUs
    NoMemory,  // listed, but never with any memory
};

// From the attempt's per-GPU peaks (an entry for each GPU it was seen on).
Observation observation_of(const std::map<int, MiB>& peak_per_gpu);
std::string_view to_string(Observation o);  // "seen", "not-seen", "no-memory": stored, shown
// For people: what the observation means and why it may happen.
std::string_view unobserved_why(Observation o);

// What one sample says about a task's own SM activity on one GPU, 0..1: its processes'
// per-process reading where the backend has one, whoever else ran there; else the GPU's reading
// when it ran alone on the GPU; else nothing (the GPU's reading would count its co-runners' work
// as its own and over-state what it adds beside others).
std::optional<double> sample_activity(std::optional<double> own, std::optional<double> gpu,
                                      bool alone);

struct KnowledgeConfig {
    MiB base_margin_mib = 2048;   // margin of a single run, a declaration or an estimate
    MiB min_margin_mib = 512;     // the least margin however well history agrees
    std::size_t max_runs = 20;    // only the newest runs count (commands drift)
    double default_activity = 0.6;  // when nothing is known: a busy training job
};

// `exact`: finished attempts of the same command line (owner + argv + GPU count), oldest first;
// `family`: of the same owner + program + script + GPU count with other arguments;
// `time_limit_s`: the user's limit, if any.
Learned derive_knowledge(const TaskSpec& task, const std::vector<RunFacts>& exact,
                         const std::vector<RunFacts>& family,
                         std::optional<double> time_limit_s, const KnowledgeConfig& config);

}  // namespace carma
