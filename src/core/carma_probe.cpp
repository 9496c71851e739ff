#include "core/carma_probe.h"

#include <vector>

namespace carma {

bool carma_would_start(const PolicySpec& policy, const TaskSpec& task,
                       std::span<const GpuView> gpus, const PlacementConfig& config,
                       const CarmaConfig& carma) {
    PlacementConfig quiet = config;
    quiet.explain = false;
    const CarmaNeed need = carma_need(task, false, quiet);
    const std::size_t n = gpus.size();
    std::vector<char> open(n, 0);
    const std::vector<char> allowed(n, 1);
    std::vector<MiB> available(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        open[i] = carma_gpu_open(policy, gpus[i], quiet.risk) == FilterOutcome::Pass ? 1 : 0;
        available[i] = planned_available_mib(gpus[i]);
    }
    std::vector<GpuPredictions> predictions(n);
    const Selection sel =
        carma_select(policy, task, need, gpus, open, allowed, quiet, carma, predictions, available);
    return !sel.gpus.empty();
}

}  // namespace carma
