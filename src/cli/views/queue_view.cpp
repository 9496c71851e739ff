#include "cli/views/queue_view.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/common/json_read.h"
#include "cli/views/cells.h"
#include "core/task_ref.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;

struct FieldInfo {
    QueueField field;
    const char* name;    // in a --format comma list
    const char* header;
    char code;           // in a --format %-list, squeue's letter where squeue has the column
};

constexpr FieldInfo kFields[] = {
    {QueueField::Id, "id", "ID", 'i'},          {QueueField::User, "user", "USER", 'u'},
    {QueueField::Name, "name", "NAME", 'j'},    {QueueField::State, "state", "STATE", 't'},
    {QueueField::Gpus, "gpus", "GPUS", 'b'},    {QueueField::Mem, "mem", "MEM", 'm'},
    {QueueField::Wait, "wait", "WAIT", 'W'},    {QueueField::Time, "time", "TIME", 'M'},
    {QueueField::Priority, "priority", "PRIORITY", 'Q'},
    {QueueField::Reason, "reason", "REASON", 'R'},
};

// squeue's other spellings of the same columns: %T the long state, %r the reason alone.
constexpr std::pair<char, QueueField> kCodeAliases[] = {{'T', QueueField::State},
                                                        {'r', QueueField::Reason}};

// Every state a task can be in, waiting ones first; the order --state lists them in.
constexpr std::string_view kStates[] = {"queued",    "recovering", "held",    "running",
                                        "succeeded", "failed",     "cancelled", "timeout",
                                        "lost",      "rejected"};

bool is_waiting(std::string_view state) {
    return state == "queued" || state == "recovering" || state == "held";
}

// An array's STATE counts running tasks first, then the waiting ones, then the rest.
int summary_rank(std::string_view state) {
    if (state == "running") {
        return 0;
    }
    if (state == "recovering") {
        return 1;
    }
    if (state == "queued") {
        return 2;
    }
    if (state == "held") {
        return 3;
    }
    return 4;
}

const FieldInfo& info(QueueField f) {
    for (const FieldInfo& i : kFields) {
        if (i.field == f) {
            return i;
        }
    }
    return kFields[0];  // unreachable: every field is in kFields
}

std::string field_names() {
    std::vector<std::string> names;
    for (const FieldInfo& i : kFields) {
        names.emplace_back(i.name);
    }
    return fmt::format("{}", fmt::join(names, ","));
}

std::string field_codes() {
    std::vector<std::string> codes;
    for (const FieldInfo& i : kFields) {
        codes.push_back(fmt::format("%{} {}", i.code, i.name));
    }
    return fmt::format("{}", fmt::join(codes, ", "));
}

// ---- one line ------------------------------------------------------------------------------

struct QueueLine {
    std::string id, user, name, state, gpus, mem, reason;
    std::optional<double> wait_s;  // waiting tasks only
    std::optional<double> run_s;   // running tasks only
    std::optional<double> priority;  // waiting tasks under `carma`
};

std::string mem_cell(const json& task) {
    if (const json* learned = member(task, "learned")) {
        if (const std::optional<std::int64_t> need = integer_of(*learned, "need_mib")) {
            return format_mib(*need + integer_of(*learned, "margin_mib").value_or(0));
        }
    }
    if (const json* memory = member(task, "memory")) {
        if (const std::optional<std::int64_t> declared = integer_of(*memory, "declared_mib")) {
            return format_mib(*declared);
        }
    }
    return "?";
}

QueueLine task_line(const json& task, double now) {
    QueueLine l;
    l.id = task_id_text(task, "-");
    l.user = text_of(task, "user");
    l.name = text_of(task, "name");
    l.state = text_of(task, "state");
    l.gpus = text_of(task, "gpus");
    l.mem = mem_cell(task);
    l.reason = text_of(task, "message", "");
    l.priority = number_of(task, "priority");
    if (is_waiting(l.state)) {
        if (const std::optional<double> submitted = number_of(task, "submitted_at")) {
            l.wait_s = now - *submitted;
        }
    } else if (l.state == "running") {
        if (const std::optional<double> started = number_of(task, "started_at")) {
            l.run_s = now - *started;
        }
    }
    return l;
}

std::optional<double> longest(std::optional<double> a, std::optional<double> b) {
    if (!a) {
        return b;
    }
    return b ? std::max(*a, *b) : a;
}

