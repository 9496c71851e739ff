#include "daemon/estimate.h"

#include <algorithm>

#include "core/knowledge.h"
#include "daemon/task_json.h"

namespace carma::daemon {

namespace {

using nlohmann::json;

json optional_json(const std::optional<MiB>& v) {
    return v ? json(*v) : json(nullptr);
}

json optional_json(const std::optional<double>& v) {
    return v ? json(*v) : json(nullptr);
}

json row_json(const store::HistoryRow& r) {
    return {{"task", r.task},
            {"attempt", r.attempt},
            {"outcome", r.outcome},
            {"peak_mib", r.peak_mib},
            {"run_s", r.run_s},
            {"activity", optional_json(r.activity)},
            {"ended_at", r.ended_at},
            {"unobserved", r.unobserved.empty() ? json(nullptr) : json(r.unobserved)}};
}

}  // namespace

json history_summary(const std::vector<store::HistoryRow>& rows) {
    int succeeded = 0, oom = 0, failed = 0, unobserved = 0;
    std::optional<Observation> why;  // of the newest unobserved run
    std::optional<MiB> max_peak, min_peak, oom_held;
    std::vector<double> run_s;
    double activity_sum = 0;
    int activity_n = 0;
    for (const store::HistoryRow& r : rows) {
        const RunFacts f = store::run_facts(r);
        if (!f.observed) {
            // Counted by how it ended, but its peak and activity are not the task's.
            ++unobserved;
            why = r.unobserved == to_string(Observation::NoMemory) ? Observation::NoMemory
                                                                    : Observation::NotSeen;
            if (f.succeeded) {
                ++succeeded;
                run_s.push_back(f.run_s);
            } else if (f.out_of_memory) {
                ++oom;
            } else {
                ++failed;
            }
        } else if (f.out_of_memory) {
            ++oom;
            oom_held = std::max(oom_held.value_or(0), f.peak_mib);
        } else if (f.succeeded) {
            ++succeeded;
            max_peak = std::max(max_peak.value_or(f.peak_mib), f.peak_mib);
            min_peak = std::min(min_peak.value_or(f.peak_mib), f.peak_mib);
            run_s.push_back(f.run_s);
            if (f.activity) {
                activity_sum += *f.activity;
                ++activity_n;
            }
        } else {
            ++failed;
        }
    }
    std::optional<double> median;
    if (!run_s.empty()) {
        std::sort(run_s.begin(), run_s.end());
        const std::size_t n = run_s.size();
        median = n % 2 == 1 ? run_s[n / 2] : (run_s[n / 2 - 1] + run_s[n / 2]) / 2;
    }
    return {{"runs", rows.size()},
            {"succeeded", succeeded},
            {"out_of_memory", oom},
            {"failed", failed},
            {"peak_mib", optional_json(max_peak)},
            {"min_peak_mib", optional_json(min_peak)},
            {"spread_mib", max_peak ? json(*max_peak - *min_peak) : json(nullptr)},
            {"median_run_s", optional_json(median)},
            {"activity", activity_n > 0 ? json(activity_sum / activity_n) : json(nullptr)},
            {"oom_held_mib", optional_json(oom_held)},
            {"unobserved", unobserved},
            {"unobserved_why", why ? json(std::string(unobserved_why(*why))) : json(nullptr)},
            {"newest", rows.empty() ? json(nullptr) : row_json(rows.back())}};
}

json estimate_to_json(const EstimateInput& in) {
    const MemoryInfo& m = in.spec.memory;
    return {{"command", in.spec.command},
            {"gpus", in.spec.gpus},
            {"fingerprint", in.fingerprint.exact},
            {"family", {{"id", in.fingerprint.family},
                        {"program", in.family.program},
                        {"script", in.family.script}}},
            {"declared_mib", optional_json(m.declared_mib)},
            {"estimates",
             {{"horus_mib", optional_json(m.horus_mib)},
              {"faketensor_mib", optional_json(m.faketensor_mib)},
              {"gpumemnet_mib", optional_json(m.gpumemnet_mib)}}},
            // Shown for comparison; the rule never reads it.
            {"profiled_mib", optional_json(m.profiled_mib)},
            {"history", history_summary(in.command)},
            {"family_history", history_summary(in.family_runs)},
            {"learned", learned_to_json(in.spec.learned)},
            {"speed_correction", in.speed_correction}};
}

}  // namespace carma::daemon
