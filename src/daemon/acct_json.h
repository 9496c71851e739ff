#pragma once
// The rows of accounting (GET /v1/acct, docs/api.md): what one finished task cost, computed from
// its stored record and attempts, and the totals per user. Pure functions of store rows.
//
// Times are wall-clock seconds (not multiplied by --time-scale). An attempt whose launch never
// happened ("not-started": the daemon died before it, or its supervisor could not start) waited
// rather than ran: it counts neither in the run time nor as the start of the wait.

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace carma::daemon {

// {"id", "index"} of an array member, null for a task outside arrays: the shape every task the
// API lists carries, so that every view writes ids one way (core/task_ref.h format_task_id).
inline nlohmann::json array_json(const std::optional<ArrayMember>& array) {
    if (!array) {
        return nullptr;
    }
    nlohmann::json j{{"id", array->id}, {"index", array->index}};
    if (array->max_running > 0) {
        j["max_running"] = array->max_running;  // --array=...%N
    }
    return j;
}

// {id, array, name, user, state, submitted_at, started_at, finished_at, wait_s, run_s, gpus,
//  cpus, host_mem_mib, total_cpu_s, max_rss_mib, gpu_hours, energy_j, peak_mib, attempts:
//  [{number, outcome, gpus, cores, started_at, ended_at, run_s, energy_j, peak_mib, total_cpu_s,
//  max_rss_mib}]}; unknown figures are null (total_cpu_s, max_rss_mib: read from the attempt's
//  fence, unknown without one). No environment, no command: anyone may see
// it.
nlohmann::json acct_task_json(const store::FinishedTask& finished);

// Totals per user over acct_task_json rows.
class AcctTotals {
public:
    void add(const nlohmann::json& row);
    // [{user, tasks, attempts, run_s, gpu_hours, energy_j, mean_wait_s}] in user order;
    // energy_j null when no task of the user has a known energy, mean_wait_s when none started.
    nlohmann::json to_json() const;

private:
    struct Sum {
        int tasks = 0;
        int attempts = 0;
        double run_s = 0;
        double gpu_hours = 0;
        std::optional<double> energy_j;
        double wait_s = 0;
        int waited = 0;  // tasks with a wait (those that started)
    };
    std::map<std::string, Sum> users_;
};

}  // namespace carma::daemon