// One line for the listed tasks of one array, `members` sorted by index.
QueueLine array_line(std::int64_t array_id, const std::vector<const json*>& members, double now) {
    std::vector<QueueLine> lines;
    std::vector<std::int64_t> indices;
    for (const json* t : members) {
        lines.push_back(task_line(*t, now));
        indices.push_back(array_of_task(*t)->index);
    }
    if (lines.size() == 1) {
        return lines.front();
    }
    QueueLine out = lines.front();
    out.id = format_array_ids(array_id, indices);
    std::map<std::string, int> counts;
    for (const QueueLine& l : lines) {
        ++counts[l.state];
        out.wait_s = longest(out.wait_s, l.wait_s);
        out.run_s = longest(out.run_s, l.run_s);
        out.priority = longest(out.priority, l.priority);
    }
    std::vector<std::string> states;
    for (const QueueLine& l : lines) {  // each state once, in the order of its first task
        if (std::find(states.begin(), states.end(), l.state) == states.end()) {
            states.push_back(l.state);
        }
    }
    std::stable_sort(states.begin(), states.end(), [](const std::string& a, const std::string& b) {
        return summary_rank(a) < summary_rank(b);
    });
    std::vector<std::string> parts;
    for (const std::string& s : states) {
        parts.push_back(fmt::format("{} {}", counts[s], s));
    }
    out.state = fmt::format("{}", fmt::join(parts, ", "));
    for (const QueueLine& l : lines) {
        if (is_waiting(l.state)) {
            out.reason = l.reason;
            break;
        }
    }
    return out;
}

std::string cell(const QueueLine& l, QueueField f) {
    switch (f) {
        case QueueField::Id: return l.id;
        case QueueField::User: return l.user;
        case QueueField::Name: return l.name;
        case QueueField::State: return l.state;
        case QueueField::Gpus: return l.gpus;
        case QueueField::Mem: return l.mem;
        case QueueField::Wait: return l.wait_s ? format_duration(*l.wait_s) : "-";
        case QueueField::Time: return l.run_s ? format_duration(*l.run_s) : "-";
        case QueueField::Priority: return l.priority ? fmt::format("{:.0f}", *l.priority) : "-";
        case QueueField::Reason: return l.reason.empty() ? "-" : l.reason;
    }
    return "-";
}

// The listed tasks as lines: an array's tasks are gathered into one line where its first listed
// task stands, unless they are expanded.
std::vector<QueueLine> gather(const json& tasks, bool expand_arrays, double now) {
    struct Item {
        const json* task = nullptr;         // a lone task
        std::optional<std::int64_t> array;  // or an array's tasks
        std::vector<const json*> members;
    };
    std::vector<Item> items;
    std::map<std::int64_t, std::size_t> array_item;
    for (const json& t : tasks) {
        const std::optional<ArrayMember> a = array_of_task(t);
        if (!a || expand_arrays) {
            items.push_back({&t, std::nullopt, {}});
            continue;
        }
        auto [it, added] = array_item.emplace(a->id, items.size());
        if (added) {
            items.push_back({nullptr, a->id, {}});
        }
        items[it->second].members.push_back(&t);
    }
    std::vector<QueueLine> lines;
    for (Item& item : items) {
        if (!item.array) {
            lines.push_back(task_line(*item.task, now));
            continue;
        }
        std::stable_sort(item.members.begin(), item.members.end(),
                         [](const json* a, const json* b) {
                             return array_of_task(*a)->index < array_of_task(*b)->index;
                         });
        lines.push_back(array_line(*item.array, item.members, now));
    }
    return lines;
}

// Narrowest a cut column becomes: enough to recognise a name or the start of a reason.
constexpr std::size_t kMinNameWidth = 8;
constexpr std::size_t kMinReasonWidth = 12;

