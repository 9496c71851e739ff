#include "cli/views/timeline_record.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/metric_window.h"

namespace carma::cli {

namespace {

using nlohmann::json;

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// Reads fields by their path and keeps the first problem, so the conversion reads straight
// through and checks once per part. After a problem every read returns an empty value.
class Reader {
  public:
    bool ok() const { return !error_; }
    Error error() const { return *error_; }

    // A required number (not null).
    double number(const json& object, const char* key, const std::string& at) {
        const json* v = present(object, key, at);
        if (v == nullptr) {
            return 0;
        }
        if (!v->is_number()) {
            wrong(at, key, *v, "a number");
            return 0;
        }
        return v->get<double>();
    }

    // A number that may be null or absent (unknown, or not yet).
    std::optional<double> maybe_number(const json& object, const char* key, const std::string& at) {
        const json* v = optional(object, key);
        if (v == nullptr) {
            return std::nullopt;
        }
        if (!v->is_number()) {
            wrong(at, key, *v, "a number or null");
            return std::nullopt;
        }
        return v->get<double>();
    }

    std::int64_t integer(const json& object, const char* key, const std::string& at) {
        const json* v = present(object, key, at);
        if (v == nullptr) {
            return 0;
        }
        if (!v->is_number_integer()) {
            wrong(at, key, *v, "a whole number");
            return 0;
        }
        return v->get<std::int64_t>();
    }

    std::string text(const json& object, const char* key, const std::string& at) {
        const json* v = present(object, key, at);
        if (v == nullptr) {
            return "";
        }
        if (!v->is_string()) {
            wrong(at, key, *v, "a string");
            return "";
        }
        return v->get<std::string>();
    }

    // A string that may be null or absent (a description the page can do without).
    std::string maybe_text(const json& object, const char* key, const std::string& at) {
        const json* v = optional(object, key);
        if (v == nullptr) {
            return "";
        }
        if (!v->is_string()) {
            wrong(at, key, *v, "a string or null");
            return "";
        }
        return v->get<std::string>();
    }

    const json& array(const json& object, const char* key, const std::string& at) {
        static const json kEmpty = json::array();
        const json* v = present(object, key, at);
        if (v == nullptr) {
            return kEmpty;
        }
        if (!v->is_array()) {
            wrong(at, key, *v, "an array");
            return kEmpty;
        }
        return *v;
    }

    // An element of an array that must be an object.
    bool object(const json& value, const std::string& path) {
        if (ok() && !value.is_object()) {
            fail_at(path, fmt::format("should be an object, not {}", excerpt(value)));
        }
        return ok();
    }

    void fail_at(const std::string& path, const std::string& what) {
        if (!error_) {
            error_ = Error{ErrorCode::InvalidArgument,
                           fmt::format("the daemon's answer to GET /v1/timeline is not what this "
                                       "carma reads: {} {}; are the daemon and carma the same "
                                       "version?",
                                       path.empty() ? "the answer" : path, what)};
        }
    }

  private:
    static std::string join(const std::string& at, const char* key) {
        return at.empty() ? std::string(key) : at + "." + key;
    }

    static std::string excerpt(const json& value) {
        std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
        return text.size() > 40 ? text.substr(0, 37) + "..." : text;
    }

    const json* optional(const json& object, const char* key) {
        if (!ok() || !object.is_object()) {
            return nullptr;
        }
        const auto it = object.find(key);
        return it == object.end() || it->is_null() ? nullptr : &*it;
    }

    const json* present(const json& object, const char* key, const std::string& at) {
        if (!ok()) {
            return nullptr;
        }
        if (!object.is_object()) {
            fail_at(at, fmt::format("should be an object, not {}", excerpt(object)));
            return nullptr;
        }
        const auto it = object.find(key);
        if (it == object.end() || it->is_null()) {
            fail_at(join(at, key), it == object.end() ? "is missing" : "is null");
            return nullptr;
        }
        return &*it;
    }

    void wrong(const std::string& at, const char* key, const json& v, const char* expected) {
        fail_at(join(at, key), fmt::format("should be {}, not {}", expected, excerpt(v)));
    }

