#pragma once
// What `carma top`'s tests serve it: a GPU of a canned GET /v1/view answer, shared by the tests
// of its screen (top_view_test) and of the command in a terminal (top_tmux_test).

#include <utility>

#include <nlohmann/json.hpp>

namespace carma::test_support {

// An A100-40GB with 13,000 of its 40,960 MiB used (1,000 by processes CARMA did not start),
// activity below the risk thresholds, healthy and not locked, `tasks` on it; SM activity, SM
// occupancy, DRAM activity and memory as the emulated backend reports them.
inline nlohmann::json canned_gpu(int index, nlohmann::json tasks) {
    return {{"index", index},
            {"name", "A100-40GB"},
            {"total_mib", 40960},
            {"used_mib", 13000},
            {"free_mib", 27960},
            {"smact", 0.42},
            {"smocc", 0.3},
            {"drama", 0.2},
            {"sources",
             {{"smact", "emulated"},
              {"smocc", "emulated"},
              {"drama", "emulated"},
              {"memory", "emulated"}}},
            {"health", {{"state", "ok"}, {"reason", ""}}},
            {"risk", {{"high", false}, {"rule", "paper"}, {"reason", ""}}},
            {"locked", false},
            {"tasks", std::move(tasks)},
            {"other_mib", 1000}};
}

}  // namespace carma::test_support
