#pragma once
// One rule, shared by the daemon and the simulator, that turns what a deployment can know about a
// task into the figures the `carma` policy plans with (core/task.h, Learned): the memory need per
// GPU with a margin, the run time and the GPU activity. Sources, best first:
//   memory:   history of the same command (fingerprint) > history of its family (same owner,
//             program and script) > what the user declared > estimators (Horus, FakeTensor,
//             GPUMemNet numbers or the Horus formula over a model descriptor) > unknown;
//   duration: history median of the same command > the user's time limit > unknown;
//   activity: history of the command > of its family > a class default.
// A run that crashed out of memory teaches only a lower bound (what it held when it crashed),
// never a need. The profiled ("oracle") value is never read.
// Pure: no I/O, no clock.

#include <optional>
#include <string>
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
};

struct KnowledgeConfig {
    MiB base_margin_mib = 2048;   // margin of a single run, a declaration or an estimate
    MiB min_margin_mib = 512;     // the least margin however well history agrees
    std::size_t max_runs = 20;    // only the newest runs count (commands drift)
    double default_activity = 0.6;  // when nothing is known: a busy training job
};

// `exact`: finished attempts of the same command line (owner + argv + GPU count), oldest first;
// `family`: of the same owner + program + script with other arguments; `time_limit_s`: the user's
// limit, if any.
Learned derive_knowledge(const TaskSpec& task, const std::vector<RunFacts>& exact,
                         const std::vector<RunFacts>& family,
                         std::optional<double> time_limit_s, const KnowledgeConfig& config);

}  // namespace carma
