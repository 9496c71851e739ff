#include "cli/views/top_view.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "cli/common/json_read.h"
#include "cli/views/cells.h"
#include "cli/views/screen_text.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::cli {

using namespace screen;  // Line, Section, columns(), cut(), pad(), wrap(), the SGR styles

namespace {

using nlohmann::json;

constexpr std::size_t kMinBar = 4;     // narrower than this a bar says nothing: numbers only
constexpr std::size_t kErrorLines = 3;
constexpr std::size_t kReasonCols = 48;  // a health or risk reason in a GPU's title line

// One fill character and colour per task on a memory bar, so tasks stay apart without colour.
constexpr std::array<char, 8> kTaskFills = {'#', '=', '%', '@', '&', '+', '*', '$'};
constexpr std::array<const char*, 8> kTaskColours = {"34", "35", "36", "33",
                                                     "32", "94", "95", "96"};
constexpr char kOtherFill = '~';  // memory held outside CARMA's tasks
constexpr char kForeignFill = 'x';  // held by a process CARMA did not start (its pid is shown)
constexpr char kFreeFill = '.';

// ---- cells -----------------------------------------------------------------------------

std::string clock_text(std::optional<double> epoch) {
    if (!epoch || !std::isfinite(*epoch) || std::abs(*epoch) > kLongestTime) {
        return "--:--:--";
    }
    const auto t = static_cast<std::time_t>(*epoch);
    std::tm local{};
    if (::localtime_r(&t, &local) == nullptr) {
        return "--:--:--";
    }
    char buf[16];
    std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
    return buf;
}

std::string mib_or(std::optional<std::int64_t> mib, const char* fallback) {
    return mib ? format_mib(*mib) : fallback;
}

// A duration the daemon computed (`seconds_key`), else since `since_key` by the view's clock.
std::string duration_or_dash(const json& row, const char* seconds_key, const char* since_key,
                             std::optional<double> now) {
    if (const std::optional<double> s = number_of(row, seconds_key)) {
        return format_duration(*s);
    }
    const std::optional<double> since = number_of(row, since_key);
    return since && now ? format_duration(*now - *since) : "-";
}

std::string gpu_list(const json& row) {
    const json* gpus = member(row, "gpus");
    if (gpus == nullptr) {
        return "-";
    }
    if (!gpus->is_array()) {
        return gpus->dump();
    }
    std::string out;
    for (const json& g : *gpus) {
        if (!out.empty()) {
            out += ',';
        }
        out += g.is_string() ? g.get<std::string>() : g.dump();
    }
    return out.empty() ? "-" : out;
}

// ---- header ----------------------------------------------------------------------------

std::vector<Line> header_lines(const json& view, const TopScreen& s) {
    std::vector<Line> out;
    Line head;
    head.add("carma top", kTitle);
    if (view.is_object()) {
        head.add("  policy ").add(text_of(view, "policy", "?"), kBold);
        head.add("  backend ").add(text_of(view, "backend", "?"), kBold);
        if (const std::optional<double> scale = number_of(view, "time_scale");
            scale && *scale != 1 && std::isfinite(*scale)) {
            head.add(fmt::format(" x{:g}", *scale));
        }
        if (text_of(view, "backend", "").starts_with("emulated")) {
            head.add(" EMULATED GPUs", kWarn);  // never to be mistaken for real hardware
        }
        head.add("  " + clock_text(number_of(view, "now")));
        const json& queue = array_of(view, "queue");
        auto held = static_cast<std::size_t>(std::count_if(
            queue.begin(), queue.end(), [](const json& t) { return text_of(t, "state") == "held"; }));
        std::size_t waiting = queue.size() - held;
        // The view lists the queue's head; its per-user counts cover the whole queue.
        if (const json& users = array_of(view, "queue_users"); !users.empty()) {
            held = 0;
            waiting = 0;
            for (const json& u : users) {
                held += static_cast<std::size_t>(integer_of(u, "held").value_or(0));
                waiting += static_cast<std::size_t>(integer_of(u, "queued").value_or(0) +
                                                    integer_of(u, "recovering").value_or(0));
            }
        }
        head.add(fmt::format("  {} running, {} queued", array_of(view, "running").size(),
                             waiting));
        if (held > 0) {
            head.add(fmt::format(", {} held", held));
        }
    }
    // The status only when it fits whole: cut, it says nothing.
    if (!s.status.empty() && head.columns() + 2 + columns(s.status) <= s.width) {
        head.add("  " + s.status, kDim);
    }
    out.push_back(std::move(head));
    // Fair share, when more than one user has live tasks: each one's factor and a bar of their
    // usage against their share ("alice F 0.39 [#####|  ]").
    if (view.is_object()) {
        const json& users = array_of(view, "queue_users");
        if (users.size() > 1) {
            Line share;
            share.add("share", kDim);
            constexpr int kBar = 8;
            for (const json& u : users) {
                const std::optional<double> factor = number_of(u, "factor");
                if (!factor) {
                    continue;
                }
                const double usage = std::clamp(number_of(u, "usage_norm").value_or(0), 0.0, 1.0);
                const double part = std::clamp(number_of(u, "shares_norm").value_or(0), 0.0, 1.0);
                const int used = static_cast<int>(std::lround(usage * kBar));
                const int mark = std::min(kBar - 1, static_cast<int>(std::lround(part * kBar)));
                std::string bar;
                for (int i = 0; i < kBar; ++i) {
                    bar += i == mark ? '|' : i < used ? '#' : ' ';
                }
                share.add(fmt::format("  {} F {:.2f} ", printable(text_of(u, "user")), *factor));
                share.add("[" + bar + "]", usage > part ? kWarn : kGood);
            }
            if (share.columns() > 5 && share.columns() <= s.width) {
                out.push_back(std::move(share));
            }
        }
    }
    if (!s.error.empty()) {
        for (const std::string& l : wrap("carma: " + printable(s.error), s.width, kErrorLines)) {
            out.push_back(Line().add(l, kBad));
        }
        if (view.is_object()) {
            const std::optional<double> then = number_of(view, "now");
            std::string age;
            if (then && std::isfinite(*then) && std::abs(s.now - *then) < kLongestTime) {
                age = fmt::format(" ({} ago)", format_duration(s.now - *then));
            }
            out.push_back(Line().add(
                fmt::format("the last answer, from {}{}:", clock_text(then), age), kDim));
        }
    } else if (!view.is_object()) {
        out.push_back(Line().add("waiting for the daemon's first answer", kDim));
    }
    return out;
}

// ---- a GPU -------------------------------------------------------------------------------

std::string sources_text(const json& gpu) {
    const json* src = member(gpu, "sources");
    if (src == nullptr) {
        return "?";
    }
    const std::string smact = text_of(*src, "smact", "?");
    const std::string smocc = text_of(*src, "smocc", "?");
    const std::string drama = text_of(*src, "drama", "?");
    const std::string memory = text_of(*src, "memory", "?");
    const std::string activity = smact == smocc && smact == drama
                                     ? smact
                                     : fmt::format("SMACT {}, SMOCC {}, DRAMA {}", smact, smocc, drama);
    return memory == smact && smact == smocc && smact == drama
               ? activity
               : fmt::format("{} (memory {})", activity, memory);
}

Line gpu_title(const json& gpu) {
    Line l;
    l.add("GPU " + text_of(gpu, "index", "?"), kBold).add("  " + text_of(gpu, "name", "?"));

    const json& health = object_of(gpu, "health");
    const std::string state = text_of(health, "state", "?");
    const std::string why = text_of(health, "reason", "");
    const char* health_style = state == "ok"                       ? kGood
                               : state == "filling"                ? kWarn
                               : state == "excluded" || state == "?" ? kDim
                                                                    : kBad;
    l.add("  health ").add(why.empty() ? state : state + ": " + cut(why, kReasonCols),
                           health_style);

    l.add("  risk ");
    const json* risk = member(gpu, "risk");
    const json* high = risk != nullptr ? member(*risk, "high") : nullptr;
    if (high == nullptr || !high->is_boolean()) {
        l.add("?");
    } else if (flag_of(*risk, "high")) {
        l.add("HIGH", kBad);
    } else {
        l.add("ok", kGood);
    }
    if (risk != nullptr) {
        l.add(" (" + text_of(*risk, "rule", "?") + ")");
        const std::string reason = text_of(*risk, "reason", "");
        if (flag_of(*risk, "high") && !reason.empty()) {
            l.add(": " + cut(reason, kReasonCols), kBad);
        }
    }

    if (member(gpu, "locked") == nullptr) {
        l.add("  lock ?");
    } else if (flag_of(gpu, "locked")) {
        l.add("  ").add("warm-up lock", kWarn);
    } else {
        l.add("  unlocked", kDim);
    }
    l.add("  src " + sources_text(gpu));
    return l;
}

struct BarItem {
    char fill;
    const char* style;
    std::string label;
};

// The memory bar and, under it, which fill is which task.
std::vector<Line> memory_lines(const json& gpu, std::size_t width) {
    const std::optional<std::int64_t> total = integer_of(gpu, "total_mib");
    const std::optional<std::int64_t> free = integer_of(gpu, "free_mib");
    std::optional<std::int64_t> used = integer_of(gpu, "used_mib");
    if (!used && total && free) {
        used = *total - *free;
    }
    const json& tasks = array_of(gpu, "tasks");
    std::int64_t task_sum = 0;
    for (const json& t : tasks) {
        task_sum += std::max<std::int64_t>(0, integer_of(t, "used_mib").value_or(0));
    }
    const json& foreign = array_of(gpu, "foreign");
    std::int64_t foreign_sum = 0;
    for (const json& f : foreign) {
        foreign_sum += std::max<std::int64_t>(0, integer_of(f, "used_mib").value_or(0));
    }
    // The view's other_mib leaves the foreign processes out already.
    std::optional<std::int64_t> other = integer_of(gpu, "other_mib");
    if (!other && used) {
        other = std::max<std::int64_t>(0, *used - task_sum - foreign_sum);
    }

    const std::string prefix = "  mem   ";
    const std::string value = fmt::format("{}/{}", mib_or(used, "?"), mib_or(total, "?"));
    const std::size_t fixed = prefix.size() + 3 + columns(value);  // "[", "] "
    const std::size_t bar = width > fixed ? width - fixed : 0;

    Line l;
    l.add(prefix);
    std::vector<BarItem> legend;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        const json& t = tasks[i];
        legend.push_back({kTaskFills[i % kTaskFills.size()], kTaskColours[i % kTaskColours.size()],
                          fmt::format("{} {} {} {}", task_id_text(t), text_of(t, "user", "?"),
                                      text_of(t, "name", "-"),
                                      mib_or(integer_of(t, "used_mib"), "? MiB"))});
    }
    // Processes CARMA did not start: taken memory, with who holds it.
    for (const json& f : foreign) {
        legend.push_back({kForeignFill, kWarn,
                          fmt::format("foreign pid {} {} {}", text_of(f, "pid", "?"),
                                      text_of(f, "user", "?"),
                                      mib_or(integer_of(f, "used_mib"), "? MiB"))});
    }
    if (other && *other > 0) {
        legend.push_back({kOtherFill, kDim, "other " + format_mib(*other)});
    }

