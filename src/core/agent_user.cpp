#include "core/agent_user.h"

#include <fmt/format.h>

#include "core/gpu_clauses.h"

namespace carma {

bool agent_admits(const TaskSpec& task, const GpuView& gpu) {
    return gpu.agent_user.empty() || gpu.agent_user == task.user;
}

std::optional<std::string> agent_refusal(const TaskSpec& task, const GpuView& gpu) {
    if (agent_admits(task, gpu)) {
        return std::nullopt;
    }
    return fmt::format("its node's agent runs as {}, not root, and starts only {}'s tasks",
                       gpu.agent_user, gpu.agent_user);
}

std::string idle_gpus_refused_by_agents(const TaskSpec& task, std::span<const GpuView> gpus) {
    GpuClauses clauses;
    for (const GpuView& g : gpus) {
        if (g.schedulable && !g.has_processes && g.residents.empty()) {
            if (auto why = agent_refusal(task, g)) {
                clauses.add(g.index, g.node, std::move(*why));
            }
        }
    }
    return clauses.empty() ? std::string() : "; " + clauses.text();
}

}  // namespace carma
