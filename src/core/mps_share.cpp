#include "core/mps_share.h"

#include <fmt/format.h>

namespace carma {

bool mps_user_blocks(const TaskSpec& task, const GpuView& gpu) {
    return !task.mps_user.empty() && !gpu.mps_user.empty() && task.mps_user != gpu.mps_user;
}

bool mps_users_differ(const TaskSpec& a, const TaskSpec& b) {
    return !a.mps_user.empty() && !b.mps_user.empty() && a.mps_user != b.mps_user;
}

std::string explain_mps_user(const TaskSpec& task, const GpuView& gpu) {
    return fmt::format("MPS clients of {} run there, and MPS serves one user at a time on a GPU: "
                       "a task of {} would wait in CUDA initialisation until they all end",
                       gpu.mps_user, task.mps_user);
}

}  // namespace carma
