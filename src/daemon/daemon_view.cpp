// GET /v1/view and GET /v1/timeline: what the web page, `carma top` and `carma report` show.
// Nothing here carries a task's environment, command line or logs (docs/api.md), so both are
// also served on the read-only web listener.

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "daemon/daemon.h"
#include "daemon/view_json.h"

namespace carma::daemon {

namespace {

using nlohmann::json;

constexpr int kRecentTasks = 20;
constexpr double kDefaultTimelineSpanS = 6 * 3600.0;

json optional_mib(const std::optional<MiB>& v) { return v ? json(*v) : json(nullptr); }

// The window's values of one metric, oldest first; null where a sample lacked it.
template <typename Get>
json window_series(const std::vector<MetricSample>& samples, Get get) {
    json out = json::array();
    for (const MetricSample& s : samples) {
        const std::optional<double> v = get(s);
        out.push_back(v ? json(*v) : json(nullptr));
    }
    return out;
}

}  // namespace

api::ApiResult<json> Daemon::view(const api::Caller& caller) {
    // Read from the store before taking the lock, as list_tasks does: the store has its own.
    auto rows = store_->tasks(false);
    if (!rows) {
        return api::api_fail(500, rows.error().message);
    }
    auto recent = store_->recently_finished(kRecentTasks);
    if (!recent) {
        return api::api_fail(500, recent.error().message);
    }
    std::map<TaskId, const store::TaskRow*> by_id;
    for (const store::TaskRow& t : *rows) {
        by_id[t.id] = &t;
    }
    const double unix_t = unix_now();

    std::lock_guard lock(mu_);
    json gpus = gpus_json();
    for (json& g : gpus) {
        const auto idx = static_cast<std::size_t>(g["index"].get<int>());
        const std::vector<MetricSample> samples = windows_[idx].samples();
        g["window"] = {
            {"smact", window_series(samples, [](const MetricSample& s) { return s.smact; })},
            {"smocc", window_series(samples, [](const MetricSample& s) { return s.smocc; })},
            {"drama", window_series(samples, [](const MetricSample& s) { return s.drama; })}};
        json on_gpu = json::array();
        std::optional<MiB> attributed;
        for (const json& id_json : g["tasks"]) {
            const TaskId id = id_json.get<TaskId>();
            const LiveAttempt& live = live_.at(id);
            const auto held = live.held_now.find(static_cast<int>(idx));
            const store::TaskRow* row = by_id.contains(id) ? by_id[id] : nullptr;
            on_gpu.push_back({{"id", id},
                              {"user", row ? row->user : std::string()},
                              {"name", row ? row->spec.name : std::string()},
                              {"used_mib", held != live.held_now.end() ? json(held->second)
                                                                       : json(nullptr)},
                              {"since", live.started_unix}});
            if (held != live.held_now.end()) {
                attributed = attributed.value_or(0) + held->second;
            }
        }
        g["tasks"] = on_gpu;
        if (g.contains("used_mib")) {
            g["other_mib"] = std::max<MiB>(0, g["used_mib"].get<MiB>() - attributed.value_or(0));
        } else {
            g["other_mib"] = nullptr;
        }
        g["risk"].erase("rule_text");
        for (const char* secretish : {"processes", "error", "uuid", "mig", "available_mib",
                                      "energy_j"}) {
            g.erase(secretish);
        }
    }

    // Waiting tasks in the order the next scheduling round considers them (recovery first, then
    // the policy's order), then those kept out of it (waiting on dependencies, held) by id.
    std::vector<TaskId> order;
    std::set<TaskId> listed;
    for (TaskId id : scheduler_.waiting_order(now())) {
        if (by_id.contains(id) && listed.insert(id).second) {
            order.push_back(id);
        }
    }
    for (const store::TaskRow& t : *rows) {
        if (store::is_waiting(t.state) && listed.insert(t.id).second) {
            order.push_back(t.id);
        }
    }
    json queue = json::array();
    for (TaskId id : order) {
        const store::TaskRow& t = *by_id[id];
        if (!store::is_waiting(t.state)) {
            continue;  // placed since the store was read
        }
        queue.push_back({{"id", t.id},
                         {"user", t.user},
                         {"name", t.spec.name},
                         {"state", std::string(store::to_string(t.state))},
                         {"gpus", t.spec.gpus},
                         {"need_mib", optional_mib(planned_need_mib(t.spec))},
                         {"submitted_at", t.submitted_at},
                         {"wait_s", std::max(0.0, unix_t - t.submitted_at)},
                         {"reason", t.message}});
    }

    json running = json::array();
    for (const auto& [id, live] : live_) {
        const store::TaskRow* row = by_id.contains(id) ? by_id[id] : nullptr;
        std::optional<MiB> memory;
        for (const auto& [gpu, mib] : live.held_now) {
            memory = memory.value_or(0) + mib;
        }
        running.push_back({{"id", id},
                           {"user", row ? row->user : std::string()},
                           {"name", row ? row->spec.name : std::string()},
                           {"gpus", live.gpus},
                           {"attempt", live.number},
                           {"started_at", live.started_unix},
                           {"run_s", std::max(0.0, unix_t - live.started_unix)},
                           {"memory_mib", optional_mib(memory)}});
    }

    json finished = json::array();
    for (const store::FinishedTask& t : *recent) {
        finished.push_back(recent_task_json(t));
    }
    return json{{"now", unix_t},
                {"version", "0.1.0"},
                {"policy", config_.policy},
                {"backend", backend_->name()},
                {"time_scale", config_.time_scale},
                {"viewer", caller.via_web ? json(nullptr) : json(caller.user)},
                {"risk_thresholds",
                 {{"smact", config_.risk.smact},
                  {"smocc", config_.risk.smocc},
                  {"drama", config_.risk.drama}}},
                {"warmup_s", config_.warmup_s},
                {"gpus", gpus},
                {"queue", queue},
                {"running", running},
                {"recent", finished}};
}

api::ApiResult<json> Daemon::timeline(const api::Caller&, const api::TimelineQuery& query) {
    const double until = query.until.value_or(unix_now());
    const double since = query.since.value_or(until - kDefaultTimelineSpanS);
    if (since >= until) {
        return api::api_fail(400, fmt::format("since ({:.0f}) must be before until ({:.0f}); "
                                              "give an earlier since or a later until",
                                              since, until));
    }
    auto samples = store_->gpu_samples(since, -1);
    if (!samples) {
        return api::api_fail(500, samples.error().message);
    }
    auto tasks = store_->tasks_between(since, until);
    if (!tasks) {
        return api::api_fail(500, tasks.error().message);
    }
    std::vector<device::GpuInfo> infos;
    {
        std::lock_guard lock(mu_);
        infos = backend_->gpus();
    }
    json gpus = json::array();
    for (const device::GpuInfo& g : infos) {
        gpus.push_back({{"index", g.index},
                        {"name", g.name},
                        {"total_mib", g.total_mib},
                        {"samples", timeline_samples_json(*samples, g.index, since, until,
                                                          query.points)}});
    }
    json task_list = json::array();
    for (const store::FinishedTask& t : *tasks) {
        task_list.push_back(timeline_task_json(t));
    }
    return json{{"since", since},
                {"until", until},
                {"step_s", (until - since) / std::clamp(query.points, api::kTimelinePointsMin,
                                                        api::kTimelinePointsMax)},
                {"policy", config_.policy},
                {"backend", backend_name()},
                {"time_scale", config_.time_scale},
                {"gpus", gpus},
                {"tasks", task_list}};
}

}  // namespace carma::daemon
