#include "cli/views/acct_view.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <nlohmann/json.hpp>

#include "cli/common/json_read.h"
#include "cli/views/cells.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;


// ---- cells --------------------------------------------------------------------------------

// Compact like squeue's TIME (cli/views/cells.h): 45s, 3m05s, 1h02m, 2d03h.
std::string duration_cell(std::optional<double> seconds) {
    return seconds ? format_duration(*seconds) : "-";
}

// GPU time as the run time reads (45s, 4m12s, 3h05m), not "0.07" GPU-hours for five minutes.
std::string gpu_time_cell(std::optional<double> gpu_hours) {
    return gpu_hours && std::isfinite(*gpu_hours) ? format_duration(*gpu_hours * 3600) : "-";
}

std::string time_cell(std::optional<double> epoch, const TimeText& time_text) {
    if (!epoch || !std::isfinite(*epoch) || std::abs(*epoch) > kLongestTime) {
        return "-";
    }
    return time_text(*epoch);
}

std::string energy_cell(std::optional<double> joules) {
    return joules && std::isfinite(*joules) ? format_energy(*joules) : "-";
}

std::string outcomes_cell(const json& row) {
    std::vector<std::string> outcomes;
    for (const json& a : array_of(row, "attempts")) {
        outcomes.push_back(text_of(a, "outcome"));
    }
    return outcomes.empty() ? "-" : fmt::format("{}", fmt::join(outcomes, ","));
}

struct Field {
    const char* name;    // what --format takes
    const char* header;  // the column's title
    bool right;          // numbers are right-aligned
    std::string (*cell)(const json& row, const TimeText& time_text);
};

// A reason past this many columns is cut; `carma show ID` has all of it.
constexpr std::size_t kAcctReasonWidth = 72;

const std::vector<Field>& fields() {
    static const std::vector<Field> table = {
        {"id", "ID", false, [](const json& r, const TimeText&) { return task_id_text(r, "-"); }},
        {"name", "NAME", false, [](const json& r, const TimeText&) { return text_of(r, "name"); }},
        {"user", "USER", false, [](const json& r, const TimeText&) { return text_of(r, "user"); }},
        {"state", "STATE", false,
         [](const json& r, const TimeText&) { return text_of(r, "state"); }},
        {"submitted", "SUBMITTED", false,
         [](const json& r, const TimeText& t) { return time_cell(number_of(r, "submitted_at"), t); }},
        {"start", "START", false,
         [](const json& r, const TimeText& t) { return time_cell(number_of(r, "started_at"), t); }},
        {"end", "END", false,
         [](const json& r, const TimeText& t) { return time_cell(number_of(r, "finished_at"), t); }},
        {"wait", "WAIT", true,
         [](const json& r, const TimeText&) { return duration_cell(number_of(r, "wait_s")); }},
        {"run", "RUN", true,
         [](const json& r, const TimeText&) { return duration_cell(number_of(r, "run_s")); }},
        {"attempts", "ATTEMPTS", true,
         [](const json& r, const TimeText&) {
             return std::to_string(array_of(r, "attempts").size());
         }},
        {"outcomes", "OUTCOMES", false,
         [](const json& r, const TimeText&) { return outcomes_cell(r); }},
        {"gpus", "GPUS", true, [](const json& r, const TimeText&) { return text_of(r, "gpus"); }},
        {"gpu_time", "GPU_TIME", true,
         [](const json& r, const TimeText&) { return gpu_time_cell(number_of(r, "gpu_hours")); }},
        // Fair share: the GPU time the task was charged, the larger of its memory and SM share
        // of each GPU it held (core/fair_share.h).
        {"charged", "CHARGED", true,
         [](const json& r, const TimeText&) {
             return gpu_time_cell(number_of(r, "charged_gpu_hours"));
         }},
        {"gpu_hours", "GPU_H", true,
         [](const json& r, const TimeText&) {
             const std::optional<double> h = number_of(r, "gpu_hours");
             return h ? fmt::format("{:.2f}", *h) : std::string("-");
         }},
        {"peak", "PEAK", true,
         [](const json& r, const TimeText&) {
             const std::optional<double> mib = number_of(r, "peak_mib");
             return mib ? format_mib(static_cast<MiB>(*mib)) : std::string("-");
         }},
        {"energy", "ENERGY", true,
         [](const json& r, const TimeText&) { return energy_cell(number_of(r, "energy_j")); }},
        // sacct's TotalCPU and MaxRSS, from the attempts' fences (cgroups).
        {"cpus", "CPUS", true,
         [](const json& r, const TimeText&) {
             const std::optional<double> n = number_of(r, "cpus");
             return n && *n > 0 ? fmt::format("{:.0f}", *n) : std::string("-");
         }},
        {"total_cpu", "TOTALCPU", true,
         [](const json& r, const TimeText&) {
             const std::optional<double> s = number_of(r, "total_cpu_s");
             return s && *s < 10 ? fmt::format("{:.1f}s", *s) : duration_cell(s);
         }},
        {"max_rss", "MAXRSS", true,
         [](const json& r, const TimeText&) {
             const std::optional<double> mib = number_of(r, "max_rss_mib");
             return mib ? format_mib(static_cast<MiB>(*mib)) : std::string("-");
         }},
        // Why it ended, in its own words where it failed ("failed after 1 attempt(s): exit
        // code 1: ModuleNotFoundError: ..."); a success needs none.
        {"reason", "REASON", false,
         [](const json& r, const TimeText&) {
             const std::string message = text_of(r, "message", "");
             return message.empty() || text_of(r, "state") == "succeeded"
                        ? std::string("-")
                        : truncate(message, kAcctReasonWidth);
         }},
    };
    return table;
}