    if (total && *total > 0 && bar >= kMinBar) {
        l.add("[");
        std::size_t pos = 0;
        auto fill = [&](std::int64_t mib, char c, const char* style) {
            if (mib <= 0 || pos >= bar) {
                return;
            }
            const double share = std::min(static_cast<double>(mib) / static_cast<double>(*total), 1.0);
            auto cells = static_cast<std::size_t>(std::llround(share * static_cast<double>(bar)));
            cells = std::min(std::max<std::size_t>(cells, 1), bar - pos);  // a task is never hidden
            l.add(std::string(cells, c), style);
            pos += cells;
        };
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            fill(integer_of(tasks[i], "used_mib").value_or(0), legend[i].fill, legend[i].style);
        }
        fill(foreign_sum, kForeignFill, kWarn);
        fill(other.value_or(0), kOtherFill, kDim);
        l.add(std::string(bar - pos, kFreeFill), kDim);
        l.add("] ");
    }
    l.add(value);

    std::vector<Line> out{std::move(l)};
    const std::string indent(prefix.size(), ' ');
    const std::size_t room = width > indent.size() ? width - indent.size() : 0;
    Line row;
    std::size_t row_cols = 0;
    for (const BarItem& item : legend) {
        const std::string label = cut(item.label, room >= 2 ? room - 2 : 0);
        const std::size_t cols = 2 + columns(label);
        if (row_cols > 0 && row_cols + 2 + cols > room) {
            out.push_back(std::move(row));
            row = Line();
            row_cols = 0;
        }
        if (row_cols == 0) {
            row.add(indent);
        } else {
            row.add("  ");
            row_cols += 2;
        }
        row.add(std::string(1, item.fill), item.style).add(" " + label);
        row_cols += cols;
    }
    if (row_cols > 0) {
        out.push_back(std::move(row));
    }
    return out;
}

