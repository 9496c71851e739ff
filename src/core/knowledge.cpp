#include "core/knowledge.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "core/memory_need.h"

namespace carma {

namespace {

struct Summary {
    int successes = 0;
    MiB max_peak = 0;
    MiB min_peak = 0;
    MiB oom_lower_bound = 0;
    int unobserved = 0;  // runs never seen on their GPUs: no peak, no activity
    std::vector<double> run_s;
    std::vector<double> activity;
};

Summary summarise(const std::vector<RunFacts>& runs, std::size_t max_runs) {
    Summary s;
    const std::size_t first = runs.size() > max_runs ? runs.size() - max_runs : 0;
    for (std::size_t i = first; i < runs.size(); ++i) {
        const RunFacts& r = runs[i];
        if (!r.observed) {
            // Its peak of 0 and whatever activity was read are not the task's; the wall clock
            // saw it run, though.
            ++s.unobserved;
            if (r.succeeded) {
                s.run_s.push_back(r.run_s);
            }
            continue;
        }
        if (r.out_of_memory) {
            s.oom_lower_bound = std::max(s.oom_lower_bound, r.peak_mib);
            continue;
        }
        if (!r.succeeded) {
            continue;  // a failure tells nothing reliable about what the task needs
        }
        s.max_peak = s.successes == 0 ? r.peak_mib : std::max(s.max_peak, r.peak_mib);
        s.min_peak = s.successes == 0 ? r.peak_mib : std::min(s.min_peak, r.peak_mib);
        ++s.successes;
        s.run_s.push_back(r.run_s);
        if (r.activity) {
            s.activity.push_back(*r.activity);
        }
    }
    return s;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double mean(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) {
        sum += x;
    }
    return sum / static_cast<double>(v.size());
}

std::string mib_text(MiB m) { return format_mib(m); }

// The largest estimate the task file carries: estimators err both ways, and an underestimate
// crashes a co-runner while an overestimate only costs a chance to share.
std::optional<std::pair<MiB, std::string>> best_estimate(const MemoryInfo& m) {
    std::optional<std::pair<MiB, std::string>> best;
    auto consider = [&](std::optional<MiB> v, std::string_view what) {
        if (v && (!best || *v > best->first)) {
            best = std::make_pair(*v, std::string(what));
        }
    };
    consider(m.horus_mib, "Horus estimate");
    if (!m.horus_mib && m.model) {
        consider(horus_estimate_mib(*m.model), "Horus formula");
    }
    consider(m.faketensor_mib, "FakeTensor estimate");
    consider(m.gpumemnet_mib, "GPUMemNet estimate");
    return best;
}

}  // namespace

Observation observation_of(const std::map<int, MiB>& peak_per_gpu) {
    if (peak_per_gpu.empty()) {
        return Observation::NotSeen;
    }
    for (const auto& [gpu, mib] : peak_per_gpu) {
        if (mib > 0) {
            return Observation::Seen;
        }
    }
    return Observation::NoMemory;
}

std::string_view to_string(Observation o) {
    switch (o) {
        case Observation::Seen: return "seen";
        case Observation::NotSeen: return "not-seen";
        case Observation::NoMemory: return "no-memory";
    }
    return "?";
}

std::string_view unobserved_why(Observation o) {
    switch (o) {
        case Observation::Seen: return "its processes were seen on its GPUs";
        case Observation::NotSeen:
            return "its processes were never seen on its GPUs, so it teaches no memory need and "
                   "no activity; this happens when its GPU work runs in processes outside its "
                   "own process tree (docker run inside the task: the container runtime starts "
                   "them), when CARMA runs in a container without the host's PID namespace, or "
                   "when it ended before a sample saw it on a GPU; declare its memory to plan "
                   "with";
        case Observation::NoMemory:
            return "its processes were seen on its GPUs but never with any memory, so it teaches "
                   "no memory need and no activity; this happens when it ended before a sample "
                   "saw its memory, or when the driver does not report per-process memory "
                   "(usedGpuMemory); declare its memory to plan with";
    }
    return "?";
}

std::optional<double> sample_activity(std::optional<double> own, std::optional<double> gpu,
                                      bool alone) {
    if (own) {
        return std::clamp(*own, 0.0, 1.0);
    }
    if (gpu && alone) {
        return std::clamp(*gpu, 0.0, 1.0);
    }
    return std::nullopt;
}

Learned derive_knowledge(const TaskSpec& task, const std::vector<RunFacts>& exact,
                         const std::vector<RunFacts>& family,
                         std::optional<double> time_limit_s, const KnowledgeConfig& config) {
    Learned out;
    const Summary mine = summarise(exact, config.max_runs);
    const Summary kin = summarise(family, config.max_runs);
    std::string memory_basis;
    bool from_family_or_weaker = false;

    if (mine.successes > 0) {
        // The most any recent run held; the margin shrinks as the runs agree: one run gets the
        // full margin, n runs the spread between them plus base/n, never below the minimum.
        out.need_mib = mine.max_peak;
        out.runs = mine.successes;
        const MiB spread = mine.max_peak - mine.min_peak;
        out.margin_mib = std::clamp<MiB>(spread + config.base_margin_mib / mine.successes,
                                         config.min_margin_mib, config.base_margin_mib);
        memory_basis = "history: " + std::to_string(mine.successes) + " run(s), peak " +
                       mib_text(mine.max_peak) + ", spread " + mib_text(spread);
    } else if (task.memory.declared_mib) {
        out.need_mib = *task.memory.declared_mib;
        out.margin_mib = config.base_margin_mib;
        memory_basis = "declared " + mib_text(*task.memory.declared_mib);
    } else if (kin.successes > 0) {
        out.need_mib = kin.max_peak;
        out.margin_mib = config.base_margin_mib;
        memory_basis = "family history: " + std::to_string(kin.successes) + " run(s) of the same " +
                       "program, script and GPU count, peak " + mib_text(kin.max_peak);
        from_family_or_weaker = true;
    } else if (auto est = best_estimate(task.memory)) {
        out.need_mib = est->first;
        out.margin_mib = config.base_margin_mib;
        memory_basis = est->second + " " + mib_text(est->first);
        from_family_or_weaker = true;
    } else {
        memory_basis = "memory unknown";
        from_family_or_weaker = true;
    }
    if (mine.unobserved + kin.unobserved > 0) {
        memory_basis += ", " + std::to_string(mine.unobserved + kin.unobserved) +
                        " unobserved run(s) not counted (never seen on their GPUs)";
    }
    // A sibling's crash with other arguments bounds a guess, not what this command's own runs
    // or its user say.
    out.lower_bound_mib =
        std::max(mine.oom_lower_bound, from_family_or_weaker ? kin.oom_lower_bound : MiB{0});
    if (out.lower_bound_mib > 0) {
        if (out.need_mib && *out.need_mib < out.lower_bound_mib) {
            out.need_mib = out.lower_bound_mib;
            out.margin_mib = config.base_margin_mib;
            memory_basis += ", raised to " + mib_text(out.lower_bound_mib) +
                            " held at an out-of-memory crash";
        } else {
            memory_basis += ", crashed out of memory holding " + mib_text(out.lower_bound_mib);
        }
    }
    if (out.need_mib) {
        memory_basis += " + " + mib_text(out.margin_mib) + " margin";
    }

    std::string duration_basis;
    if (!mine.run_s.empty()) {
        out.duration_s = median(mine.run_s);
        duration_basis = "run time: history median";
        // It is stopped at its limit, however long it ran before.
        if (time_limit_s && *time_limit_s < *out.duration_s) {
            out.duration_s = *time_limit_s;
            duration_basis += ", cut to the time limit";
        }
    } else if (time_limit_s) {
        out.duration_s = *time_limit_s;
        duration_basis = "run time: the time limit";
    } else {
        duration_basis = "run time unknown";
    }

    std::string activity_basis;
    if (!mine.activity.empty()) {
        out.activity = mean(mine.activity);
        activity_basis = "activity: history";
    } else if (!kin.activity.empty()) {
        out.activity = mean(kin.activity);
        activity_basis = "activity: family history";
    } else {
        out.activity = config.default_activity;
        activity_basis = "activity: class default";
    }
    char activity_text[32];
    std::snprintf(activity_text, sizeof activity_text, " %.2f", *out.activity);
    out.basis = memory_basis + "; " + duration_basis + "; " + activity_basis + activity_text;
    return out;
}

}  // namespace carma
