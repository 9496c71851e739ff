#include "sim/report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "sim/output.h"

namespace carma::sim {

namespace {

constexpr std::string_view kExclusivePolicy = "exclusive";

// ---------------------------------------------------------------------------------------------
// Summary table and CSV: one column list drives both so they cannot disagree, in the order,
// units and number formats of `carma simulate`'s text table (sim/output.cpp, format_table).

struct Column {
    std::string_view header;  // "{}" in it: the time unit of the page
    std::string_view csv_name;
    int decimals;
    bool change_vs_exclusive;  // followed by a "vs exclusive" column, as in the text table
    double (*value)(const PolicyResult&);
    bool is_time = false;      // `value` in seconds: shown in the page's unit, in hours in the CSV

    double shown(const PolicyResult& r, const DurationUnit& unit) const {
        return is_time ? value(r) / unit.seconds : value(r);
    }
    double in_csv(const PolicyResult& r) const { return is_time ? value(r) / 3600.0 : value(r); }
};

const std::array<Column, 13> kColumns = {{
    {"Makespan ({})", "makespan_h", 2, true, [](const PolicyResult& r) { return r.makespan_s; },
     true},
    {"Energy (MJ)", "energy_mj", 2, true, [](const PolicyResult& r) { return r.energy_j / 1e6; }},
    {"Mean JCT ({})", "mean_jct_h", 2, false, [](const PolicyResult& r) { return r.mean_jct_s; },
     true},
    {"p95 JCT ({})", "p95_jct_h", 2, false, [](const PolicyResult& r) { return r.p95_jct_s; },
     true},
    {"Mean wait ({})", "mean_wait_h", 2, false,
     [](const PolicyResult& r) { return r.mean_wait_s; }, true},
    {"OOM", "oom_crashes", 0, false,
     [](const PolicyResult& r) { return static_cast<double>(r.oom_crashes); }},
    {"Attempts", "attempts", 0, false,
     [](const PolicyResult& r) { return static_cast<double>(r.attempts); }},
    {"SMACT", "mean_smact", 3, false, [](const PolicyResult& r) { return r.mean_smact; }},
    {"SMOCC", "mean_smocc", 3, false, [](const PolicyResult& r) { return r.mean_smocc; }},
    {"Mem", "mean_memory_used_frac", 3, false,
     [](const PolicyResult& r) { return r.mean_memory_used_frac; }},
    {"Completed", "tasks_completed", 0, false,
     [](const PolicyResult& r) { return static_cast<double>(r.tasks_completed); }},
    {"Rejected", "tasks_rejected", 0, false,
     [](const PolicyResult& r) { return static_cast<double>(r.tasks_rejected); }},
    {"Tasks", "tasks", 0, false,
     [](const PolicyResult& r) { return static_cast<double>(r.tasks.size()); }},
}};

std::string format_fixed(double v, int decimals) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "n/a";
}

// Makespan and energy: lower is better, so a negative change is green.
std::string change_cell(const Column& col, const PolicyResult& r, const PolicyResult* exclusive) {
    const double base = col.value(*exclusive);
    const double v = col.value(r);
    const std::string text = format_change(v, base);
    // Within half a permille reads as "no change": the text shows +0.0% or -0.0%.
    const bool same = !(base > 0) || std::abs(v - base) < 0.0005 * base;
    const char* cls = same ? "" : v < base ? "better" : "worse";
    return fmt::format("<td class=\"{}\">{}</td>", cls, text);
}

std::string summary_table(const Comparison& c, const DurationUnit& unit) {
    const PolicyResult* exclusive = find_exclusive(c);
    std::string out = "<div class=\"table-wrap\"><table class=\"summary\">";
    out += fmt::format(
        "<caption>Times in {}, energy in MJ of all GPUs over the {}; JCT (job completion time) "
        "and wait over the completed tasks; SMACT, SMOCC and Mem are time-weighted means, 0 to 1",
        unit.word, c.kind == RecordKind::DaemonHistory ? "window" : "makespan");
    if (exclusive != nullptr) {
        out +=
            "; \u201cvs excl\u201d is the change relative to <b>exclusive</b> "
            "(<span class=\"better\">green</span> is better, "
            "<span class=\"worse\">red</span> is worse)";
    }
    out += ".</caption><thead><tr><th>Policy</th>";
    for (const auto& col : kColumns) {
        out += fmt::format("<th>{}</th>", fmt::format(fmt::runtime(col.header), unit.symbol));
        if (col.change_vs_exclusive && exclusive != nullptr) {
            out += "<th>vs excl</th>";
        }
    }
    out += "</tr></thead><tbody>";
    for (const auto& r : c.results) {
        out += fmt::format("<tr{}><td>{}</td>", &r == exclusive ? " class=\"baseline\"" : "",
                           html_escape(r.policy));
        for (const auto& col : kColumns) {
            out += "<td>" + format_fixed(col.shown(r, unit), col.decimals) + "</td>";
            if (col.change_vs_exclusive && exclusive != nullptr) {
                out += change_cell(col, r, exclusive);
            }
        }
        out += "</tr>";
    }
    return out + "</tbody></table></div>";
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) {
        return s;
    }
    std::string quoted = "\"";
    for (char ch : s) {
        quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    }
    return quoted + "\"";
}