// SMACT, SMOCC and DRAMA side by side: the current value as a bar, the risk threshold as '|'.
Line activity_line(const json& gpu, const json& thresholds, std::size_t width) {
    static constexpr std::pair<const char*, const char*> kMetrics[] = {
        {"smact", "SMACT"}, {"smocc", "SMOCC"}, {"drama", "DRAMA"}};
    constexpr std::size_t kValueCols = 5;  // "0.42 ", "-0.50"
    Line l;
    l.add("  ");
    const std::size_t section = width > 2 ? (width - 2) / 3 : 0;
    // "SMACT [" + bar + "] " + value + "  "
    const std::size_t fixed = 7 + 2 + kValueCols + 2;
    const std::size_t bar = section > fixed ? section - fixed : 0;
    for (const auto& [key, label] : kMetrics) {
        const std::optional<double> value = number_of(gpu, key);
        const std::optional<double> limit = number_of(thresholds, key);
        std::string value_text = "?";
        if (value) {
            value_text = std::abs(*value) < 10 ? fmt::format("{:.2f}", *value) : ">9.99";
        }
        const bool high = value && limit && *value >= *limit;
        if (bar < kMinBar) {
            l.add(std::string(label) + " ").add(value_text, high ? kBad : kPlain).add("  ");
            continue;
        }
        const auto cells_for = [&](double x) {
            return static_cast<std::size_t>(
                std::llround(std::clamp(x, 0.0, 1.0) * static_cast<double>(bar)));
        };
        const std::size_t filled = value ? cells_for(*value) : 0;
        // Past the end when there is no threshold to mark.
        const std::size_t mark = limit ? std::min(cells_for(*limit), bar - 1) : bar;
        l.add(std::string(label) + " [");
        // Runs of one character and style: fill, the mark, the empty rest.
        std::string run;
        const char* run_style = kPlain;
        for (std::size_t k = 0; k < bar; ++k) {
            char c = k < filled ? '#' : ' ';
            const char* style = k < filled ? (high ? kBad : kGood) : kPlain;
            if (k == mark) {
                c = '|';
                style = kBold;
            }
            if (!run.empty() && style != run_style) {
                l.add(run, run_style);
                run.clear();
            }
            run += c;
            run_style = style;
        }
        l.add(run, run_style);
        l.add("] ").add(pad(value_text, kValueCols, false), high ? kBad : kPlain).add("  ");
    }
    return l;
}

