// The figures of a simulated run at its end (sim/simulation.h): makespan, energy, completion
// and wait times, per-GPU means, and the records of every task; and the progress callback.

#include <algorithm>
#include <map>
#include <vector>

#include "sim/simulation.h"

namespace carma::sim::engine {

void Simulation::report_progress() {
    if (config_.progress && (completed_ % 64 == 0 || completed_ == tasks_.size())) {
        config_.progress(static_cast<double>(completed_) / static_cast<double>(tasks_.size()));
    }
}

PolicyResult Simulation::finish() {
    PolicyResult r;
    r.policy = config_.scheduler.policy.name;
    const double end = started_ ? std::max(last_completion_, first_dispatch_) : 0;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
        now_ = end;
        integrate(g, end);
    }
    r.makespan_s = started_ ? end - first_dispatch_ : 0;
    std::vector<double> jct, wait, slowdowns;
    for (const SimTask& t : tasks_) {
        r.tasks.push_back(t.record);
        r.attempts += t.record.attempts;
        if (t.phase == Phase::Rejected) {
            ++r.tasks_rejected;
        }
        if (t.phase == Phase::Done) {
            ++r.tasks_completed;
            jct.push_back(t.record.finish_s - t.record.submit_s);
            wait.push_back(t.record.wait_s);
            slowdowns.push_back(t.record.slowdown);
            r.max_wait_s = std::max(r.max_wait_s, t.record.wait_s);
        }
    }
    r.oom_crashes = oom_crashes_;
    r.preemptions = preemptions_;
    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) {
            s += x;
        }
        return v.empty() ? 0.0 : s / static_cast<double>(v.size());
    };
    auto p95 = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return quantile_sorted(v, 0.95);
    };
    r.mean_jct_s = mean(jct);
    r.p95_jct_s = p95(jct);
    r.mean_wait_s = mean(wait);
    r.p95_wait_s = p95(wait);
    r.p95_slowdown = p95(slowdowns);
    const double span = r.makespan_s > 0 ? r.makespan_s : 1;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
        const SimGpu& gpu = gpus_[g];
        GpuSummary s;
        s.gpu = static_cast<int>(g);
        s.mean_smact = gpu.smact_s / span;
        s.mean_smocc = gpu.smocc_s / span;
        s.mean_memory_used_frac = gpu.memory_frac_s / span;
        s.energy_j = gpu.energy_j;
        r.energy_j += gpu.energy_j;
        r.mean_smact += s.mean_smact / static_cast<double>(gpus_.size());
        r.mean_smocc += s.mean_smocc / static_cast<double>(gpus_.size());
        r.mean_memory_used_frac += s.mean_memory_used_frac / static_cast<double>(gpus_.size());
        r.per_gpu.push_back(s);
        if (config_.record_timelines) {
            r.timelines.push_back(gpu.timeline);
        }
    }
    per_user(r);
    return r;
}

void Simulation::per_user(PolicyResult& r) const {
    std::map<std::string, UserSummary> users;
    std::map<std::string, double> wait, slowdown;
    for (const SimTask& t : tasks_) {
        UserSummary& u = users[t.spec.user];
        u.user = t.spec.user;
        ++u.tasks;
        u.charged_gpu_h += t.record.charged_gpu_s / 3600.0;
        if (t.phase == Phase::Done) {
            ++u.completed;
            wait[t.spec.user] += t.record.wait_s;
            slowdown[t.spec.user] += t.record.slowdown;
        }
    }
    double sum = 0, squares = 0;
    int n = 0;
    for (auto& [name, u] : users) {
        if (u.completed > 0) {
            u.mean_wait_s = wait[name] / u.completed;
            u.mean_slowdown = slowdown[name] / u.completed;
            sum += u.mean_slowdown;
            squares += u.mean_slowdown * u.mean_slowdown;
            ++n;
        }
        r.per_user.push_back(u);
    }
    r.jain_index = n >= 2 && squares > 0 ? sum * sum / (n * squares) : 1.0;
    if (config_.record_timelines) {
        for (const auto& [name, series] : usage_series_) {
            r.usage.push_back(UsageSeries{name, series.points});
        }
    }
}

}  // namespace carma::sim::engine
