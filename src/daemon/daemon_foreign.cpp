// Processes on the GPUs that CARMA did not start (daemon/foreign.h): who they are, and an event
// when they grow into memory a running task was planned into.

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace carma::daemon {

void Daemon::notice_foreign(const std::set<pid_t>& ours) {
    for (const device::GpuSample& s : last_samples_) {
        if (s.index < 0 || static_cast<std::size_t>(s.index) >= gpu_state_.size() ||
            !s.error.empty()) {
            continue;  // a failed read says nothing new: the last list stands
        }
        GpuState& state = gpu_state_[static_cast<std::size_t>(s.index)];
        std::vector<ForeignProcess> foreign = foreign_processes(s, ours);
        const device::GpuInfo& gpu = backend_->gpus()[static_cast<std::size_t>(s.index)];
        for (ForeignProcess& p : foreign) {
            // Pids of another node mean nothing here.
            p.user = gpu.node.empty() ? process_user(p.pid) : std::string();
        }
        std::vector<PlannedOnGpu> planned;
        for (const auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), s.index) != live.gpus.end()) {
                planned.push_back(PlannedOnGpu{
                    id, live.learned.need_mib ? std::optional<MiB>(*live.learned.need_mib +
                                                                   live.learned.margin_mib)
                                              : std::nullopt});
            }
        }
        const MiB held = foreign_mib(foreign);
        const MiB before = foreign_mib(state.foreign);
        const std::optional<std::string> overlap =
            foreign_overlap(s.index, gpu.total_mib, foreign, planned);
        // Only the foreign side growing is news (a task placed beside it is the policy's
        // choice): once when it runs into the plan, again each time it grows 256 MiB further.
        constexpr MiB kReportStepMiB = 256;
        if (!overlap) {
            state.foreign_reported_mib = 0;
        } else if (held > before && (state.foreign_reported_mib == 0 ||
                                     held >= state.foreign_reported_mib + kReportStepMiB)) {
            state.foreign_reported_mib = held;
            spdlog::warn("{}", *overlap);
            event(0, "foreign-memory", *overlap);
            for (const PlannedOnGpu& p : planned) {
                event(p.task, "foreign-memory", *overlap);
            }
        }
        state.foreign = std::move(foreign);
    }
}

}  // namespace carma::daemon