    std::optional<Error> error_;
};

std::string item(const std::string& at, const char* key, std::size_t i) {
    return fmt::format("{}{}{}[{}]", at, at.empty() ? "" : ".", key, i);
}

double or_unknown(std::optional<double> v) {
    return v ? *v : kUnknown;
}

struct GpuRead {
    sim::GpuTimeline timeline;
    sim::GpuSummary summary;
    std::string name;
    double smact_s = 0, smact_span = 0, smocc_s = 0, smocc_span = 0, mem_s = 0, mem_span = 0;
};

// Each sample holds until the next one, at most one step of the answer: a gap in the stored
// samples (the daemon was down) stays a gap in the means and the energy.
void read_gpu(Reader& r, const json& g, const std::string& at, double since, double until,
              double step_s, GpuRead& out) {
    out.timeline.gpu = static_cast<int>(r.integer(g, "index", at));
    out.summary.gpu = out.timeline.gpu;
    out.name = r.maybe_text(g, "name", at);
    const std::optional<double> total = r.maybe_number(g, "total_mib", at);
    const json& samples = r.array(g, "samples", at);
    for (std::size_t k = 0; k < samples.size() && r.ok(); ++k) {
        const std::string path = item(at, "samples", k);
        const json& s = samples[k];
        if (!r.object(s, path)) {
            break;
        }
        sim::TimelinePoint p;
        p.t_s = r.number(s, "t", path) - since;
        const std::optional<double> used = r.maybe_number(s, "used_mib", path);
        p.smact = or_unknown(r.maybe_number(s, "smact", path));
        p.smocc = or_unknown(r.maybe_number(s, "smocc", path));
        p.power_w = or_unknown(r.maybe_number(s, "power_w", path));
        p.memory_used_frac = used && total && *total > 0 ? *used / *total : kUnknown;
        out.timeline.points.push_back(p);
    }
    auto& points = out.timeline.points;
    std::stable_sort(points.begin(), points.end(),
                     [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
    const double end = until - since;
    for (std::size_t k = 0; k < points.size(); ++k) {
        const double next = k + 1 < points.size() ? points[k + 1].t_s : end;
        double hold = std::max(0.0, std::min(next, end) - std::max(points[k].t_s, 0.0));
        if (step_s > 0) {
            hold = std::min(hold, step_s);
        }
        const auto& p = points[k];
        if (std::isfinite(p.smact)) {
            out.smact_s += p.smact * hold;
            out.smact_span += hold;
        }
        if (std::isfinite(p.smocc)) {
            out.smocc_s += p.smocc * hold;
            out.smocc_span += hold;
        }
        if (std::isfinite(p.memory_used_frac)) {
            out.mem_s += p.memory_used_frac * hold;
            out.mem_span += hold;
        }
        if (std::isfinite(p.power_w)) {
            out.summary.energy_j += p.power_w * hold;
        }
    }
    const auto mean = [](double sum, double span) { return span > 0 ? sum / span : 0.0; };
    out.summary.mean_smact = mean(out.smact_s, out.smact_span);
    out.summary.mean_smocc = mean(out.smocc_s, out.smocc_span);
    out.summary.mean_memory_used_frac = mean(out.mem_s, out.mem_span);
}

std::vector<int> read_gpu_list(Reader& r, const json& a, const std::string& at) {
    std::vector<int> gpus;
    const json& list = r.array(a, "gpus", at);
    for (std::size_t i = 0; i < list.size() && r.ok(); ++i) {
        if (!list[i].is_number_integer()) {
            r.fail_at(item(at, "gpus", i), "should be a GPU index");
            break;
        }
        gpus.push_back(list[i].get<int>());
    }
    return gpus;
}

sim::TaskRecord read_task(Reader& r, const json& t, const std::string& at, double since,
                          double until) {
    sim::TaskRecord task;
    task.id = r.integer(t, "id", at);
    task.name = r.text(t, "name", at);
    task.user = r.maybe_text(t, "user", at);
    task.gpus = static_cast<int>(r.integer(t, "gpus", at));
    task.state = r.text(t, "state", at);
    task.submit_s = r.number(t, "submitted_at", at) - since;
    const std::optional<double> started = r.maybe_number(t, "started_at", at);
    const std::optional<double> finished = r.maybe_number(t, "finished_at", at);
    const json& attempts = r.array(t, "attempts", at);
    for (std::size_t k = 0; k < attempts.size() && r.ok(); ++k) {
        const std::string path = item(at, "attempts", k);
        const json& a = attempts[k];
        if (!r.object(a, path)) {
            break;
        }
        const std::optional<double> start = r.maybe_number(a, "started_at", path);
        const std::optional<double> end = r.maybe_number(a, "ended_at", path);
        const std::string outcome_text = r.text(a, "outcome", path);
        std::vector<int> gpus = read_gpu_list(r, a, path);
        const auto outcome = sim::parse_attempt_outcome(outcome_text);
        if (r.ok() && !outcome) {
            std::string known;
            for (sim::AttemptOutcome o : sim::kAttemptOutcomes) {
                known += fmt::format("{}{}", known.empty() ? "" : ", ", to_string(o));
            }
            r.fail_at(path + ".outcome",
                      fmt::format("is '{}', not one of {}", outcome_text, known));
        }
        if (!r.ok() || !start) {
            continue;  // an attempt not launched yet has nothing to draw
        }
        task.spans.push_back(
            sim::AttemptSpan{*start - since, end ? *end - since : -1, std::move(gpus), *outcome});
    }
    if (!r.ok()) {
        return task;
    }
    task.attempts = static_cast<int>(task.spans.size());
    task.rejected = task.state == "rejected";
    if (finished) {
        (task.state == "succeeded" ? task.finish_s : task.left_s) = *finished - since;
    }
    if (!task.spans.empty()) {
        task.gpu_ids = task.spans.back().gpus;
    }
    task.first_start_s = started              ? *started - since
                         : task.spans.empty() ? -1
                                              : task.spans.front().start_s;
    // The wait: what lies outside the attempts, up to the end of the window when still waiting.
    double queued = task.submit_s;
    for (const sim::AttemptSpan& s : task.spans) {
        task.oom_crashes += s.outcome == sim::AttemptOutcome::OutOfMemory ? 1 : 0;
        task.wait_s += std::max(0.0, s.start_s - queued);
        queued = s.end_s;
    }
    // After its last attempt (or from its submission) a task that did not complete waits until
    // it left, or still waits at the end of the window.
    const bool waits_after =
        task.finish_s < 0 &&
        (task.spans.empty() || (task.spans.back().outcome != sim::AttemptOutcome::Running &&
                                task.spans.back().end_s >= 0));
    if (waits_after) {
        const double left = task.left_s >= 0 ? task.left_s : until - since;
        task.wait_s += std::max(0.0, left - queued);
    }
    return task;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) {
        s += x;
    }
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

double p95(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return quantile_sorted(v, 0.95);
}

std::string gpu_text(const std::vector<GpuRead>& gpus) {
    if (gpus.empty()) {
        return "no GPUs";
    }
    const bool same = std::all_of(gpus.begin(), gpus.end(),
                                  [&](const GpuRead& g) { return g.name == gpus[0].name; });
    if (same) {
        return fmt::format("{}x{}", gpus.size(), gpus[0].name.empty() ? "GPU" : gpus[0].name);
    }
    std::string out;
    for (const GpuRead& g : gpus) {
        out += fmt::format("{}{}", out.empty() ? "" : ", ", g.name.empty() ? "GPU" : g.name);
    }
    return out;
}

}  // namespace

Result<sim::Comparison> comparison_from_timeline(const json& answer) {
    Reader r;
    if (!answer.is_object()) {
        r.fail_at("", "should be a JSON object");
        return tl::unexpected(r.error());
    }
    const double since = r.number(answer, "since", "");
    const double until = r.number(answer, "until", "");
    const double step_s = r.maybe_number(answer, "step_s", "").value_or(0);
    sim::Comparison c;
    c.kind = sim::RecordKind::DaemonHistory;
    sim::PolicyResult result;
    result.policy = r.maybe_text(answer, "policy", "");
    c.backend = r.maybe_text(answer, "backend", "");
    if (r.ok() && !(until > since)) {
        r.fail_at("until", fmt::format("({}) is not after since ({})", until, since));
    }
    if (!r.ok()) {
        return tl::unexpected(r.error());
    }
    c.origin_unix_s = since;
    c.span_s = until - since;

    std::vector<GpuRead> gpus;
    const json& gpu_list = r.array(answer, "gpus", "");
    for (std::size_t i = 0; i < gpu_list.size() && r.ok(); ++i) {
        const std::string at = item("", "gpus", i);
        if (!r.object(gpu_list[i], at)) {
            break;
        }
        GpuRead g;
        read_gpu(r, gpu_list[i], at, since, until, step_s, g);
        gpus.push_back(std::move(g));
    }
    const json& task_list = r.array(answer, "tasks", "");
    for (std::size_t i = 0; i < task_list.size() && r.ok(); ++i) {
        const std::string at = item("", "tasks", i);
        if (!r.object(task_list[i], at)) {
            break;
        }
        result.tasks.push_back(read_task(r, task_list[i], at, since, until));
    }
    if (!r.ok()) {
        return tl::unexpected(r.error());
    }

    // The summary over the window, as the simulator sums a run.
    std::vector<double> jct, wait;
    double first_start = std::numeric_limits<double>::infinity();
    double last_completion = 0;
    for (const sim::TaskRecord& t : result.tasks) {
        result.attempts += t.attempts;
        result.oom_crashes += t.oom_crashes;
        result.tasks_rejected += t.rejected ? 1 : 0;
        for (const sim::AttemptSpan& s : t.spans) {
            first_start = std::min(first_start, std::max(0.0, s.start_s));
        }
        if (t.finish_s >= 0) {
            ++result.tasks_completed;
            jct.push_back(t.finish_s - t.submit_s);
            wait.push_back(t.wait_s);
            result.max_wait_s = std::max(result.max_wait_s, t.wait_s);
            last_completion = std::max(last_completion, std::min(t.finish_s, c.span_s));
        }
    }
    result.makespan_s = std::isfinite(first_start) && last_completion > first_start
                            ? last_completion - first_start
                            : 0;
    result.mean_jct_s = mean(jct);
    result.p95_jct_s = p95(jct);
    result.mean_wait_s = mean(wait);
    result.p95_wait_s = p95(wait);
    // Means over the GPUs that reported the metric at all.
    int n_smact = 0, n_smocc = 0, n_mem = 0;
    for (GpuRead& g : gpus) {
        result.energy_j += g.summary.energy_j;
        n_smact += g.smact_span > 0 ? 1 : 0;
        n_smocc += g.smocc_span > 0 ? 1 : 0;
        n_mem += g.mem_span > 0 ? 1 : 0;
        result.mean_smact += g.summary.mean_smact;
        result.mean_smocc += g.summary.mean_smocc;
        result.mean_memory_used_frac += g.summary.mean_memory_used_frac;
        result.per_gpu.push_back(g.summary);
        result.timelines.push_back(std::move(g.timeline));
    }
    result.mean_smact /= std::max(1, n_smact);
    result.mean_smocc /= std::max(1, n_smocc);
    result.mean_memory_used_frac /= std::max(1, n_mem);
    c.gpus = gpu_text(gpus);
    c.results.push_back(std::move(result));
    return c;
}

std::optional<double> first_recorded(const json& answer) {
    if (!answer.is_object() || !answer.contains("since") || !answer["since"].is_number()) {
        return std::nullopt;
    }
    const double since = answer["since"].get<double>();
    std::optional<double> first;
    auto consider = [&](const json& holder, const char* key) {
        if (holder.is_object() && holder.contains(key) && holder[key].is_number()) {
            const double t = std::max(since, holder[key].get<double>());
            first = first ? std::min(*first, t) : t;
        }
    };
    auto list = [](const json& holder, const char* key) -> const json& {
        static const json empty = json::array();
        return holder.is_object() && holder.contains(key) && holder[key].is_array() ? holder[key]
                                                                                    : empty;
    };
    for (const json& g : list(answer, "gpus")) {
        for (const json& s : list(g, "samples")) {
            consider(s, "t");
        }
    }
    for (const json& t : list(answer, "tasks")) {
        consider(t, "submitted_at");
        for (const json& a : list(t, "attempts")) {
            consider(a, "started_at");
        }
    }
    return first;
}

}  // namespace carma::cli
