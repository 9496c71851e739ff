#pragma once
// Nodes whose agent does not run as root (`carma agent` started by a user, as under a Slurm
// allocation): the agent can start processes only as its own user, so it refuses every launch
// for another uid. The scheduler keeps other users' tasks off such a node's GPUs instead of
// placing them there to fail, and they run elsewhere or wait. Pure.

#include <optional>
#include <span>
#include <string>

#include "core/policy.h"
#include "core/task.h"

namespace carma {

// Whether the GPU's node can start the task: its agent is root (GpuView::agent_user empty), or
// runs as the task's own user.
bool agent_admits(const TaskSpec& task, const GpuView& gpu);

// Why not, for people; nullopt when it can.
std::optional<std::string> agent_refusal(const TaskSpec& task, const GpuView& gpu);

// For a task that waits for idle GPUs: "; GPU 1: its node's agent runs as ..." for the idle GPUs
// it may not have for that reason, "" when there are none.
std::string idle_gpus_refused_by_agents(const TaskSpec& task, std::span<const GpuView> gpus);

}  // namespace carma
