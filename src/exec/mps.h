#pragma once
// NVIDIA MPS (Multi-Process Service) for collocated tasks: starting and stopping the MPS control
// daemon, and the environment a task needs to be one of its clients (optionally with a per-GPU
// memory limit the driver enforces).
//
// How MPS serves several users (nvidia-cuda-mps-control(1)): one control daemon, normally run by
// root, starts an MPS server per user id on demand (the server runs as that user, reaching the
// control daemon through the pipe directory); clients of another user wait until the current
// server's clients are done. So the pipe and log directories are created 0755: every user must
// be able to reach the sockets and pipes the control daemon makes there, and nobody but the
// daemon's user may add, replace or remove entries (NVIDIA's k8s-device-plugin creates both
// 0755 too, cmd/mps-control-daemon/mps/daemon.go). Each of their parent directories must be
// searchable by other users as well, or non-root servers fail with EACCES and exit
// (bottlerocket-os/bottlerocket#4673): start() says so in warning().
//
// The memory limit, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (MPS docs, "Appendix: Environment
// Variables"): "comma-separated device ordinals and/or device UUIDs with per device memory limit
// separated by an equals", with "the same semantics as CUDA_VISIBLE_DEVICES", example
// "0=1G,1=512MB"; values are an integer and "G" or "M" (set_default_device_pinned_mem_limit).
// A client's own value can only lower the limit the control daemon sets. How an ordinal is
// mapped when the client's CUDA_VISIBLE_DEVICES reorders GPUs is not documented; a GPU UUID
// names one GPU whatever the mapping, so pass the UUIDs the task's CUDA_VISIBLE_DEVICES carries.

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mps_limit.h"
#include "core/result.h"
#include "core/units.h"

namespace carma::exec {

using carma::kMpsMemLimitEnv;
using carma::MpsMemLimit;
using carma::format_pinned_mem_limit;
using carma::parse_pinned_mem_limit;

inline constexpr std::string_view kMpsControlOverrideEnv = "CARMA_MPS_CONTROL";
inline constexpr std::string_view kMpsPipeDirEnv = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr std::string_view kMpsLogDirEnv = "CUDA_MPS_LOG_DIRECTORY";

struct MpsOptions {
    // A program name looked up on PATH, or a path; $CARMA_MPS_CONTROL, when set, overrides it.
    std::string control = "nvidia-cuda-mps-control";
    std::string pipe_dir;   // created 0755 if missing
    std::string log_dir;    // created 0755 if missing
    double timeout_s = 10;  // for each run of the control program
};

// The control daemon CARMA started. Not stopped when destroyed: whoever owns it decides (the
// daemon may leave it running for tasks that outlive a restart).
class MpsDaemon {
  public:
    // Creates the directories and, unless a control daemon already answers on the pipe
    // directory (then it is adopted), runs `control -d` with CUDA_MPS_PIPE_DIRECTORY and
    // CUDA_MPS_LOG_DIRECTORY set (the program daemonises and returns). Its environment is ours
    // without CUDA_VISIBLE_DEVICES (the MPS server would renumber the GPUs, and the tasks'
    // CUDA_VISIBLE_DEVICES would no longer mean the GPUs CARMA placed them on) and without
    // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (at the daemon it becomes every client's limit).
    // Errors name the program and what it said, with a hint.
    static Result<MpsDaemon> start(const MpsOptions& options);

    // `echo quit | control` with the same environment; waits for it up to the timeout.
    Result<void> stop();

    const std::string& control_path() const { return control_path_; }  // as resolved
    const std::string& pipe_dir() const { return pipe_dir_; }
    const std::string& log_dir() const { return log_dir_; }
    // Non-empty when users other than the daemon's could not reach the pipe directory (a parent
    // directory is not searchable by others): MPS then serves only the daemon's own user.
    const std::string& warning() const { return warning_; }
    // True when a control daemon already served this pipe directory (`get_server_list`
    // answered) and was taken over instead of started.
    bool adopted() const { return adopted_; }

  private:
    MpsDaemon() = default;

    std::string control_path_;
    std::string pipe_dir_;
    std::string log_dir_;
    double timeout_s_ = 10;
    std::string warning_;
    bool adopted_ = false;
};

// What a task needs to be an MPS client: CUDA_MPS_PIPE_DIRECTORY always; and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT when some limit is known (see format_pinned_mem_limit).
std::vector<std::pair<std::string, std::string>> mps_task_environment(
    const std::string& pipe_dir, std::span<const MpsMemLimit> limits = {});

}  // namespace carma::exec