std::vector<Line> gpu_block(const json& gpu, const json& thresholds, std::size_t width) {
    std::vector<Line> out{gpu_title(gpu)};
    for (Line& l : memory_lines(gpu, width)) {
        out.push_back(std::move(l));
    }
    out.push_back(activity_line(gpu, thresholds, width));
    return out;
}

// ---- task tables -------------------------------------------------------------------------

struct Column {
    const char* header;
    bool right;             // numbers are right-aligned
    std::size_t shrink_to;  // a long cell may be cut down to this; 0: never cut
};

struct Row {
    std::vector<std::string> cells;
    bool mine = false;  // the viewer's task, in bold
};

// A titled table whose cuttable columns shrink, the last first, until the rows fit `width`.
Section table_section(const std::string& title, const std::vector<Column>& columns_in,
                      const std::vector<Row>& rows, std::size_t width, const char* one,
                      const char* many) {
    Section s;
    s.one = one;
    s.many = many;
    s.fixed.push_back(Line().add(title, kBold));
    if (rows.empty()) {
        return s;
    }
    std::vector<std::size_t> w(columns_in.size());
    for (std::size_t c = 0; c < columns_in.size(); ++c) {
        w[c] = columns(columns_in[c].header);
        for (const Row& r : rows) {
            w[c] = std::max(w[c], columns(printable(r.cells[c])));
        }
    }
    std::size_t total = 2 * (columns_in.size() - 1);
    for (std::size_t x : w) {
        total += x;
    }
    for (std::size_t c = columns_in.size(); c-- > 0 && total > width;) {
        const std::size_t floor = std::max(columns_in[c].shrink_to, columns(columns_in[c].header));
        if (columns_in[c].shrink_to > 0 && w[c] > floor) {
            const std::size_t cut_by = std::min(w[c] - floor, total - width);
            w[c] -= cut_by;
            total -= cut_by;
        }
    }
    auto line = [&](const std::vector<std::string>& cells, const char* style) {
        std::string text;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            const bool last = c + 1 == cells.size();
            const std::string cell = cut(printable(cells[c]), w[c]);
            text += (c == 0 ? "" : "  ") +
                    (last && !columns_in[c].right ? cell : pad(cell, w[c], columns_in[c].right));
        }
        return Line().add(text, style);
    };
    std::vector<std::string> headers;
    for (const Column& c : columns_in) {
        headers.emplace_back(c.header);
    }
    s.fixed.push_back(line(headers, kDim));
    for (const Row& r : rows) {
        s.items.push_back({line(r.cells, r.mine ? kBold : kPlain)});
    }
    return s;
}

