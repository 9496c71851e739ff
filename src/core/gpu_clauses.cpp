#include "core/gpu_clauses.h"

#include <algorithm>

#include <fmt/format.h>

namespace carma {

void GpuClauses::add(int gpu, const std::string& node, std::string clause) {
    for (Group& g : groups_) {
        if (g.node == node && g.clause == clause) {
            g.gpus.push_back(gpu);
            return;
        }
    }
    groups_.push_back(Group{node, std::move(clause), {gpu}});
}

std::string gpu_index_ranges(std::vector<int> gpus) {
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    std::string out;
    for (std::size_t i = 0; i < gpus.size();) {
        std::size_t j = i;
        while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) {
            ++j;
        }
        out += out.empty() ? "" : ", ";
        out += j == i ? fmt::format("{}", gpus[i]) : fmt::format("{}-{}", gpus[i], gpus[j]);
        i = j + 1;
    }
    return out;
}

std::string GpuClauses::text() const {
    std::string out;
    for (const Group& g : groups_) {
        out += fmt::format("{}{} {}{}: {}", out.empty() ? "" : "; ",
                           g.gpus.size() == 1 ? "GPU" : "GPUs", gpu_index_ranges(g.gpus),
                           g.node.empty() ? "" : " on " + g.node, g.clause);
    }
    return out;
}

}  // namespace carma