std::string csv_number(double v, int decimals) {
    if (!std::isfinite(v)) {
        return "";
    }
    // Integers stay integers; other figures keep more precision than the table for re-analysis.
    return decimals == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.6g}", v);
}

// ---------------------------------------------------------------------------------------------
// Times

std::string utc_text(double unix_s) {
    const auto t = static_cast<std::time_t>(std::floor(unix_s));
    std::tm tm{};
    if (!std::isfinite(unix_s) || ::gmtime_r(&t, &tm) == nullptr) {
        return "?";
    }
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
    return std::string(buf) + " UTC";
}

TimeAxis page_axis(const Comparison& c) {
    TimeAxis axis = shared_time_axis(c);
    if (c.kind == RecordKind::DaemonHistory) {
        axis.label = fmt::format("{} since {}", axis.unit.word, utc_text(c.origin_unix_s + axis.t0_s));
    }
    return axis;
}

// A time of the record on the page's axis, in its unit; "-" for "never".
std::string time_cell(double t_s, const TimeAxis& axis) {
    return t_s < 0 || !std::isfinite(t_s)
               ? "-"
               : fmt::format("{:.2f}", (t_s - axis.t0_s) / axis.unit.seconds);
}

std::string task_state(const TaskRecord& t) {
    if (!t.state.empty()) {
        return t.state;
    }
    return t.rejected ? "rejected" : t.finish_s >= 0 ? "completed" : "not completed";
}

// ---------------------------------------------------------------------------------------------
// Page

constexpr std::string_view kCss = R"(
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1200px; margin: 1.5rem auto; padding: 0 1rem; line-height: 1.45; }
.kicker { color: #777; text-transform: uppercase; font-size: .75rem; letter-spacing: .08em;
          margin: 0; }
h1 { font-size: 1.6rem; margin: .2rem 0 .3rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .4rem; border-bottom: 1px solid #ddd;
     padding-bottom: .2rem; }
