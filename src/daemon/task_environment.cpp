#include "daemon/task_environment.h"

#include <set>

#include <fmt/format.h>

#include "core/gpu_share.h"
#include "core/memory_need.h"

namespace carma::daemon {

EnvList task_environment(const store::TaskRow& task, const AttemptPlace& place) {
    EnvList env;
    std::set<std::string> declared;
    for (const auto& [k, v] : task.env) {
        env.emplace_back(k, v);
        declared.insert(k);
    }
    auto add_default = [&](const std::string& k, const std::string& v) {
        if (!declared.contains(k)) {
            env.emplace_back(k, v);
        }
    };
    if (place.home) {
        add_default("HOME", *place.home);
    }
    if (place.shell) {
        add_default("SHELL", *place.shell);
    }
    add_default("PATH", kDefaultPath);
    add_default("USER", task.user);
    add_default("LOGNAME", task.user);
    env = activate_python_env(std::move(env), task.spec.conda, task.spec.venv);
    // Set by CARMA whatever the submitter declared: where the task may run.
    std::erase_if(env, [](const auto& kv) {
        return kv.first == "CUDA_VISIBLE_DEVICES" || kv.first.starts_with("CARMA_") ||
               kv.first.starts_with("CUDA_MPS_");
    });
    env.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(place.gpu_uuids, ",")));
    env.emplace_back("CARMA_TASK_ID", std::to_string(task.id));
    env.emplace_back("CARMA_ATTEMPT", std::to_string(place.attempt));
    if (task.spec.array) {
        env.emplace_back("CARMA_ARRAY_ID", std::to_string(task.spec.array->id));
        env.emplace_back("CARMA_ARRAY_INDEX", std::to_string(task.spec.array->index));
    }
    if (place.time_scale != 1) {
        env.emplace_back("CARMA_TIME_SCALE", fmt::format("{}", place.time_scale));
    }
    for (const auto& kv : place.backend_env) {
        env.push_back(kv);
    }
    if (place.mps_pipe_dir) {
        for (auto& kv : exec::mps_task_environment(*place.mps_pipe_dir, place.mps_limits)) {
            env.push_back(std::move(kv));
        }
        if (task.spec.gpu_milli > 0) {
            // The share as NVIDIA's MPS enforces one: the SMs the client may use.
            env.emplace_back(std::string(kMpsThreadPercentageEnv),
                             std::to_string(mps_thread_percentage(task.spec.gpu_milli)));
        }
    } else if (place.mps_off_dir) {
        // A process reaches one control daemon, and each serves one GPU: outside MPS.
        env.emplace_back(std::string(exec::kMpsPipeDirEnv), *place.mps_off_dir);
    }
    return env;
}

std::vector<exec::MpsMemLimit> mps_memory_limits(const TaskSpec& spec, const PolicySpec& policy,
                                                 Estimator estimator, bool recovered,
                                                 const std::vector<MiB>& gpu_total_mib,
                                                 MiB margin_mib) {
    // The same limit would only crash a recovered attempt again: it runs alone on idle GPUs.
    if (recovered) {
        return {};
    }
    const MemoryKnowledge knowledge = policy.knowledge == MemoryKnowledge::None
                                          ? MemoryKnowledge::Oracle  // what the user declared
                                          : policy.knowledge;
    const std::optional<MiB> need = known_need_mib(spec, knowledge, estimator);
    if (!need) {
        return {};
    }
    // By ordinal, as NVIDIA documents the variable: the i-th GPU of CUDA_VISIBLE_DEVICES.
    std::vector<MiB> per_ordinal;
    for (MiB total : gpu_total_mib) {
        // Saturating: a limit at or above the GPU's memory limits nothing.
        per_ordinal.push_back(*need >= total - margin_mib ? total : *need + margin_mib);
    }
    return exec::ordinal_limits(per_ordinal);
}

}  // namespace carma::daemon
