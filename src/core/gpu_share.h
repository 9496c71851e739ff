#pragma once
// A share of one GPU (`carma submit --gpu-share 0.5`, the API's `gpu_share`, openb's gpu_milli):
// the task reserves that fraction of one GPU, and the shares reserved on a GPU never add up to
// more than the whole of it. A GPU is shared one way at a time: among tasks that reserved
// shares (the sum decides), or among whole-GPU tasks (the policy decides, from memory and
// predicted slowdown) — never both, since a whole-GPU task reserves nothing a share could be
// counted against. Under `--mps` the share is also enforced, as NVIDIA documents it: the client's
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE caps the SMs it may use. Pure.

#include <optional>
#include <string>
#include <string_view>

#include "core/policy.h"
#include "core/result.h"
#include "core/task.h"

namespace carma {

inline constexpr std::string_view kMpsThreadPercentageEnv = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";

// "0.5" → 500. A share is a number above 0 and below 1, in thousandths at most ("0.25",
// ".125", "50%" also reads as 500); the error names the value and what to write instead.
Result<int> parse_gpu_share(std::string_view text);
// The same from a number (the API's JSON).
Result<int> gpu_share_milli(double share);

// 500 → "0.5", 125 → "0.125".
std::string format_gpu_share(int milli);

// The thousandths of the GPU its residents' shares reserve.
int reserved_share_milli(const GpuView& gpu);

// Whether the task may not join the GPU because of shares: a share task beside a whole-GPU task
// (or processes CARMA did not start), a whole-GPU task beside a share task, or shares that would
// pass the whole GPU. Checked for every GPU a task is weighed against, so it formats nothing;
// share_refusal says why, for people (nullopt where shares allow it).
bool share_blocks(const TaskSpec& task, const GpuView& gpu);
std::optional<std::string> share_refusal(const TaskSpec& task, const GpuView& gpu);

// Whether `a` on the GPU would keep `b` (a task ahead, with a reservation there) out because of
// shares.
bool shares_conflict(const TaskSpec& a, const TaskSpec& b, const GpuView& gpu);

// Whether both the task and everything on the GPU hold shares: the shares are then what the
// users said they use, and `carma` does not second-guess the pair with its gain rule.
bool shared_by_shares(const TaskSpec& task, const GpuView& gpu);

// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for a share: whole percent, rounded up, at least 1.
int mps_thread_percentage(int milli);

// An MPS client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE as the share of the SMs it caps the client
// at, in thousandths: "50" → 500, "12.5" → 125. A percentage above 0 and at most 100; the error
// names the variable and its value.
Result<int> parse_active_thread_percentage(std::string_view text);

}  // namespace carma
