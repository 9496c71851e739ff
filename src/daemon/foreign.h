#pragma once
// Processes on a GPU that CARMA did not start ("foreign": another user's notebook, a job started
// by hand, a container CARMA knows nothing of). Their memory and activity are taken: `carma`
// never plans a task into them (GpuView::foreign_mib), and they are shown with their pid and
// user in `carma gpus`, `carma top`, the page and GET /v1/gpus. When one grows into memory a
// running task was planned into, the daemon says so in an event.

#include <sys/types.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/task.h"
#include "core/units.h"
#include "device/gpu_backend.h"

namespace carma::daemon {

struct ForeignProcess {
    int pid = 0;
    std::string user;  // "" where /proc does not say (gone, another machine)
    MiB used_mib = 0;
    std::optional<double> activity;  // 0..1 where the backend tells processes apart
};

// The sample's processes that are neither MPS servers nor among `ours` (every process of every
// live attempt), in pid order; users not filled in.
std::vector<ForeignProcess> foreign_processes(const device::GpuSample& sample,
                                              const std::set<pid_t>& ours);

// The name of the user owning /proc/PID, or "uid N" without a name; "" when the process is gone.
std::string process_user(int pid);
// The account's name, or "uid N" when it has none here.
std::string user_of_uid(uid_t uid);

// Their memory together.
MiB foreign_mib(const std::vector<ForeignProcess>& processes);

// Their SM activity together (0..1), or nothing when any of them has none.
std::optional<double> foreign_activity(const std::vector<ForeignProcess>& processes);

// What was planned on one GPU: each running task and the memory it was placed with (need +
// margin); nullopt: its need was unknown, so it was planned the whole GPU.
struct PlannedOnGpu {
    TaskId task = 0;
    std::optional<MiB> planned_mib;
};

// The event's text when foreign memory, now `foreign_now`, has grown past the room the plan
// left it: with what was planned there, the GPU's usable memory (total less the free-memory
// reserve) is exceeded. Nothing when it still fits or nothing is planned there.
std::optional<std::string> foreign_overlap(int gpu, MiB total_mib,
                                           const std::vector<ForeignProcess>& foreign,
                                           const std::vector<PlannedOnGpu>& planned);

// [{"pid", "user", "used_mib", "activity", "owner": "foreign"}], for GET /v1/gpus and the view.
nlohmann::json foreign_json(const std::vector<ForeignProcess>& processes);

// Gives each of a sample's processes (GET /v1/gpus "processes") its "owner": "foreign" (with its
// "user"), "mps-server", or "task" (a process of a CARMA task).
void label_foreign(nlohmann::json& processes, const std::vector<ForeignProcess>& foreign);

}  // namespace carma::daemon