Section running_section(const json& view, std::size_t width) {
    const json& running = array_of(view, "running");
    const std::string viewer = text_of(view, "viewer", "");
    const std::optional<double> now = number_of(view, "now");
    std::vector<Row> rows;
    for (const json& t : running) {
        const std::string user = text_of(t, "user", "?");
        rows.push_back({{task_id_text(t), user, text_of(t, "name", "-"), gpu_list(t),
                         duration_or_dash(t, "run_s", "started_at", now),
                         mib_or(integer_of(t, "memory_mib"), "-")},
                        !viewer.empty() && user == viewer});
    }
    const std::string title = running.empty() ? "RUNNING: none" : fmt::format("RUNNING {}", running.size());
    return table_section(title,
                         {{"ID", false, 0},
                          {"USER", false, 8},
                          {"NAME", false, 8},
                          {"GPUS", false, 4},
                          {"TIME", true, 0},
                          {"MEM", true, 0}},
                         rows, width, "running task", "running tasks");
}

Section queue_section(const json& view, std::size_t width) {
    const json& queue = array_of(view, "queue");
    const std::string viewer = text_of(view, "viewer", "");
    const std::optional<double> now = number_of(view, "now");
    std::vector<Row> rows;
    for (const json& t : queue) {
        const std::string user = text_of(t, "user", "?");
        rows.push_back({{task_id_text(t), user, text_of(t, "name", "-"),
                         text_of(t, "state", "?"), text_of(t, "gpus", "?"),
                         mib_or(integer_of(t, "need_mib"), "?"),
                         duration_or_dash(t, "wait_s", "submitted_at", now),
                         text_of(t, "reason", "-")},
                        !viewer.empty() && user == viewer});
    }
    const std::optional<std::int64_t> total = integer_of(view, "queue_total");
    const std::string title =
        queue.empty() ? "QUEUE: empty"
        : total && *total > static_cast<std::int64_t>(queue.size())
            ? fmt::format("QUEUE: the first {} of {}", queue.size(), *total)
            : fmt::format("QUEUE {}", queue.size());
    return table_section(title,
                         {{"ID", false, 0},
                          {"USER", false, 8},
                          {"NAME", false, 8},
                          {"STATE", false, 0},
                          {"GPUS", true, 0},
                          {"NEED", true, 0},
                          {"WAIT", true, 0},
                          {"REASON", false, 10}},
                         rows, width, "queued task", "queued tasks");
}

