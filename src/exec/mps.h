#pragma once
// NVIDIA MPS (Multi-Process Service) for collocated tasks: starting and stopping an MPS control
// daemon, and the environment a task needs to be one of its clients (optionally with a memory
// limit the driver enforces).
//
// How MPS serves several users (nvidia-cuda-mps-control(1)): a control daemon, normally run by
// root, runs one MPS server at a time, as the user id of its clients (the server reaches the
// control daemon through the pipe directory); a client of another user waits in CUDA
// initialisation until every client of the current server has exited, and then gets a server of
// its own. One control daemon for the whole machine would make a task on an idle GPU wait for
// another user's tasks on any GPU; so the daemon starts one per GPU (as LSF's mps=per_gpu does),
// each with that GPU alone in CUDA_VISIBLE_DEVICES and its own pipe and log directories, and
// shares a GPU under MPS only among one owner's tasks (core/mps_share.h). NVIDIA's example of a
// control daemon for one GPU leaves CUDA_VISIBLE_DEVICES out of the clients' environment, since
// the server renumbers what it exposes; CARMA's tasks keep theirs, the GPU's UUID, which names
// the same GPU whatever the numbering, and keeps a task that runs without MPS on its own GPU.
//
// The pipe and log directories are created 0755: every user must be able to reach the sockets
// and pipes the control daemon makes there, and nobody but the daemon's user may add, replace or
// remove entries (NVIDIA's k8s-device-plugin creates both 0755 too,
// cmd/mps-control-daemon/mps/daemon.go). Each of their parent directories must be searchable by
// other users as well, or non-root servers fail with EACCES and exit
// (bottlerocket-os/bottlerocket#4673): start() says so in warning().
//
// The memory limit, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (MPS docs, "Appendix: Environment
// Variables"): "comma-separated device ordinals and/or device UUIDs with per device memory limit
// separated by an equals", with "the same semantics as CUDA_VISIBLE_DEVICES", example
// "0=1G,1=512MB"; values are an integer and "G" or "M" (set_default_device_pinned_mem_limit).
// A client's own value can only lower the limit the control daemon sets, and it limits that
// client process (each process of a task has its own). The daemon writes ordinals, as documented:
// positions in the CUDA_VISIBLE_DEVICES it writes for the task (its one GPU is ordinal 0).

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
    // The control daemon's CUDA_VISIBLE_DEVICES: the GPU (a UUID) it serves; empty: every GPU.
    std::string visible_device;
    double timeout_s = 10;  // for each run of the control program
};

// The control daemon CARMA started. Not stopped when destroyed: whoever owns it decides (the
// daemon may leave it running for tasks that outlive a restart).
class MpsDaemon {
  public:
    // Creates the directories and, unless a control daemon already answers on the pipe
    // directory (then it is adopted), runs `control -d` with CUDA_MPS_PIPE_DIRECTORY and
    // CUDA_MPS_LOG_DIRECTORY set (the program daemonises and returns). Its environment is ours
    // with CUDA_VISIBLE_DEVICES = options.visible_device (or without it: ours would hide or
    // renumber GPUs) and without CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (at the daemon it becomes every
    // client's limit).
    // Errors name the program and what it said, with a hint.
    static Result<MpsDaemon> start(const MpsOptions& options);

    // `echo quit | control` with the same environment; waits for it up to the timeout.
    Result<void> stop();

    const std::string& control_path() const { return control_path_; }  // as resolved
    const std::string& pipe_dir() const { return pipe_dir_; }
    const std::string& log_dir() const { return log_dir_; }
    const std::string& visible_device() const { return visible_device_; }
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
    std::string visible_device_;
    double timeout_s_ = 10;
    std::string warning_;
    bool adopted_ = false;
};

// What a task needs to be an MPS client: CUDA_MPS_PIPE_DIRECTORY always; and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT when some limit is known (see format_pinned_mem_limit).
std::vector<std::pair<std::string, std::string>> mps_task_environment(
    const std::string& pipe_dir, std::span<const MpsMemLimit> limits = {});

// Limits by CUDA ordinal: the i-th amount for ordinal i (0 or less: none there).
std::vector<MpsMemLimit> ordinal_limits(std::span<const MiB> per_ordinal);

// Creates (0755) a pipe directory where no control daemon runs and returns its absolute path: a
// task pointed there runs outside MPS, as CUDA does when it reaches no control daemon, whatever
// runs at the default /tmp/nvidia-mps. For tasks that cannot be the client of one GPU's daemon.
Result<std::string> prepare_no_mps_directory(const std::string& dir);

}  // namespace carma::exec
