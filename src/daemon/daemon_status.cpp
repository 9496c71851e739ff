// The daemon-wide reads: GET /v1/gpus (each GPU's samples, window, health, risk and tasks),
// GET /v1/events, GET /v1/status and the Prometheus text of /metrics.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/task_ref.h"
#include "daemon/daemon.h"
#include "daemon/daemon_api.h"

namespace carma::daemon {

nlohmann::json Daemon::gpu_health_json(std::size_t gpu) const {
    const GpuState& state = gpu_state_[gpu];
    std::string health = "ok";
    std::string reason;
    if (!state.excluded.empty()) {
        // A GPU the backend could not enumerate is broken, not merely left out by choice.
        health = backend_->gpus()[gpu].fault.empty() ? "excluded" : "unhealthy";
        reason = state.excluded;
    } else if (state.unhealthy) {
        health = "unhealthy";
        reason = state.last_error;
    } else if (state.missing > 0) {
        health = "stale";
        reason = "last read failed: " + state.last_error;
    } else if (!windows_[gpu].full()) {
        health = "filling";
        reason = schedulable_reason(gpu);
    }
    return {{"state", health}, {"reason", reason}};
}

api::ApiResult<nlohmann::json> Daemon::gpus(const api::Caller&) {
    std::lock_guard lock(mu_);
    return nlohmann::json{
        {"backend", backend_->name()}, {"gpus", gpus_json()}, {"host", host_json()}};
}

nlohmann::json Daemon::gpus_json() {
    nlohmann::json list = nlohmann::json::array();
    const double t = now();
    for (const device::GpuInfo& g : backend_->gpus()) {
        const auto idx = static_cast<std::size_t>(g.index);
        const WindowStats w = windows_[idx].stats();
        auto stat = [](const SeriesStats& s) {
            if (s.known == 0) {
                return nlohmann::json(nullptr);  // no sample in the window had it
            }
            return nlohmann::json{{"mean", s.mean}, {"median", s.median}, {"p95", s.p95},
                                  {"ema", s.ema},   {"risk", s.risk},    {"known", s.known}};
        };
        nlohmann::json gj = {{"index", g.index},
                             {"uuid", g.uuid},
                             {"name", g.name},
                             {"total_mib", g.total_mib},
                             {"mig", g.mig_enabled}};
        if (!g.node.empty()) {  // scheduling over nodes: which node, and its index there
            gj["node"] = g.node;
            gj["node_index"] = g.node_index;
        }
        // Unknown metrics are null, never 0.
        auto value = [](const std::optional<double>& v) {
            return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
        };
        bool has_processes = false;
        for (const device::GpuSample& s : last_samples_) {
            if (s.index == g.index) {
                gj["free_mib"] = s.free_mib;
                gj["used_mib"] = s.used_mib;
                gj["util"] = value(s.util);
                gj["smact"] = value(s.smact);
                gj["smocc"] = value(s.smocc);
                gj["drama"] = value(s.drama);
                gj["power_w"] = value(s.power_w);
                gj["energy_j"] = value(s.energy_j);
                gj["error"] = s.error;
                gj["sources"] = {{"memory", to_string(s.sources.memory)},
                                 {"util", to_string(s.sources.util)},
                                 {"smact", to_string(s.sources.smact)},
                                 {"smocc", to_string(s.sources.smocc)},
                                 {"drama", to_string(s.sources.drama)},
                                 {"power", to_string(s.sources.power)},
                                 {"energy", to_string(s.sources.energy)}};
                nlohmann::json procs = nlohmann::json::array();
                for (const device::GpuProcess& p : s.processes) {
                    procs.push_back({{"pid", p.pid}, {"used_mib", p.used_mib},
                                     {"mps_server", p.mps_server}});
                    has_processes = has_processes || !p.mps_server;
                }
                label_foreign(procs, gpu_state_[idx].foreign);
                gj["processes"] = procs;
            }
        }
        gj["foreign"] = foreign_json(gpu_state_[idx].foreign);
        gj["foreign_mib"] = foreign_mib(gpu_state_[idx].foreign);
        gj["emulated"] = g.emulated;
        gj["health"] = gpu_health_json(idx);
        gj["available_mib"] = w.available_mib;
        gj["window"] = {{"samples", w.samples},
                        {"capacity", windows_[idx].capacity()},
                        {"smact", stat(w.smact)},
                        {"smocc", stat(w.smocc)},
                        {"drama", stat(w.drama)},
                        {"util", stat(w.util)}};
        const bool high = is_high_risk(w, config_.risk, has_processes);
        gj["risk"] = {{"high", high},
                      {"rule", to_string(risk_rule(w))},
                      {"rule_text", describe_rule(w, config_.risk)},
                      {"reason", high ? describe_risk(w, config_.risk) : std::string()}};
        gj["locked"] = scheduler_.warmup().locked(g.index, t);
        nlohmann::json tasks = nlohmann::json::array();
        nlohmann::json labels = nlohmann::json::array();
        int share_milli = 0;
        for (const auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), g.index) != live.gpus.end()) {
                tasks.push_back(id);
                labels.push_back(format_task_id(id, live.array));
                share_milli += live.gpu_milli;
            }
        }
        gj["tasks"] = tasks;
        gj["task_labels"] = labels;
        // What its --gpu-share tasks reserve of it (core/gpu_share.h); null: none runs there.
        gj["share_reserved"] =
            share_milli > 0 ? nlohmann::json(share_milli / 1000.0) : nlohmann::json(nullptr);
        list.push_back(gj);
    }
    return list;
}