// Cuts REASON, then NAME, until the widest line fits `width` (when it can).
void fit(std::vector<std::vector<std::string>>& rows, const std::vector<QueueField>& fields,
         std::size_t width) {
    std::vector<std::size_t> widths(fields.size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            widths[c] = std::max(widths[c], display_width(row[c]));
        }
    }
    std::size_t total = 2 * (fields.size() - 1);
    for (std::size_t w : widths) {
        total += w;
    }
    if (total <= width) {
        return;
    }
    std::size_t excess = total - width;
    for (QueueField cut : {QueueField::Reason, QueueField::Name}) {
        const std::size_t floor = cut == QueueField::Reason ? kMinReasonWidth : kMinNameWidth;
        for (std::size_t c = 0; c < fields.size() && excess > 0; ++c) {
            if (fields[c] != cut || widths[c] <= floor) {
                continue;
            }
            const std::size_t take = std::min(excess, widths[c] - floor);
            widths[c] -= take;
            excess -= take;
            for (std::size_t r = 1; r < rows.size(); ++r) {
                rows[r][c] = truncate(rows[r][c], widths[c]);
            }
        }
    }
}

// Columns as wide as their widest cell, two spaces apart.
std::vector<std::string> render(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            widths[c] = std::max(widths[c], display_width(row[c]));
        }
    }
    std::vector<std::string> out;
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) {
                line += std::string(widths[c] - display_width(row[c]) + 2, ' ');
            }
        }
        line.erase(line.find_last_not_of(' ') + 1);
        out.push_back(std::move(line));
    }
    return out;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
}

// The pieces of comma lists, trimmed, empty ones dropped.
std::vector<std::string> comma_pieces(const std::vector<std::string>& values) {
    std::vector<std::string> out;
    for (const std::string& v : values) {
        for (const std::string& piece : split_list(v, ',')) {
            const std::string_view p = trim(piece);
            if (!p.empty()) {
                out.emplace_back(p);
            }
        }
    }
    return out;
}

Result<std::vector<QueueField>> parse_codes(std::string_view spec) {
    std::vector<QueueField> fields;
    std::size_t i = 0;
    while (i < spec.size()) {
        const char c = spec[i];
        if (std::isspace(static_cast<unsigned char>(c)) != 0 || c == ',') {
            ++i;
            continue;
        }
        if (c != '%') {
            std::size_t end = spec.find_first_of(" \t,%", i);
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--format '{}': '{}' is not a %-code; give codes separated "
                                    "by spaces ({}) or a comma list of names ({})",
                                    spec, spec.substr(i, end - i), field_codes(), field_names()));
        }
        if (i + 1 == spec.size()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--format '{}' ends with a lone '%'; codes: {}", spec,
                                    field_codes()));
        }
        const char code = spec[i + 1];
        if (code == '.' || std::isdigit(static_cast<unsigned char>(code)) != 0) {
            std::size_t end = spec.find_first_of(" \t,", i);
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--format '{}': field widths ('{}') are not supported, "
                                    "columns take the width of their widest cell; write the "
                                    "code alone",
                                    spec, spec.substr(i, end - i)));
        }
        std::optional<QueueField> found;
        for (const FieldInfo& f : kFields) {
            if (f.code == code) {
                found = f.field;
            }
        }
        for (const auto& [alias, field] : kCodeAliases) {
            if (alias == code) {
                found = field;
            }
        }
        if (!found) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--format '{}': unknown code '%{}'; codes: {}", spec, code,
                                    field_codes()));
        }
        fields.push_back(*found);
        i += 2;
    }
    return fields;
}

Result<std::vector<QueueField>> parse_names(std::string_view spec) {
    std::vector<QueueField> fields;
    std::vector<std::string> names;
    for (const FieldInfo& f : kFields) {
        names.emplace_back(f.name);
    }
    for (const std::string& piece : comma_pieces({std::string(spec)})) {
        const std::string name = to_lower(piece);
        const auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) {
            const std::string near = closest_match(name, names);
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("unknown field '{}' in --format{}; fields: {}", piece,
                                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                    field_names()));
        }
        fields.push_back(kFields[it - names.begin()].field);
    }
    return fields;
}

}  // namespace

std::vector<QueueField> default_queue_fields() {
    std::vector<QueueField> out;
    for (const FieldInfo& f : kFields) {
        if (f.field != QueueField::Priority) {
            out.push_back(f.field);
        }
    }
    return out;
}

Result<std::vector<QueueField>> parse_queue_format(std::string_view spec) {
    auto fields = spec.find('%') != std::string_view::npos ? parse_codes(spec) : parse_names(spec);
    if (fields && fields->empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--format is empty; give a comma list of fields ({})",
                                field_names()));
    }
    return fields;
}

