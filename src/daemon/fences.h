#pragma once
// The daemon's side of fences (exec/cgroup.h): which cgroup hierarchy its tasks run fenced in,
// decided once at start (refusing to start without one unless the admin said `fences: off`),
// the subtree it owns, and each attempt's FenceSpec.

#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "daemon/host_config.h"
#include "exec/cgroup.h"

namespace carma::daemon {

struct Fences {
    exec::CgroupMode mode = exec::CgroupMode::None;  // None: unfenced (`fences: off`)
    std::string root;    // the subtree the daemon owns (exec::FenceSpec::root)
    std::string prefix;  // of every leaf: this daemon's, so daemons on one machine never meet
    std::string detail;  // what detection found, for the log and status
    bool enabled() const { return mode != exec::CgroupMode::None; }
    // One line for the first log line, `carma gpus` and status: "cgroup v1 (...)", or that
    // nothing is fenced.
    std::string describe() const;
};

// Detects the hierarchy (config.fences: auto, v1, v2) and prepares the root; `fences: off` is
// Fences{} at once. Without a usable hierarchy (or as a user that may not write it) the error
// says what is missing and how to run unfenced. `state_dir` names this daemon's leaves.
Result<Fences> setup_fences(const HostConfig& config, const std::string& state_dir);

// The fence of one attempt: its cores, its memory fence, the processes it may have, and the
// device files of the GPUs it was not given (`other_gpu_files`: /dev/nvidiaN paths; ones that
// cannot be read are left out).
exec::FenceSpec attempt_fence(const Fences& fences, const HostConfig& config, long long task,
                              int attempt, const std::vector<int>& cores, long long memory_mib,
                              const std::vector<std::string>& other_gpu_files);

// What a task's message says when it runs unfenced (`fences: off`).
inline constexpr const char* kUnfencedNote =
    "unfenced (fences: off): nothing limits its cores, host memory or devices";

// Removes the cgroup of an attempt whose supervisor died without doing so (killing what is left
// in it); nothing to do when it is gone or the attempt was never fenced.
Result<void> discard_attempt_fence(const Fences& fences, long long task, int attempt);

// Moves a running attempt on the shared cores to `cores` (its cpuset rewritten): the shared cores
// shrink as tasks take cores of their own and grow as they give them back.
Result<void> set_fence_cores(const Fences& fences, long long task, int attempt,
                             const std::vector<int>& cores);

}  // namespace carma::daemon