api::ApiResult<nlohmann::json> Daemon::events(const api::Caller&, std::int64_t after,
                                              std::int64_t task, int limit) {
    auto rows = store_->events(after, task, std::clamp(limit, 1, 10000));
    if (!rows) {
        return tl::unexpected(store_error(rows.error()));
    }
    nlohmann::json list = nlohmann::json::array();
    for (const store::EventRow& e : *rows) {
        list.push_back({{"id", e.id},
                        {"time", e.time},
                        // Daemon-level events belong to no task.
                        {"task", e.task == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.task)},
                        {"kind", e.kind},
                        {"message", e.message}});
    }
    return nlohmann::json{{"events", list}};
}

nlohmann::json Daemon::host_json() const {
    nlohmann::json fences = {{"mode", std::string(exec::to_string(fences_.mode))},
                             {"root", fences_.enabled() ? nlohmann::json(fences_.root)
                                                        : nlohmann::json(nullptr)},
                             {"text", fences_.describe()}};
    if (!host_) {
        return {{"fences", fences}};  // across nodes: the agents' hosts are not counted yet
    }
    const HostView v = host_views().front();
    return {{"fences", fences},
            {"cpus_total", v.cpus_total},
            {"cpus_free", v.cpus_free},
            {"reserved_cores", host_->reserved_cores},
            {"memory_total_mib", v.mem_total_mib},
            {"memory_free_mib", v.mem_free_mib}};
}

api::ApiResult<nlohmann::json> Daemon::status(const api::Caller&) {
    std::lock_guard lock(mu_);
    return nlohmann::json{{"version", "0.1.0"},
                          {"policy", config_.policy},
                          {"backend", backend_->name()},
                          {"time_scale", config_.time_scale},
                          {"queued", scheduler_.main_queue().size()},
                          {"recovering", scheduler_.recovery_queue().size()},
                          {"running", live_.size() + launching_.size()},
                          {"pending_reason", pending_reason_},
                          {"host", host_json()},
                          {"loop",
                           {{"period_s", loop_lag_.period_s()},
                            {"periods", loop_lag_.periods()},
                            {"late_periods", loop_lag_.late()},
                            {"recent_late_share", loop_lag_.recent_late_share()},
                            {"worst_late_periods", loop_lag_.worst_late_periods()},
                            {"behind", loop_lag_.behind()}}}};
}

