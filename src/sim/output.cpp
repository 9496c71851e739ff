#include "sim/output.h"

#include <fmt/format.h>

namespace carma::sim {

const PolicyResult* find_exclusive(const Comparison& c) {
    for (const PolicyResult& r : c.results) {
        if (r.policy == "exclusive") {
            return &r;
        }
    }
    return nullptr;
}

std::string format_change(double value, double base) {
    if (base <= 0) {
        return "-";
    }
    return fmt::format("{:+.1f}%", 100.0 * (value / base - 1.0));
}

std::string format_table(const Comparison& c) {
    const PolicyResult* excl = find_exclusive(c);
    std::string out = fmt::format("trace {} on {} ({} sharing{})\n", c.trace, c.gpus, c.sharing,
                                  c.world == "model" ? "" : ", world " + c.world);
    out += fmt::format("{:<14} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10} {:>9} {:>5} {:>8} {:>6} "
                       "{:>6} {:>6}\n",
                       "policy", "makespan_h", "vs_excl", "energy_MJ", "vs_excl", "mean_JCT_h",
                       "p95_JCT_h", "mean_wait_h", "OOM", "attempts", "SMACT", "SMOCC", "mem");
    for (const PolicyResult& r : c.results) {
        out += fmt::format(
            "{:<14} {:>10.2f} {:>8} {:>10.2f} {:>8} {:>10.2f} {:>10.2f} {:>9.2f} {:>5} {:>8} "
            "{:>6.3f} {:>6.3f} {:>6.3f}\n",
            r.policy, r.makespan_s / 3600.0,
            excl ? format_change(r.makespan_s, excl->makespan_s) : "-", r.energy_j / 1e6,
            excl ? format_change(r.energy_j, excl->energy_j) : "-",
            r.mean_jct_s / 3600.0, r.p95_jct_s / 3600.0, r.mean_wait_s / 3600.0, r.oom_crashes,
            r.attempts, r.mean_smact, r.mean_smocc, r.mean_memory_used_frac);
    }
    for (const PolicyResult& r : c.results) {
        if (r.tasks_rejected > 0) {
            out += fmt::format("{}: {} task(s) rejected as infeasible\n", r.policy,
                               r.tasks_rejected);
        }
        const int unfinished =
            static_cast<int>(r.tasks.size()) - r.tasks_completed - r.tasks_rejected;
        if (unfinished > 0) {
            out += fmt::format("{}: {} task(s) did not complete (gave up after repeated crashes)\n",
                               r.policy, unfinished);
        }
    }
    return out;
}

nlohmann::json to_json(const Comparison& c) {
    nlohmann::json results = nlohmann::json::array();
    for (const PolicyResult& r : c.results) {
        nlohmann::json per_gpu = nlohmann::json::array();
        for (const GpuSummary& g : r.per_gpu) {
            per_gpu.push_back({{"gpu", g.gpu},
                               {"mean_smact", g.mean_smact},
                               {"mean_smocc", g.mean_smocc},
                               {"mean_memory_used_frac", g.mean_memory_used_frac},
                               {"energy_j", g.energy_j}});
        }
        nlohmann::json per_user = nlohmann::json::array();
        for (const UserSummary& u : r.per_user) {
            per_user.push_back({{"user", u.user},
                                {"tasks", u.tasks},
                                {"completed", u.completed},
                                {"charged_gpu_hours", u.charged_gpu_h},
                                {"mean_wait_s", u.mean_wait_s},
                                {"mean_slowdown", u.mean_slowdown}});
        }
        nlohmann::json result = {{"policy", r.policy},
                                 {"makespan_s", r.makespan_s},
                                 {"energy_j", r.energy_j},
                                 {"mean_jct_s", r.mean_jct_s},
                                 {"p95_jct_s", r.p95_jct_s},
                                 {"mean_wait_s", r.mean_wait_s},
                                 {"p95_wait_s", r.p95_wait_s},
                                 {"max_wait_s", r.max_wait_s},
                                 {"p95_slowdown", r.p95_slowdown},
                                 {"oom_crashes", r.oom_crashes},
                                 {"preemptions", r.preemptions},
                                 {"tasks_completed", r.tasks_completed},
                                 {"tasks_rejected", r.tasks_rejected},
                                 {"attempts", r.attempts},
                                 {"mean_smact", r.mean_smact},
                                 {"mean_smocc", r.mean_smocc},
                                 {"mean_memory_used_frac", r.mean_memory_used_frac},
                                 {"per_gpu", per_gpu},
                                 {"per_user", per_user},
                                 {"jain_index", r.jain_index}};
        // With timelines only (`--report`): each user's charged GPU-hours over time.
        if (!r.usage.empty()) {
            nlohmann::json usage = nlohmann::json::object();
            for (const UsageSeries& u : r.usage) {
                nlohmann::json points = nlohmann::json::array();
                for (const auto& [t, gpu_h] : u.points) {
                    points.push_back({t, gpu_h});
                }
                usage[u.user] = points;
            }
            result["usage_per_user"] = usage;
        }
        results.push_back(result);
    }
    nlohmann::json host = {
        {"cpus", c.host_cpus > 0 ? nlohmann::json(c.host_cpus) : nlohmann::json(nullptr)},
        {"memory_mib", c.host_mem_mib > 0 ? nlohmann::json(c.host_mem_mib) : nlohmann::json(nullptr)}};
    return {{"trace", c.trace},
            {"gpus", c.gpus},
            {"sharing", c.sharing},
            {"history", c.history},
            {"seed", c.seed},
            {"history_seed", c.history_seed ? nlohmann::json(*c.history_seed) : nlohmann::json()},
            {"world", c.world},
            {"world_compose", c.world_compose},
            {"host_per_node", host},
            {"results", results}};
}

std::string render_tasks_csv(const Comparison& c) {
    std::string out =
        "policy,task,gpus,submit_s,wait_s,start_s,end_s,gpu_ids,attempts,oom_crashes,slowdown,"
        "outcome\n";
    for (const PolicyResult& r : c.results) {
        for (const TaskRecord& t : r.tasks) {
            std::string ids;
            for (int g : t.gpu_ids) {
                if (!ids.empty()) {
                    ids += ' ';
                }
                ids += std::to_string(g);
            }
            const char* outcome = t.rejected         ? "rejected"
                                  : t.finish_s >= 0 ? "completed"
                                                    : "not completed";
            out += fmt::format("{},{},{},{:.1f},{:.1f},{:.1f},{:.1f},{},{},{},{:.3f},{}\n", r.policy,
                               t.name, t.gpus, t.submit_s, t.wait_s, t.first_start_s, t.finish_s,
                               ids, t.attempts, t.oom_crashes, t.slowdown, outcome);
        }
    }
    return out;
}

}  // namespace carma::sim