namespace {

// squeue's state codes and names (squeue -t PD, --states=RUNNING), each as CARMA's states. A
// pending Slurm job is queued, waiting to be relaunched after running out of memory, or held;
// one that ran out of memory is recovering (CARMA relaunches it) or failed when its attempts are
// spent; CARMA has no completing phase, so CG is running.
struct SlurmState {
    std::string_view code, name;
    std::string_view states;  // CARMA's, comma-separated
};
constexpr SlurmState kSlurmStates[] = {
    {"pd", "pending", "queued,recovering,held"},
    {"r", "running", "running"},
    {"cg", "completing", "running"},
    {"cd", "completed", "succeeded"},
    {"f", "failed", "failed"},
    {"ca", "cancelled", "cancelled"},
    {"to", "timeout", "timeout"},
    {"oom", "out_of_memory", "recovering,failed"},
    {"nf", "node_fail", "lost"},
    {"bf", "boot_fail", "lost"},
    {"dl", "deadline", "timeout"},
    {"pr", "preempted", "queued"},
    {"rq", "requeued", "queued"},
    {"rh", "requeue_hold", "held"},
    {"rv", "revoked", "rejected"},
};

}  // namespace

Result<std::vector<std::string>> parse_queue_states(const std::vector<std::string>& values) {
    const std::vector<std::string> known(std::begin(kStates), std::end(kStates));
    std::vector<std::string> states;
    auto add = [&](const std::string& state) {
        if (!contains(states, state)) {
            states.push_back(state);
        }
    };
    for (const std::string& piece : comma_pieces(values)) {
        const std::string state = to_lower(piece);
        if (contains(known, state)) {
            add(state);
            continue;
        }
        const auto slurm = std::find_if(
            std::begin(kSlurmStates), std::end(kSlurmStates),
            [&](const SlurmState& s) { return state == s.code || state == s.name; });
        if (slurm != std::end(kSlurmStates)) {
            for (const std::string& s : split_list(slurm->states, ',')) {
                add(s);
            }
            continue;
        }
        std::vector<std::string> words = known;
        for (const SlurmState& s : kSlurmStates) {
            words.emplace_back(s.name);  // the codes are too short to be near anything
        }
        const std::string near = closest_match(state, words);
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("unknown state '{}' in --state{}; states: {}, or Slurm's codes "
                                "and names (PD, R, CG, CD, F, CA, TO, OOM, NF; PENDING, RUNNING, "
                                "...)",
                                piece,
                                near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                fmt::join(known, ",")));
    }
    if (states.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--state is empty; give a comma list of states ({})",
                                fmt::join(known, ",")));
    }
    return states;
}

std::vector<std::string> parse_queue_users(const std::vector<std::string>& values) {
    return comma_pieces(values);
}

bool queue_states_need_finished(const std::vector<std::string>& states) {
    return std::any_of(states.begin(), states.end(), [](const std::string& s) {
        return !is_waiting(s) && s != "running";
    });
}

json filter_queue_tasks(const json& tasks, const QueueView& view) {
    json out = json::array();
    if (!tasks.is_array()) {
        return out;
    }
    for (const json& t : tasks) {
        if (!view.users.empty() && !contains(view.users, text_of(t, "user", ""))) {
            continue;
        }
        if (!view.states.empty() && !contains(view.states, text_of(t, "state", ""))) {
            continue;
        }
        out.push_back(t);
    }
    return out;
}

std::vector<std::string> queue_lines(const json& tasks, const QueueView& view, double now) {
    std::vector<QueueField> fields = view.fields.empty() ? default_queue_fields() : view.fields;
    if (view.fields.empty() && tasks.is_array() &&
        std::any_of(tasks.begin(), tasks.end(),
                    [](const json& t) { return number_of(t, "priority").has_value(); })) {
        fields.insert(std::find(fields.begin(), fields.end(), QueueField::Reason),
                      QueueField::Priority);
    }
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header;
    for (QueueField f : fields) {
        header.emplace_back(info(f).header);
    }
    rows.push_back(std::move(header));
    const json listed = filter_queue_tasks(tasks, view);
    for (const QueueLine& l : gather(listed, view.expand_arrays, now)) {
        std::vector<std::string> row;
        for (QueueField f : fields) {
            row.push_back(printable(cell(l, f)));  // names and messages: users' own text
        }
        rows.push_back(std::move(row));
    }
    if (view.width > 0) {
        fit(rows, fields, view.width);
    }
    return render(rows);
}

}  // namespace carma::cli