namespace {

// Prometheus' text format for a number: integers as integers, +Inf spelled as it wants.
std::string prometheus_number(double v) {
    if (std::isinf(v)) {
        return v > 0 ? "+Inf" : "-Inf";
    }
    return fmt::format("{}", v);
}

void add_help(std::string& out, std::string_view name, std::string_view type,
              std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void add_histogram(std::string& out, std::string_view name, std::string_view help,
                   const Histogram& h) {
    add_help(out, name, "histogram", help);
    const std::vector<std::uint64_t> counts = h.cumulative();
    for (std::size_t i = 0; i < counts.size(); ++i) {
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, prometheus_number(h.bounds()[i]),
                           counts[i]);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, h.count());
    out += fmt::format("{}_sum {}\n{}_count {}\n", name, prometheus_number(h.sum()), name,
                       h.count());
}

// A label value as the format requires: backslash, double quote and newline escaped.
std::string label_value(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace

std::string Daemon::metrics() {
    // Counted by the store, not by reading every task: /metrics is scraped every few seconds.
    std::map<store::TaskState, std::size_t> by_state;
    if (auto counts = store_->state_counts(); counts) {
        for (const auto& [state, n] : *counts) {
            by_state[state] = n;
        }
    }
    std::lock_guard lock(mu_);
    std::string out;
    // Every state, so the series add up to every task the daemon holds.
    add_help(out, "carma_tasks", "gauge", "Tasks known to the daemon by state.");
    for (store::TaskState s : store::all_task_states()) {
        out += fmt::format("carma_tasks{{state=\"{}\"}} {}\n", store::to_string(s), by_state[s]);
    }
    add_help(out, "carma_queue_length", "gauge",
             "Tasks waiting in the scheduler's queues (main; recovery: relaunches after "
             "out-of-memory), held and blocked tasks not included.");
    out += fmt::format("carma_queue_length{{queue=\"main\"}} {}\n",
                       scheduler_.main_queue().size());
    out += fmt::format("carma_queue_length{{queue=\"recovery\"}} {}\n",
                       scheduler_.recovery_queue().size());
    add_help(out, "carma_oom_crashes_total", "counter",
             "Attempts that ended out of GPU memory since start.");
    out += fmt::format("carma_oom_crashes_total {}\n", oom_total_);
    add_help(out, "carma_gpu_oom_crashes_total", "counter",
             "Attempts that ended out of GPU memory since start, by GPU they ran on.");
    for (const auto& [gpu, n] : oom_by_gpu_) {
        out += fmt::format("carma_gpu_oom_crashes_total{{gpu=\"{}\"}} {}\n", gpu, n);
    }
    add_help(out, "carma_attempts_total", "counter", "Attempts started since start.");
    out += fmt::format("carma_attempts_total {}\n", attempts_total_);
    add_histogram(out, "carma_task_wait_seconds",
                  "Time from a task's submission to its first attempt's start, for tasks "
                  "started since the daemon started.",
                  wait_seconds_);
    add_histogram(out, "carma_attempt_run_seconds",
                  "Time from an attempt's start to its end, for attempts ended since the daemon "
                  "started, whatever their outcome.",
                  run_seconds_);
    std::map<std::string, std::size_t> gpus_by_user;
    for (const auto& [id, live] : live_) {
        gpus_by_user[live.user] += live.gpus.size();
    }
    add_help(out, "carma_user_running_gpus", "gauge",
             "GPUs held by each user's running attempts (a shared GPU counts for each).");
    for (const auto& [user, n] : gpus_by_user) {
        out += fmt::format("carma_user_running_gpus{{user=\"{}\"}} {}\n", label_value(user), n);
    }
    // An unknown value is left out rather than exported as 0.
    auto gauge = [&](const char* name, const char* help, auto value) {
        add_help(out, name, "gauge", help);
        for (const device::GpuSample& s : last_samples_) {
            if (const std::optional<double> v = value(s)) {
                out += fmt::format("{}{{gpu=\"{}\"}} {}\n", name, s.index, prometheus_number(*v));
            }
        }
    };
    gauge("carma_gpu_memory_used_bytes", "GPU memory in use.",
          [](const device::GpuSample& s) {
              return std::optional<double>(static_cast<double>(s.used_mib) * 1048576.0);
          });
    gauge("carma_gpu_smact", "SM active ratio (last sample).",
          [](const device::GpuSample& s) { return s.smact; });
    gauge("carma_gpu_smocc", "SM occupancy (last sample).",
          [](const device::GpuSample& s) { return s.smocc; });
    gauge("carma_gpu_drama", "DRAM active ratio (last sample).",
          [](const device::GpuSample& s) { return s.drama; });
    gauge("carma_gpu_power_watts", "Board power (last sample).",
          [](const device::GpuSample& s) { return s.power_w; });
    add_help(out, "carma_gpu_energy_joules_total", "counter",
             "Energy since the backend started counting.");
    for (const device::GpuSample& s : last_samples_) {
        if (s.energy_j) {
            out += fmt::format("carma_gpu_energy_joules_total{{gpu=\"{}\"}} {}\n", s.index,
                               prometheus_number(*s.energy_j));
        }
    }
    return out;
}

}  // namespace carma::daemon
