#pragma once
// What a process on a GPU is, as far as /proc tells: NVML lists pids and memory only. Used to
// flag NVIDIA MPS server processes, which hold GPU memory on behalf of their clients and belong
// to no task.

#include <string_view>

namespace carma::device {

// The MPS server's names: an argv[0] whose last component is "nvidia-cuda-mps-server", or a comm
// starting "nvidia-cuda-mps" (the kernel cuts comm to 15 characters, which is exactly that; the
// control daemon, nvidia-cuda-mps-control, matches too and is MPS infrastructure as well).
bool is_mps_server_name(std::string_view argv0, std::string_view comm);

// Reads /proc/PID/cmdline and /proc/PID/comm. False for a process that is gone, or one this
// process may not look at (another pid namespace): it is then treated as an ordinary process.
bool is_mps_server_process(int pid);

}  // namespace carma::device