.meta { color: #555; margin: .2rem 0 1rem; }
.meta b { color: #222; }
nav { line-height: 1.9; }
nav a { margin-right: .8rem; white-space: nowrap; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: .9rem; }
caption { caption-side: bottom; text-align: left; color: #666; font-size: .8rem;
          padding-top: .4rem; }
th, td { padding: .3rem .4rem; border-bottom: 1px solid #e5e5e5; text-align: right;
         vertical-align: top; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f4f4f4; font-weight: 600; white-space: normal; vertical-align: bottom; }
tbody tr:nth-child(even) { background: #fafafa; }
tr.baseline td:first-child { font-weight: 600; }
td.better { color: #2a7d2a; }
td.worse { color: #b3261e; }
.better { color: #2a7d2a; }
.worse { color: #b3261e; }
figure.chart { margin: .6rem 0 1.4rem; overflow-x: auto; }
/* On a phone a chart keeps 760 px (9 px text) and scrolls sideways rather than shrinking. */
figure.chart svg { display: block; width: 100%; height: auto; min-width: 760px; }
details { margin: .4rem 0 1rem; }
summary { cursor: pointer; color: #444; }
.empty { color: #777; font-style: italic; }
footer { margin-top: 3rem; color: #777; font-size: .8rem; }
)";

std::string or_unknown(const std::string& s) {
    return s.empty() ? "unknown" : s;
}

std::string figure(const std::string& svg) {
    return "<figure class=\"chart\">" + svg + "</figure>\n";
}

std::string page_header(const Comparison& c, const TimeAxis& axis) {
    const std::string gpus = html_escape(or_unknown(c.gpus));
    std::string out =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
    if (c.kind == RecordKind::DaemonHistory) {
        const std::string policy =
            html_escape(or_unknown(c.results.empty() ? std::string() : c.results[0].policy));
        const std::string from = utc_text(c.origin_unix_s + axis.t0_s);
        const std::string to = utc_text(c.origin_unix_s + axis.t1_s);
        std::size_t tasks = 0;
        for (const auto& r : c.results) {
            tasks += r.tasks.size();
        }
        out += fmt::format(
            "<title>CARMA daemon report: {0} to {1}</title><style>{2}</style></head><body>\n"
            "<header><p class=\"kicker\">CARMA daemon report</p>"
            "<h1>{3} on {4}, {0} to {1}</h1>"
            "<p class=\"meta\">Policy <b>{3}</b> \u00b7 GPUs <b>{4}</b> \u00b7 backend <b>{5}</b> "
            "\u00b7 <b>{6}</b> {7} waiting or running in the window</p>",
            from, to, kCss, policy, gpus, html_escape(or_unknown(c.backend)), tasks,
            tasks == 1 ? "task" : "tasks");
    } else {
        const std::string trace = html_escape(or_unknown(c.trace));
        const std::string sharing = html_escape(or_unknown(c.sharing));
        out += fmt::format(
            "<title>CARMA simulation: {0} on {1} ({2})</title><style>{3}</style></head><body>\n"
            "<header><p class=\"kicker\">CARMA simulation report</p>"
            "<h1>{0} on {1}, {2} sharing</h1>"
            "<p class=\"meta\">Trace <b>{0}</b> \u00b7 GPUs <b>{1}</b> \u00b7 sharing mode "
            "<b>{2}</b>{4} \u00b7 {5} {6}</p>",
            trace, gpus, sharing, kCss,
            c.history.empty() ? std::string()
                              : " \u00b7 history <b>" + html_escape(c.history) + "</b>",
            c.results.size(), c.results.size() == 1 ? "policy" : "policies");
    }
    if (c.results.size() > 1) {
        out += "<nav>Policies: ";
        for (std::size_t i = 0; i < c.results.size(); ++i) {
            out +=
                fmt::format("<a href=\"#policy-{}\">{}</a>", i, html_escape(c.results[i].policy));
        }
        out += "</nav>";
    }
    return out + "</header>\n";
}

std::string comparison_charts(const Comparison& c, const DurationUnit& unit) {
    std::string out;
    if (c.results.size() > 1) {
        const PolicyResult* exclusive = find_exclusive(c);
        std::vector<std::pair<std::string, double>> makespan;
        std::vector<std::pair<std::string, double>> energy;
        for (const auto& r : c.results) {
            makespan.emplace_back(r.policy, r.makespan_s / unit.seconds);
            energy.emplace_back(r.policy, r.energy_j / 1e6);
        }
        std::optional<double> makespan_ref;
        std::optional<double> energy_ref;
        if (exclusive != nullptr) {
            makespan_ref = exclusive->makespan_s / unit.seconds;
            energy_ref = exclusive->energy_j / 1e6;
        }
        out += figure(
            svg_bar_chart("Makespan", makespan, std::string(unit.symbol), makespan_ref,
                          std::string(kExclusivePolicy)));
        out += figure(
            svg_bar_chart("Energy", energy, "MJ", energy_ref, std::string(kExclusivePolicy)));
    }
    std::vector<CdfSeries> waits;
    std::vector<CdfSeries> jcts;
    for (const auto& r : c.results) {
        CdfSeries wait{r.policy, {}};
        CdfSeries jct{r.policy, {}};
        for (const TaskRecord& t : r.tasks) {
            if (t.finish_s >= 0) {
                wait.values.push_back(t.wait_s / unit.seconds);
                jct.values.push_back((t.finish_s - t.submit_s) / unit.seconds);
            }
        }
        waits.push_back(std::move(wait));
        jcts.push_back(std::move(jct));
    }
    out += figure(svg_cdf("Wait time of the completed tasks (CDF)", waits,
                          fmt::format("wait ({})", unit.symbol)));
    out += figure(svg_cdf("Job completion time of the completed tasks (CDF)", jcts,
                          fmt::format("JCT: completion \u2212 submission ({})", unit.symbol)));
    return out;
}

std::string tasks_table(const PolicyResult& r, const TimeAxis& axis, bool daemon) {
    std::string out = fmt::format(
        "<details><summary>Tasks ({0})</summary><div class=\"table-wrap\"><table class=\"tasks\">"
        "<thead><tr><th>Task</th>{1}<th>GPUs</th><th>Submitted ({2})</th><th>Wait ({2})</th>"
        "<th>Start ({2})</th><th>End ({2})</th><th>Attempts</th><th>OOM</th><th>State</th>"
        "<th>On</th></tr></thead><tbody>",
        r.tasks.size(), daemon ? "<th>ID</th><th>User</th>" : "", axis.unit.symbol);
    for (const TaskRecord& t : r.tasks) {
        std::string on;
        for (std::size_t k = 0; k < t.gpu_ids.size(); ++k) {
            on += k == 0 ? "GPU " : ",";
            on += std::to_string(t.gpu_ids[k]);
        }
        const double end = t.finish_s >= 0 ? t.finish_s : t.left_s;
        out += fmt::format(
            "<tr><td>{}</td>{}<td>{}</td><td>{}</td><td>{:.2f}</td><td>{}</td><td>{}</td><td>{}</"
            "td>"
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            html_escape(t.name),
            daemon ? fmt::format("<td>{}</td><td>{}</td>", t.id, html_escape(t.user)) : "", t.gpus,
            time_cell(t.submit_s, axis), t.wait_s / axis.unit.seconds, time_cell(t.first_start_s, axis),
            time_cell(end, axis), t.attempts, t.oom_crashes, html_escape(task_state(t)),
            on.empty() ? "-" : on);
    }
    return out + "</tbody></table></div></details>\n";
}

std::string policy_section(const PolicyResult& r, std::size_t index, const TimeAxis& axis,
                           double queue_max, bool daemon) {
    std::size_t relaunches = 0;
    for (const TaskRecord& t : r.tasks) {
        for (std::size_t k = 1; k < t.spans.size(); ++k) {
            relaunches += t.spans[k - 1].outcome == AttemptOutcome::OutOfMemory ? 1 : 0;
        }
    }
    std::string out = fmt::format(
        "<section id=\"policy-{}\"><h2>{}</h2><p class=\"meta\">makespan <b>{:.2f} {}</b> \u00b7 "
        "energy <b>{:.2f} MJ</b> \u00b7 <b>{}</b> OOM crashes, <b>{}</b> relaunches after one "
        "\u00b7 <b>{}</b> of <b>{}</b> tasks completed, <b>{}</b> rejected \u00b7 SMACT "
        "<b>{:.3f}</b></p>",
        index, html_escape(r.policy), r.makespan_s / axis.unit.seconds, axis.unit.symbol,
        r.energy_j / 1e6, r.oom_crashes,
        relaunches, r.tasks_completed, r.tasks.size(), r.tasks_rejected, r.mean_smact);
    const bool timelines = std::any_of(r.timelines.begin(), r.timelines.end(),
                                       [](const GpuTimeline& g) { return !g.points.empty(); });
    if (timelines) {
        out += figure(svg_step_lines("SM activity (SMACT) per GPU", r.timelines,
                                     TimelineSeries::Smact, axis, r.tasks));
        out += figure(svg_step_lines("Memory used per GPU", r.timelines,
                                     TimelineSeries::MemoryUsedFrac, axis, r.tasks));
    } else {
        out += "<p class=\"empty\">No timeline recorded.</p>";
    }
    out += figure(svg_gantt("Attempts per GPU", r, axis));
    out += figure(
        svg_queue_length("Tasks waiting", queue_length_steps(r.tasks, axis), axis, queue_max));
    if (!r.usage.empty()) {
        out += figure(svg_usage_per_user("GPU-hours charged per user", r.usage, axis));
    }
    out += tasks_table(r, axis, daemon);
    return out + "</section>\n";
}

Result<void> write_file(const std::filesystem::path& path, const std::string& content) {
    const auto io_error = [&](int err) {
        return fail(ErrorCode::Io, fmt::format("cannot write '{}': {}", path.string(),
                                               std::generic_category().message(err)));
    };
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        return io_error(errno);
    }
    const std::size_t written = std::fwrite(content.data(), 1, content.size(), f);
    const int write_errno = errno;
    // Close even after a short write; a failing close can also mean lost data (e.g. ENOSPC).
    if (std::fclose(f) != 0) {
        return io_error(errno);
    }
    if (written != content.size()) {
        return io_error(write_errno != 0 ? write_errno : EIO);
    }
    return {};
}

// Times in the tasks CSV: seconds of the trace, or unix times for a daemon's history.
std::string csv_time(double t_s, const Comparison& c) {
    if (t_s < 0 || !std::isfinite(t_s)) {
        return "";
    }
    return c.kind == RecordKind::DaemonHistory ? fmt::format("{:.1f}", c.origin_unix_s + t_s)
                                               : fmt::format("{:.1f}", t_s);
}

}  // namespace

std::string render_results_csv(const Comparison& comparison) {
    const PolicyResult* exclusive = find_exclusive(comparison);
    std::string out = "policy";
    for (const auto& col : kColumns) {
        out += fmt::format(",{}", col.csv_name);
    }
    for (const auto& col : kColumns) {
        if (col.change_vs_exclusive) {
            out += fmt::format(",{}_vs_exclusive", col.csv_name);
        }
    }
    out += '\n';
    for (const auto& r : comparison.results) {
        out += csv_field(r.policy);
        for (const auto& col : kColumns) {
            // Appending separately: `"," + std::string` trips GCC 12's -Wrestrict false positive.
            out += ',';
            out += csv_number(col.in_csv(r), col.decimals);
        }
        for (const auto& col : kColumns) {
            if (col.change_vs_exclusive) {
                const double base = exclusive != nullptr ? col.value(*exclusive) : 0;
                const double v = col.value(r);
                out += base > 0 && std::isfinite(v) ? fmt::format(",{:.4f}", v / base)
                                                    : std::string(",");
            }
        }
        out += '\n';
    }
    return out;
}

std::string render_report_tasks_csv(const Comparison& c) {
    std::string out =
        "policy,id,user,task,gpus,state,submitted,started,ended,wait_s,attempts,oom_crashes,"
        "spans\n";
    for (const PolicyResult& r : c.results) {
        for (const TaskRecord& t : r.tasks) {
            std::string spans;
            for (const AttemptSpan& s : t.spans) {
                std::string gpus;
                for (int g : s.gpus) {
                    if (!gpus.empty()) {
                        gpus += '+';
                    }
                    gpus += std::to_string(g);
                }
                spans +=
                    fmt::format("{}{}-{}@{}:{}", spans.empty() ? "" : " ", csv_time(s.start_s, c),
                                csv_time(s.end_s, c), gpus, to_string(s.outcome));
            }
            const double end = t.finish_s >= 0 ? t.finish_s : t.left_s;
            out += fmt::format("{},{},{},{},{},{},{},{},{},{:.1f},{},{},{}\n", csv_field(r.policy),
                               t.id >= 0 ? std::to_string(t.id) : std::string(), csv_field(t.user),
                               csv_field(t.name), t.gpus, csv_field(task_state(t)),
                               csv_time(t.submit_s, c), csv_time(t.first_start_s, c),
                               csv_time(end, c), t.wait_s, t.attempts, t.oom_crashes, spans);
        }
    }
    return out;
}

std::string render_html_report(const Comparison& comparison) {
    const TimeAxis axis = page_axis(comparison);
    const bool daemon = comparison.kind == RecordKind::DaemonHistory;
    std::string out = page_header(comparison, axis);
    if (comparison.results.empty()) {
        out += daemon ? "<p class=\"empty\">The daemon returned no history.</p>"
                      : "<p class=\"empty\">No policies were simulated.</p>";
    } else {
        out += "<section><h2>Summary</h2>" + summary_table(comparison, axis.unit) +
               comparison_charts(comparison, axis.unit) + "</section>\n";
        // One y axis for every policy's queue, as for time.
        double queue_max = 1;
        for (const auto& r : comparison.results) {
            for (const StepPoint& p : queue_length_steps(r.tasks, axis)) {
                queue_max = std::max(queue_max, p.value);
            }
        }
        for (std::size_t i = 0; i < comparison.results.size(); ++i) {
            out += policy_section(comparison.results[i], i, axis, queue_max, daemon);
        }
    }
    out += fmt::format(
        "<footer>Every chart over time shares one axis ({}). Timelines are piecewise constant and "
        "drawn as steps; lines with more than {} steps are downsampled keeping each interval's "
        "maximum, so short spikes stay visible.{} The summary is in results.csv, every task and "
        "attempt in tasks.csv.</footer>\n</body></html>\n",
        html_escape(axis.label), kMaxStepsPerLine,
        daemon ? " The daemon's stored samples come reduced to about 1,000 intervals per GPU, "
                 "each keeping the maximum of each metric over the interval; energy is "
                 "integrated from them, so it is an upper bound."
               : "");
    return out;
}

Result<std::string> write_html_report(const Comparison& comparison, const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot create report directory '{}': {}", dir, ec.message()));
    }
    const fs::path index = fs::path(dir) / "index.html";
    if (auto written = write_file(index, render_html_report(comparison)); !written) {
        return tl::unexpected(written.error());
    }
    if (auto written = write_file(fs::path(dir) / "results.csv", render_results_csv(comparison));
        !written) {
        return tl::unexpected(written.error());
    }
    if (auto written = write_file(fs::path(dir) / "tasks.csv", render_report_tasks_csv(comparison));
        !written) {
        return tl::unexpected(written.error());
    }
    return index.string();
}

}  // namespace carma::sim
