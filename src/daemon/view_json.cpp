#include "daemon/view_json.h"

#include <algorithm>
#include <cmath>

#include "daemon/acct_json.h"

namespace carma::daemon {

namespace {

using nlohmann::json;

// Largest of the known values; NaN (what the store gives for a missing reading) counts as none.
struct MaxOf {
    std::optional<double> value;
    void add(double v) {
        if (std::isfinite(v)) {
            value = std::max(value.value_or(v), v);
        }
    }
    json to_json() const { return value ? json(*value) : json(nullptr); }
};

struct Bucket {
    double t = 0;
    MiB used_mib = 0;
    MaxOf smact, smocc, drama, power_w;
};

}  // namespace

json timeline_samples_json(const std::vector<store::GpuSampleRow>& rows, int gpu, double since,
                           double until, int points) {
    const int buckets = std::clamp(points, api::kTimelinePointsMin, api::kTimelinePointsMax);
    const double width = until > since ? (until - since) / buckets : 1.0;
    std::vector<std::optional<Bucket>> slots(static_cast<std::size_t>(buckets));
    for (const store::GpuSampleRow& r : rows) {
        if (r.gpu != gpu || r.time < since || r.time > until) {
            continue;
        }
        const auto i = static_cast<std::size_t>(
            std::clamp(static_cast<int>((r.time - since) / width), 0, buckets - 1));
        std::optional<Bucket>& b = slots[i];
        if (!b) {
            b.emplace();
            b->t = r.time;
        }
        b->used_mib = std::max(b->used_mib, r.used_mib);
        b->smact.add(r.smact);
        b->smocc.add(r.smocc);
        b->drama.add(r.drama);
        b->power_w.add(r.power_w);
    }
    json out = json::array();
    for (const std::optional<Bucket>& b : slots) {
        if (b) {
            out.push_back({{"t", b->t},
                           {"used_mib", b->used_mib},
                           {"smact", b->smact.to_json()},
                           {"smocc", b->smocc.to_json()},
                           {"drama", b->drama.to_json()},
                           {"power_w", b->power_w.to_json()}});
        }
    }
    return out;
}

json timeline_task_json(const store::FinishedTask& task) {
    const json acct = acct_task_json(task);
    json attempts = json::array();
    for (const store::AttemptRow& a : task.attempts) {
        // A stored attempt has its outcome once it ended; until then it is running.
        const bool live = !a.ended_at && a.outcome.empty();
        attempts.push_back({{"number", a.number},
                            {"gpus", a.gpus},
                            {"started_at", a.started_at},
                            {"ended_at", a.ended_at ? json(*a.ended_at) : json(nullptr)},
                            {"outcome", live ? std::string("running") : a.outcome}});
    }
    return {{"id", task.task.id},
            {"array", array_json(task.task.spec.array)},
            {"user", task.task.user},
            {"name", task.task.spec.name},
            {"gpus", task.task.spec.gpus},
            {"state", acct["state"]},
            {"submitted_at", task.task.submitted_at},
            {"started_at", acct["started_at"]},
            {"finished_at", acct["finished_at"]},
            {"energy_j", acct["energy_j"]},
            {"attempts", attempts}};
}

json recent_task_json(const store::FinishedTask& task) {
    const json acct = acct_task_json(task);
    const auto ooms = std::count_if(task.attempts.begin(), task.attempts.end(),
                                    [](const store::AttemptRow& a) {
                                        return a.outcome == "out-of-memory";
                                    });
    return {{"id", task.task.id},
            {"array", acct["array"]},
            {"user", task.task.user},
            {"name", task.task.spec.name},
            {"state", acct["state"]},
            {"attempts", task.task.attempts},
            {"ooms", ooms},
            {"finished_at", acct["finished_at"]},
            {"wait_s", acct["wait_s"]},
            {"run_s", acct["run_s"]},
            {"energy_j", acct["energy_j"]},
            {"message", acct["message"]}};
}

std::optional<MiB> planned_need_mib(const TaskSpec& spec) {
    if (spec.learned.need_mib) {
        return *spec.learned.need_mib + spec.learned.margin_mib;
    }
    return spec.memory.declared_mib;
}

}  // namespace carma::daemon
