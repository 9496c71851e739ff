#pragma once
// The environment an attempt starts with, and its MPS memory limits. Pure: the daemon looks up
// the account, the GPUs and the MPS control daemons, and passes what it found.
//
// What the submitter declared comes first; the account's defaults fill what it left out; its
// Python environment (conda, venv) is activated; then CARMA sets, whatever was declared, where
// the task may run and who it is: CUDA_VISIBLE_DEVICES, CARMA_*, the backend's variables and
// CUDA_MPS_*. Never the daemon's own environment.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/policy.h"
#include "core/python_env.h"
#include "exec/mps.h"
#include "store/records.h"

namespace carma::daemon {

// PATH when the submitter declared none.
inline constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// Where and as what an attempt runs, as the daemon found it.
struct AttemptPlace {
    std::vector<std::string> gpu_uuids;  // in the placement's order: CUDA ordinals 0, 1, ...
    int attempt = 0;
    double time_scale = 1;     // CARMA_TIME_SCALE unless 1
    EnvList backend_env;       // what the GPU backend adds (the emulator's file, ...)
    std::optional<std::string> home;   // from the task's account, where it has one
    std::optional<std::string> shell;
    // Under --mps, one of: the pipe directory of the control daemon it is a client of (one GPU),
    // with its limits; or the directory where none runs, for a task outside MPS.
    std::optional<std::string> mps_pipe_dir;
    std::vector<exec::MpsMemLimit> mps_limits;
    std::optional<std::string> mps_off_dir;
};

EnvList task_environment(const store::TaskRow& task, const AttemptPlace& place);

// Under MPS each GPU of a first attempt gets need + margin as its memory limit, by CUDA ordinal,
// so a task that outgrows its estimate fails alone instead of taking its co-runners down. A
// recovered attempt and a task whose need is unknown get none. `gpu_total_mib`: the placement's
// GPUs in order.
std::vector<exec::MpsMemLimit> mps_memory_limits(const TaskSpec& spec, const PolicySpec& policy,
                                                 Estimator estimator, bool recovered,
                                                 const std::vector<MiB>& gpu_total_mib,
                                                 MiB margin_mib);

}  // namespace carma::daemon
