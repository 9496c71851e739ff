// carma-shim: the attempt's fence (exec/cgroup.h). Created in the shim before the fork, so a
// failure is an attempt that did not start, with the file and errno in its error; joined by the
// task child alone; read and removed once the task has ended.

#include <string>

#include <fmt/format.h>

#include "exec/cgroup.h"
#include "exec/launch.h"
#include "exec/shim.h"

namespace carma::exec::shim {

std::string create_task_fence(const LaunchRequest& request) {
    if (!request.fence) {
        return "";
    }
    if (auto ok = create_fence(*request.fence); !ok) {
        return fmt::format("cannot create the attempt's fence {}: {}",
                           fence_leaf_path(*request.fence), ok.error().message);
    }
    return "";
}

std::string join_task_fence(const LaunchRequest& request) {
    if (!request.fence) {
        return "";
    }
    if (auto ok = join_fence(*request.fence); !ok) {
        return fmt::format("cannot put the task into its fence: {}", ok.error().message);
    }
    return "";
}

void end_task_fence(const LaunchRequest& request, ExitRecord& record) {
    if (!request.fence) {
        return;
    }
    const FenceSpec& fence = *request.fence;
    const FenceUsage usage = read_fence_usage(fence);
    // The cgroup saw every process of the task, the leader's rusage only those it waited for.
    if (usage.cpu_s) {
        record.cpu_s = usage.cpu_s;
    }
    if (usage.peak_bytes) {
        record.max_rss_bytes = usage.peak_bytes;
    }
    record.memory_fence_hit = usage.oom_kills > 0;
    record.memory_limit_bytes = usage.memory_limit_bytes;
    if (auto ok = remove_fence(fence); !ok) {
        record.fence_error = ok.error().message;
        shim_log("{}", ok.error().message);
    }
}

void discard_task_fence(const LaunchRequest& request) {
    if (!request.fence) {
        return;
    }
    if (auto ok = remove_fence(*request.fence); !ok) {
        shim_log("{}", ok.error().message);
    }
}

}  // namespace carma::exec::shim