// Tasks that ended lately without succeeding, with why in their own words (the daemon's message
// carries the last line of their stderr): a failure shows where people are looking, not only in
// `carma logs`. Newest first, as the view lists them; none, no section.
Section failed_section(const json& view, std::size_t width, bool& any) {
    const std::string viewer = text_of(view, "viewer", "");
    std::vector<Row> rows;
    for (const json& t : array_of(view, "recent")) {
        const std::string state = text_of(t, "state", "?");
        if (state == "succeeded") {
            continue;
        }
        const std::string user = text_of(t, "user", "?");
        rows.push_back({{task_id_text(t), user, text_of(t, "name", "-"), state,
                         text_of(t, "message", "-")},
                        !viewer.empty() && user == viewer});
    }
    any = !rows.empty();
    return table_section(fmt::format("ENDED WITHOUT SUCCESS {}", rows.size()),
                         {{"ID", false, 0},
                          {"USER", false, 8},
                          {"NAME", false, 8},
                          {"STATE", false, 0},
                          {"REASON", false, 10}},
                         rows, width, "ended task", "ended tasks");
}

Section gpu_section(const json& view, std::size_t width) {
    Section s;
    s.one = "GPU";
    s.many = "GPUs";
    const json& gpus = array_of(view, "gpus");
    if (gpus.empty()) {
        s.fixed.push_back(Line().add("no GPUs in the view", kDim));
    }
    const json& thresholds = object_of(view, "risk_thresholds");
    for (const json& g : gpus) {
        s.items.push_back(gpu_block(g, thresholds, width));
    }
    return s;
}

}  // namespace

std::size_t screen_columns(std::string_view line) {
    std::string plain;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\033' && i + 1 < line.size() && line[i + 1] == '[') {
            std::size_t j = i + 2;
            while (j < line.size() && (std::isdigit(static_cast<unsigned char>(line[j])) != 0 ||
                                       line[j] == ';')) {
                ++j;
            }
            if (j < line.size() && line[j] == 'm') {
                i = j;
                continue;
            }
        }
        plain += line[i];
    }
    return columns(plain);
}

std::vector<std::string> top_lines(const json& view, const TopScreen& s) {
    std::vector<Line> lines = header_lines(view, s);
    if (view.is_object() && lines.size() < s.height) {
        std::vector<Section> sections = {gpu_section(view, s.width),
                                         running_section(view, s.width),
                                         queue_section(view, s.width)};
        bool failures = false;
        Section failed = failed_section(view, s.width, failures);
        if (failures) {
            sections.push_back(std::move(failed));
        }
        const std::size_t room = s.height - lines.size();
        std::size_t wanted = 0;
        for (const Section& sec : sections) {
            wanted += sec.demand();
        }
        // A blank line before each section when everything fits with them.
        const bool spaced = wanted + sections.size() <= room;
        std::vector<std::vector<Line>> fitted = share_lines(sections, room);
        for (std::vector<Line>& part : fitted) {
            if (spaced) {
                lines.emplace_back();
            }
            for (Line& l : part) {
                lines.push_back(std::move(l));
            }
        }
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < lines.size() && i < s.height; ++i) {
        out.push_back(lines[i].render(s.width, s.colour));
    }
    return out;
}

}  // namespace carma::cli
