#pragma once
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

namespace carma::cli {

Action add_slurm_command(CLI::App& app);

}  // namespace carma::cli
