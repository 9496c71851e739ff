#include "daemon/fences.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <functional>

#include <fmt/format.h>

namespace carma::daemon {

std::string Fences::describe() const {
    if (!enabled()) {
        return "off: tasks are not fenced (cores, host memory and devices unlimited)";
    }
    return fmt::format("cgroup {} under {}", exec::to_string(mode), root);
}

Result<Fences> setup_fences(const HostConfig& config, const std::string& state_dir) {
    Fences f;
    if (config.fences == "off") {
        f.detail = "fences: off";
        return f;
    }
    const exec::CgroupSupport found = exec::detect_cgroups();
    const auto wanted = exec::cgroup_mode_from_string(config.fences);
    if (found.mode == exec::CgroupMode::None ||
        (wanted && *wanted != exec::CgroupMode::None && *wanted != found.mode)) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot fence tasks in cgroup {}: {}; run the daemon as root on a "
                                "machine with cgroup v2 (Debian 12's default) or v1, or set "
                                "`fences: off` (--fences off) to run tasks unfenced",
                                config.fences == "auto" ? std::string("v2 or v1") : config.fences,
                                found.mode == exec::CgroupMode::None
                                    ? found.detail
                                    : "this machine has " +
                                          std::string(exec::to_string(found.mode))));
    }
    if (::geteuid() != 0) {
        return fail(ErrorCode::Forbidden,
                    "cannot fence tasks: only root may create their cgroups; run the daemon as "
                    "root (the packaged service does), or set `fences: off` (--fences off) to run "
                    "tasks unfenced");
    }
    f.mode = found.mode;
    f.detail = found.detail;
    // v2: a cgroup of its own at the top of the hierarchy rather than under the daemon's unit:
    // there the no-internal-process rule would keep systemd (252, Debian 12) from starting the
    // next daemon in the unit's cgroup once it hands controllers to its children.
    f.root = !config.cgroup_root.empty() ? config.cgroup_root
             : f.mode == exec::CgroupMode::V1
                 ? std::string("carma")
                 : std::string(exec::kCgroupMountRoot) + "/carma";
    f.prefix = fmt::format("{:08x}", static_cast<std::uint32_t>(std::hash<std::string>{}(state_dir)));
    if (auto prepared = exec::prepare_fence_root(f.mode, f.root); !prepared) {
        return fail(prepared.error().code,
                    fmt::format("{}; or set `fences: off` to run tasks unfenced",
                                prepared.error().message));
    }
    return f;
}

namespace {

// The attempt's leaf without its limits: what naming, moving and removing it need.
exec::FenceSpec leaf_of(const Fences& fences, long long task, int attempt) {
    exec::FenceSpec spec;
    spec.mode = fences.mode;
    spec.root = fences.root;
    spec.name = fmt::format("{}-task-{}-{}", fences.prefix, task, attempt);
    return spec;
}

}  // namespace

exec::FenceSpec attempt_fence(const Fences& fences, const HostConfig& config, long long task,
                              int attempt, const std::vector<int>& cores, long long memory_mib,
                              const std::vector<std::string>& other_gpu_files) {
    exec::FenceSpec spec = leaf_of(fences, task, attempt);
    spec.cpus = cores;
    if (memory_mib > 0) {
        spec.memory_bytes = static_cast<std::int64_t>(memory_mib) * 1024 * 1024;
    }
    spec.pids_max = config.pids_max;
    for (const std::string& file : other_gpu_files) {
        struct stat st {};
        if (::stat(file.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
            spec.deny_devices.push_back(exec::DeviceNumber{
                'c', static_cast<int>(major(st.st_rdev)), static_cast<int>(minor(st.st_rdev))});
        }
    }
    return spec;
}

Result<void> discard_attempt_fence(const Fences& fences, long long task, int attempt) {
    if (!fences.enabled()) {
        return {};
    }
    return exec::remove_fence(leaf_of(fences, task, attempt));
}

Result<void> set_fence_cores(const Fences& fences, long long task, int attempt,
                             const std::vector<int>& cores) {
    const exec::FenceSpec spec = leaf_of(fences, task, attempt);
    const std::string path = exec::fence_leaf_path(spec, "cpuset") + "/cpuset.cpus";
    std::ofstream out(path);
    out << exec::cpu_list(cores);
    out.flush();
    if (!out) {
        return fail(ErrorCode::Io, fmt::format("cannot write {} ({}): the attempt keeps its cores",
                                               path, exec::cpu_list(cores)));
    }
    return {};
}

}  // namespace carma::daemon
