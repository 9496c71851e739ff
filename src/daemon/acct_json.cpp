#include "daemon/acct_json.h"

#include <algorithm>

#include "daemon/task_json.h"

namespace carma::daemon {

namespace {

using nlohmann::json;

// Launched: the attempt's command ran, or at least its supervisor tried to start it.
bool launched(const store::AttemptRow& a) { return a.outcome != "not-started"; }

// Wall-clock seconds the attempt ran; an end the store lacks is the task's.
double run_seconds(const store::AttemptRow& a, const store::TaskRow& task) {
    if (!launched(a)) {
        return 0;
    }
    const double end = a.ended_at.value_or(task.finished_at.value_or(a.started_at));
    return std::max(0.0, end - a.started_at);
}

std::optional<MiB> most(const std::map<int, MiB>& peak) {
    std::optional<MiB> out;
    for (const auto& [gpu, mib] : peak) {
        out = std::max(out.value_or(0), mib);
    }
    return out;
}

}  // namespace

json acct_task_json(const store::FinishedTask& finished) {
    const store::TaskRow& task = finished.task;
    json attempts = json::array();
    std::optional<double> started_at;
    std::optional<double> energy_j;
    std::optional<MiB> peak_mib;
    double run_s = 0;
    double gpu_hours = 0;
    std::optional<double> charged_gpu_s;  // unknown for attempts recorded before schema 9
    std::optional<double> total_cpu_s;    // sacct's TotalCPU: unknown where nothing was fenced
    std::optional<MiB> max_rss_mib;       // sacct's MaxRSS
    for (const store::AttemptRow& a : finished.attempts) {
        if (a.total_cpu_s) {
            total_cpu_s = total_cpu_s.value_or(0) + *a.total_cpu_s;
        }
        if (a.max_rss_mib) {
            max_rss_mib = std::max(max_rss_mib.value_or(0), *a.max_rss_mib);
        }
        if (a.charged_gpu_s) {
            charged_gpu_s = charged_gpu_s.value_or(0) + *a.charged_gpu_s;
        }
        const double run = run_seconds(a, task);
        const std::optional<MiB> peak = most(a.peak_mib);
        if (launched(a) && !started_at) {
            started_at = a.started_at;
        }
        run_s += run;
        gpu_hours += run * static_cast<double>(a.gpus.size()) / 3600.0;
        if (a.energy_j) {
            energy_j = energy_j.value_or(0) + *a.energy_j;
        }
        if (peak) {
            peak_mib = std::max(peak_mib.value_or(0), *peak);
        }
        attempts.push_back({{"number", a.number},
                            {"outcome", a.outcome},
                            {"gpus", a.gpus},
                            {"started_at", a.started_at},
                            {"ended_at", json_or_null(a.ended_at)},
                            {"run_s", run},
                            {"energy_j", json_or_null(a.energy_j)},
                            {"charged_gpu_s", json_or_null(a.charged_gpu_s)},
                            {"slowdown", json_or_null(a.slowdown)},
                            {"peak_mib", peak ? json(*peak) : json(nullptr)},
                            {"cores", a.cores},
                            {"total_cpu_s", json_or_null(a.total_cpu_s)},
                            {"max_rss_mib", json_or_null(a.max_rss_mib)},
                            {"node", a.node.empty() ? json(nullptr) : json(a.node)},
                            {"slurm_job", a.slurm_job.empty() ? json(nullptr) : json(a.slurm_job)}});
    }
    std::optional<double> wait_s;
    if (started_at) {
        wait_s = std::max(0.0, *started_at - task.submitted_at);
    }
    return {{"id", task.id},
            {"array", array_json(task.spec.array)},
            {"name", task.spec.name},
            {"user", task.user},
            {"state", std::string(store::to_string(task.state))},
            {"message", task.message},
            {"submitted_at", task.submitted_at},
            {"started_at", json_or_null(started_at)},
            {"finished_at", json_or_null(task.finished_at)},
            {"wait_s", json_or_null(wait_s)},
            {"run_s", run_s},
            {"gpus", task.spec.gpus},
            {"cpus", task.spec.cpus},
            {"host_mem_mib", task.spec.host_mem_mib},
            {"total_cpu_s", json_or_null(total_cpu_s)},
            {"max_rss_mib", json_or_null(max_rss_mib)},
            {"gpu_hours", gpu_hours},
            {"charged_gpu_hours",
             charged_gpu_s ? json(*charged_gpu_s / 3600.0) : json(nullptr)},
            {"energy_j", json_or_null(energy_j)},
            {"peak_mib", peak_mib ? json(*peak_mib) : json(nullptr)},
            {"attempts", std::move(attempts)}};
}

void AcctTotals::add(const json& row) {
    Sum& sum = users_[row.at("user").get<std::string>()];
    sum.tasks += 1;
    sum.attempts += static_cast<int>(row.at("attempts").size());
    sum.run_s += row.at("run_s").get<double>();
    sum.gpu_hours += row.at("gpu_hours").get<double>();
    if (const json& e = row.at("energy_j"); !e.is_null()) {
        sum.energy_j = sum.energy_j.value_or(0) + e.get<double>();
    }
    if (const json& w = row.at("wait_s"); !w.is_null()) {
        sum.wait_s += w.get<double>();
        sum.waited += 1;
    }
}

json AcctTotals::to_json() const {
    json out = json::array();
    for (const auto& [user, sum] : users_) {
        out.push_back({{"user", user},
                       {"tasks", sum.tasks},
                       {"attempts", sum.attempts},
                       {"run_s", sum.run_s},
                       {"gpu_hours", sum.gpu_hours},
                       {"energy_j", json_or_null(sum.energy_j)},
                       {"mean_wait_s", sum.waited > 0 ? json(sum.wait_s / sum.waited)
                                                      : json(nullptr)}});
    }
    return out;
}

}  // namespace carma::daemon