const Field* find_field(std::string_view name) {
    for (const Field& f : fields()) {
        if (name == f.name) {
            return &f;
        }
    }
    return nullptr;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
    const std::string fill(width - std::min(width, display_width(s)), ' ');
    return right ? fill + s : s + fill;
}

// Rows of cells under headers, columns two spaces apart, no trailing blanks; each cell through
// printable(): names and users are users' own text.
std::string render(const std::vector<std::string>& headers, const std::vector<bool>& right,
                   std::vector<std::vector<std::string>> rows) {
    for (auto& row : rows) {
        for (std::string& cell : row) {
            cell = printable(cell);
        }
    }
    std::vector<std::size_t> width(headers.size());
    for (std::size_t c = 0; c < headers.size(); ++c) {
        width[c] = display_width(headers[c]);
        for (const auto& row : rows) {
            width[c] = std::max(width[c], display_width(row[c]));
        }
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
        std::string text_line;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            text_line += (c == 0 ? "" : "  ") + pad(cells[c], width[c], right[c]);
        }
        while (!text_line.empty() && text_line.back() == ' ') {
            text_line.pop_back();
        }
        out += text_line + "\n";
    };
    line(headers);
    for (const auto& row : rows) {
        line(row);
    }
    return out;
}

std::string totals_table(const json& totals) {
    const std::vector<std::string> headers = {"USER",     "TASKS",  "ATTEMPTS", "RUN",
                                              "GPU_TIME", "ENERGY", "MEAN_WAIT"};
    const std::vector<bool> right = {false, true, true, true, true, true, true};
    std::vector<std::vector<std::string>> rows;
    for (const json& t : totals.is_array() ? totals : json::array()) {
        const std::optional<double> h = number_of(t, "gpu_hours");
        rows.push_back({text_of(t, "user"), text_of(t, "tasks"), text_of(t, "attempts"),
                        duration_cell(number_of(t, "run_s")),
                        gpu_time_cell(h), energy_cell(number_of(t, "energy_j")),
                        duration_cell(number_of(t, "mean_wait_s"))});
    }
    return render(headers, right, std::move(rows));
}

}  // namespace

const std::vector<std::string>& acct_field_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const Field& f : fields()) {
            out.emplace_back(f.name);
        }
        return out;
    }();
    return names;
}

const std::vector<std::string>& acct_default_fields() {
    static const std::vector<std::string> names = {
        "id",   "name",     "user", "state",     "submitted", "end",   "wait",
        "run",  "outcomes", "gpus", "gpu_time", "charged",   "peak",  "energy", "total_cpu",
        "max_rss", "reason"};
    return names;
}

Result<std::vector<std::string>> parse_acct_format(std::string_view text_in) {
    std::vector<std::string> out;
    for (const std::string& piece : split_list(text_in, ',')) {
        const std::string name = to_lower(trim(piece));
        if (name.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("'{}' has an empty field; give fields separated by commas, "
                                    "e.g. id,user,state,wait,run,energy",
                                    text_in));
        }
        if (find_field(name) == nullptr) {
            const std::string near = closest_match(name, acct_field_names());
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("unknown field '{}'{}; fields: {}", name,
                                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                    fmt::join(acct_field_names(), ", ")));
        }
        out.push_back(name);
    }
    return out;
}

std::string format_energy(double joules) {
    if (joules < 10'000) {
        const auto j = static_cast<long long>(std::llround(std::max(0.0, joules)));
        const std::string digits = std::to_string(j);
        std::string grouped;
        for (std::size_t i = 0; i < digits.size(); ++i) {
            if (i > 0 && (digits.size() - i) % 3 == 0) {
                grouped += ',';
            }
            grouped += digits[i];
        }
        return grouped + " J";
    }
    if (joules < 10e6) {
        return fmt::format("{:.1f} kJ", joules / 1e3);
    }
    return fmt::format("{:.2f} MJ", joules / 1e6);
}

std::string format_acct(const json& answer, const std::vector<std::string>& columns,
                        const TimeText& time_text) {
    const json& tasks = array_of(answer, "tasks");
    if (tasks.empty()) {
        return "no finished task matches\n";
    }
    std::vector<const Field*> chosen;
    for (const std::string& name : columns) {
        if (const Field* f = find_field(name)) {
            chosen.push_back(f);
        }
    }
    std::vector<std::string> headers;
    std::vector<bool> right;
    for (const Field* f : chosen) {
        headers.emplace_back(f->header);
        right.push_back(f->right);
    }
    std::vector<std::vector<std::string>> rows;
    for (const json& row : tasks) {
        std::vector<std::string> cells;
        for (const Field* f : chosen) {
            cells.push_back(f->cell(row, time_text));
        }
        rows.push_back(std::move(cells));
    }
    std::string out = render(headers, right, std::move(rows));
    out += "\ntotals per user\n";
    out += totals_table(member(answer, "totals") ? answer.at("totals") : json::array());
    return out;
}

}  // namespace carma::cli
