// GET /v1/view and GET /v1/timeline: what the web page, `carma top` and `carma report` show.
// Nothing here carries a task's environment, command line or logs (docs/api.md), so both are
// also served on the read-only web listener.

#include <algorithm>

#include <fmt/format.h>

#include "daemon/acct_json.h"
#include "daemon/daemon.h"
#include "daemon/task_json.h"
#include "daemon/view_json.h"

namespace carma::daemon {

namespace {

using nlohmann::json;

constexpr int kRecentTasks = 20;
// Waiting tasks the view lists (the rest it counts).
constexpr std::size_t kViewQueueTasks = 50;
constexpr double kDefaultTimelineSpanS = 6 * 3600.0;

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
    // The queue may be 100,000 tasks long: the view carries its head (what runs next, in
    // serving order) and counts per user, never every waiting task. Ids under the lock, rows
    // from the store without it (the store has its own), then the answer under the lock again.
    std::vector<TaskId> head;
    std::vector<TaskId> wanted;
    {
        std::lock_guard lock(mu_);
        head = scheduler_.waiting_order(now(), kViewQueueTasks);
        for (TaskId id : blocked_) {  // waiting on dependencies: after the scheduler's queue
            if (head.size() >= kViewQueueTasks) {
                break;
            }
            head.push_back(id);
        }
        for (const auto& [array, t] : throttled_) {  // --array=...%N: after those
            for (const HeldMember& m : t.held) {
                if (head.size() >= kViewQueueTasks) {
                    break;
                }
                head.push_back(m.id);
            }
        }
        wanted = head;
        for (const auto& [id, live] : live_) {
            wanted.push_back(id);
        }
    }
    if (head.size() < kViewQueueTasks) {
        auto held = store_->ids_in_state(store::TaskState::Held, kViewQueueTasks - head.size());
        if (!held) {
            return api::api_fail(500, held.error().message);
        }
        head.insert(head.end(), held->begin(), held->end());
        wanted.insert(wanted.end(), held->begin(), held->end());
    }
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    auto rows = store_->tasks_by_id(wanted);
    if (!rows) {
        return api::api_fail(500, rows.error().message);
    }
    auto counts = store_->live_counts();
    if (!counts) {
        return api::api_fail(500, counts.error().message);
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

    // Per user: how many wait (by state) and run; the total of those waiting.
    std::map<std::string, json> users;
    std::size_t waiting_total = 0;
    for (const store::StateCount& c : *counts) {
        json& u = users[c.user];
        if (u.is_null()) {
            u = {{"user", c.user}, {"queued", 0}, {"recovering", 0}, {"held", 0}, {"running", 0}};
        }
        u[std::string(store::to_string(c.state))] = c.count;
        if (store::is_waiting(c.state)) {
            waiting_total += c.count;
        }
    }
    json queue_users = json::array();
    for (auto& [name, u] : users) {
        queue_users.push_back(std::move(u));
    }

    json queue = json::array();
    for (TaskId id : head) {
        const auto found = by_id.find(id);
        if (found == by_id.end() || !store::is_waiting(found->second->state)) {
            continue;  // placed or ended since the ids were taken
        }
        const store::TaskRow& t = *found->second;
        queue.push_back({{"id", t.id},
                         {"array", array_json(t.spec.array)},
                         {"user", t.user},
                         {"name", t.spec.name},
                         {"state", std::string(store::to_string(t.state))},
                         {"gpus", t.spec.gpus},
                         {"need_mib", json_or_null(planned_need_mib(t.spec))},
                         {"submitted_at", t.submitted_at},
                         {"wait_s", std::max(0.0, unix_t - t.submitted_at)},
                         {"reason", t.message}});
    }

    std::lock_guard lock(mu_);
    // Fair share per user, as GET /v1/share has it: the page's share bars and `carma top`'s line.
    {
        const std::map<std::string, json> standing = share_rows(*counts);
        for (json& u : queue_users) {
            // A user the store counts as running whose attempt the loop has not yet taken up
            // has no row: no usage, no share yet.
            const auto row = standing.find(u["user"].get<std::string>());
            const bool found = row != standing.end();
            u["factor"] = found ? row->second["factor"] : json(1.0);
            for (const char* field : {"shares_norm", "usage_norm", "usage_gpu_hours"}) {
                u[field] = found ? row->second[field] : json(0.0);
            }
        }
    }
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
                              {"array", array_json(live.array)},
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
            // Foreign processes are shown on their own (g["foreign"]); other is what is left.
            g["other_mib"] = std::max<MiB>(0, g["used_mib"].get<MiB>() - attributed.value_or(0) -
                                                  g.value("foreign_mib", MiB{0}));
        } else {
            g["other_mib"] = nullptr;
        }
        g["risk"].erase("rule_text");
        for (const char* secretish : {"processes", "error", "uuid", "mig", "available_mib",
                                      "energy_j", "task_labels"}) {
            g.erase(secretish);
        }
    }

    json running = json::array();
    for (const auto& [id, live] : live_) {
        const store::TaskRow* row = by_id.contains(id) ? by_id[id] : nullptr;
        std::optional<MiB> memory;
        for (const auto& [gpu, mib] : live.held_now) {
            memory = memory.value_or(0) + mib;
        }
        running.push_back({{"id", id},
                           {"array", array_json(live.array)},
                           {"user", row ? row->user : std::string()},
                           {"name", row ? row->spec.name : std::string()},
                           {"gpus", live.gpus},
                           {"attempt", live.number},
                           {"started_at", live.started_unix},
                           {"run_s", std::max(0.0, unix_t - live.started_unix)},
                           {"memory_mib", json_or_null(memory)}});
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
                {"queue_total", waiting_total},
                {"queue_users", queue_users},
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
    // The GPUs' samples come with the first page, grouped by the store into at most `points`
    // per GPU; the tasks come a page at a time.
    const bool first_page = query.page.after == 0;
    const int points = std::clamp(query.points, api::kTimelinePointsMin, api::kTimelinePointsMax);
    std::vector<store::GpuSampleRow> samples;
    if (first_page) {
        auto bucketed = store_->gpu_sample_buckets(since, until, points);
        if (!bucketed) {
            return api::api_fail(500, bucketed.error().message);
        }
        samples = std::move(*bucketed);
    }
    auto tasks = store_->tasks_between(
        store::SpanQuery{since, until, query.ran, query.page.after, query.page.limit});
    if (!tasks) {
        return api::api_fail(500, tasks.error().message);
    }
    std::vector<device::GpuInfo> infos;
    if (first_page) {
        std::lock_guard lock(mu_);
        infos = backend_->gpus();
    }
    json gpus = json::array();
    for (const device::GpuInfo& g : infos) {
        gpus.push_back({{"index", g.index},
                        {"name", g.name},
                        {"total_mib", g.total_mib},
                        {"samples", timeline_samples_json(samples, g.index, since, until,
                                                          points)}});
    }
    json task_list = json::array();
    for (const store::FinishedTask& t : *tasks) {
        task_list.push_back(timeline_task_json(t));
    }
    return json{{"since", since},
                {"until", until},
                {"step_s", (until - since) / points},
                {"policy", config_.policy},
                {"backend", backend_name()},
                {"time_scale", config_.time_scale},
                {"gpus", gpus},
                {"tasks", task_list},
                {"next", is_last_page(tasks->size(), query.page)
                             ? json(nullptr)
                             : json(tasks->back().task.id)}};
}

}  // namespace carma::daemon
