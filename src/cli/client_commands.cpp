// The user commands of `carma` that talk to the daemon: submit, queue, show, cancel, logs, gpus
// and replay. They only format what the API returns (docs/api.md); every decision is the
// daemon's. Answers are read defensively: a field that is missing or of another type prints as
// "-" instead of aborting, so a newer daemon never crashes an older client. Text from the daemon
// is users' own (names, commands, messages): it reaches the terminal through printable()
// (core/text.h), in print_line() and TextTable; --json output and logs are printed as they came.

#include "cli/client_commands.h"

#include <pwd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "api/submit_env.h"
#include "api/task_file.h"
#include "cli/cells.h"
#include "cli/die.h"
#include "cli/json_read.h"
#include "cli/local_time.h"
#include "cli/queue_view.h"
#include "cli/task_select.h"
#include "core/controls.h"
#include "core/text.h"
#include "core/units.h"
#include "model/catalog.h"
#include "exec/self.h"
#include "sim/trace.h"

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kLogPollInterval = std::chrono::milliseconds(500);
constexpr auto kWaitPollInterval = std::chrono::seconds(1);
constexpr std::size_t kReasonWidth = 48;
constexpr int kMaxAttemptsLimit = 100;  // docs/api.md: max_attempts is 1..100
constexpr double kLongestTime = 1e11;   // seconds; ~3,000 years: beyond it a time is garbage
constexpr double kLongestReplay = 1e8;  // seconds; ~3 years of submissions is a mistaken scale

// ---- errors -------------------------------------------------------------------------------

// One line of output, through printable(): what a command prints of the daemon's answers.
template <typename... Args>
void print_line(std::FILE* out, fmt::format_string<Args...> format, Args&&... args) {
    fmt::print(out, "{}\n", printable(fmt::format(format, std::forward<Args>(args)...)));
}

std::string or_dash(const std::string& text) {
    return text.empty() ? "-" : text;
}

// "task 12 (resnet3)", the way every command names a task.
std::string task_label(const json& task) {
    const std::string name = text_of(task, "name", "");
    const std::string id = text_of(task, "id", "?");
    return name.empty() ? fmt::format("task {}", id) : fmt::format("task {} ({})", id, name);
}

// ---- formatting ---------------------------------------------------------------------------

std::string format_clock(std::optional<double> epoch) {
    if (!epoch || !std::isfinite(*epoch) || std::abs(*epoch) > kLongestTime) {
        return "-";
    }
    const auto t = static_cast<std::time_t>(*epoch);
    std::tm local{};
    if (::localtime_r(&t, &local) == nullptr) {
        return "-";
    }
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
    return buf;
}

std::string format_mib_or_dash(std::optional<std::int64_t> mib) {
    return mib ? format_mib(*mib) : "-";
}

std::string format_ratio(std::optional<double> value) {
    return value ? fmt::format("{:.2f}", *value) : "-";
}

std::string format_command(const json& argv) {
    std::vector<std::string> parts;
    for (const json& a : argv.is_array() ? argv : json::array()) {
        parts.push_back(shell_quote(a.is_string() ? a.get<std::string>() : a.dump()));
    }
    return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, " "));
}

// A plain-text table: columns as wide as their widest cell, two spaces apart; each cell through
// printable().
class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {}

    void add(std::vector<std::string> row) {
        row.resize(rows_.front().size());
        for (std::string& cell : row) {
            cell = printable(cell);
        }
        rows_.push_back(std::move(row));
    }

    void print(std::FILE* out = stdout) const {
        std::vector<std::size_t> width(rows_.front().size(), 0);
        for (const auto& row : rows_) {
            for (std::size_t c = 0; c < row.size(); ++c) {
                width[c] = std::max(width[c], display_width(row[c]));
            }
        }
        for (const auto& row : rows_) {
            std::string line;
            for (std::size_t c = 0; c < row.size(); ++c) {
                const bool last = c + 1 == row.size();
                line += row[c];
                if (!last) {
                    line += std::string(width[c] - display_width(row[c]) + 2, ' ');
                }
            }
            fmt::print(out, "{}\n", line);
        }
    }

private:
    std::vector<std::vector<std::string>> rows_;
};

void print_json(const json& doc) {
    fmt::print("{}\n", doc.dump(2));
}

// ---- shared options -----------------------------------------------------------------------

void add_socket_option(CLI::App* cmd, std::string& socket) {
    cmd->add_option(
        "--socket", socket,
        "The daemon's socket (default: $CARMA_SOCKET, else " + api::default_socket_path() + ")");
}

api::ApiClient connect(const std::string& socket_flag) {
    return api::ApiClient(api::resolve_socket_path(socket_flag));
}

// ---- submit -------------------------------------------------------------------------------

struct SubmitOptions {
    std::string socket;
    bool json = false;
    int gpus = 0;
    CLI::Option* gpus_option = nullptr;
    std::string memory;
    std::string name;
    std::string workdir;
    std::vector<std::string> env;
    int max_attempts = 0;
    CLI::Option* max_attempts_option = nullptr;
    std::string workload;
    std::string export_spec = "ALL";
    std::string conda;
    std::string venv;
    std::string time_limit;
    std::vector<std::string> after;
    bool hold = false;
    std::string array;
    std::vector<std::string> args;  // the command, or one task file
};

// The flags given on the command line override a task file's fields.
void apply_flags(const SubmitOptions& o, const fs::path& cwd, api::SubmitRequest& r) {
    if (o.gpus_option->count() > 0) {
        r.gpus = or_die(check_gpus_flag(o.gpus));
    }
    if (!o.memory.empty()) {
        r.memory.declared_mib = or_die(parse_mem_flag(o.memory));
    }
    if (!o.name.empty()) {
        r.name = o.name;
    }
    if (!o.workdir.empty()) {
        r.workdir = (cwd / o.workdir).lexically_normal().string();  // absolute stays absolute
    }
    for (const std::string& pair : o.env) {
        const std::size_t eq = pair.find('=');
        if (eq == std::string::npos || eq == 0) {
            die(fmt::format("--env '{}' must be NAME=VALUE", pair));
        }
        r.env[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
    if (o.max_attempts_option->count() > 0) {
        if (o.max_attempts < 1 || o.max_attempts > kMaxAttemptsLimit) {
            die(fmt::format("--max-attempts must be from 1 to {} (got {})", kMaxAttemptsLimit,
                            o.max_attempts));
        }
        r.max_attempts = o.max_attempts;
    }
    if (!o.workload.empty()) {
        r.workload = o.workload;
    }
    if (!o.conda.empty()) {
        r.conda = o.conda;
        r.venv.clear();
    }
    if (!o.venv.empty()) {
        r.venv = (cwd / o.venv).lexically_normal().string();
        r.conda.clear();
    }
    if (!o.time_limit.empty()) {
        r.time_limit_s = or_die(parse_time_limit(o.time_limit));
    }
    for (const std::string& list : o.after) {
        // sbatch writes afterok:12:13; commas are accepted too.
        for (const std::string& word : split_list(list, list.find(':') != std::string::npos ? ':' : ',')) {
            if (word.empty()) {
                continue;
            }
            const TaskRef ref = or_die(parse_task_ref(word));
            if (!ref.plain()) {
                die(fmt::format("--after {}: give task ids (12:13); an array's members are "
                                "its own ids, listed by `carma queue --wide`",
                                word));
            }
            r.after.push_back(ref.id);
        }
    }
    if (o.hold) {
        r.hold = true;
    }
    if (!o.array.empty()) {
        or_die(parse_array_indices(o.array));
        r.array = o.array;
    }
}

// What the submitter's side contributes, as sbatch does: the exported environment (the task
// file's and --env's variables win), the Python environment's prefix, and the executable found
// in the submitter's PATH (the environment's bin first).
void apply_submitter_side(const SubmitOptions& o, const fs::path& cwd, api::SubmitRequest& r) {
    const api::EnvMap caller = api::current_environment();
    const api::ExportedEnv exported = or_die(api::export_environment(o.export_spec, caller));
    if (!exported.dropped.empty()) {
        print_line(stderr, "carma: note: not passed to the task: {}",
                   fmt::join(exported.dropped, "; "));
    }
    for (const auto& [k, v] : exported.vars) {
        r.env.emplace(k, v);  // keeps what the file or --env set
    }
    if (auto ok = api::resolve_environment_and_command(r, caller, cwd); !ok) {
        die(ok.error().message);
    }
}

api::SubmitRequest build_submit_request(const SubmitOptions& o) {
    if (o.args.empty()) {
        die("nothing to submit; write `carma submit [options] -- COMMAND ARGS...` or "
            "`carma submit task.yaml`");
    }
    const fs::path cwd = fs::current_path();
    api::SubmitRequest r;
    if (o.args.size() == 1 && api::is_task_file_name(o.args.front())) {
        r = or_die(api::load_task_file(o.args.front(), cwd));
    } else {
        r.command = o.args;
        r.workdir = cwd.string();
    }
    apply_flags(o, cwd, r);
    apply_submitter_side(o, cwd, r);
    return r;
}

int run_submit(const SubmitOptions& o) {
    const api::SubmitRequest request = build_submit_request(o);
    api::ApiClient client = connect(o.socket);
    const json task = or_die(client.submit(api::request_body(request)));
    if (o.json) {
        print_json(task);
    } else {
        print_line(stdout, "submitted {}", task_label(task));
    }
    return 0;
}

// ---- queue --------------------------------------------------------------------------------
// The table is cli/queue_view (pure); here: the options, the terminal and --watch.

struct QueueOptions {
    std::string socket;
    bool all = false;
    bool json = false;
    std::vector<std::string> users;
    std::vector<std::string> states;
    bool me = false;
    bool wide = false;
    bool expand_arrays = false;
    std::string format;
    CLI::Option* format_option = nullptr;
    double watch_s = 0;
    CLI::Option* watch_option = nullptr;
};

// The caller's login as the daemon names it: from the uid the socket carries.
std::string login_name() {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    const uid_t uid = ::geteuid();
    if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

// A terminal's width, which long names and reasons are cut to; 0 (nothing cut) when stdout is
// not a terminal, so a pipe or a file gets every character.
std::size_t terminal_width() {
    if (::isatty(STDOUT_FILENO) == 0) {
        return 0;
    }
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        return ws.ws_col;
    }
    return 80;
}

QueueView queue_view(const QueueOptions& o) {
    QueueView v;
    v.users = parse_queue_users(o.users);
    if (o.me) {
        v.users.push_back(login_name());
    }
    if (!o.states.empty()) {
        v.states = or_die(parse_queue_states(o.states));
    }
    if (o.format_option->count() > 0) {
        v.fields = or_die(parse_queue_format(o.format));
    }
    v.expand_arrays = o.expand_arrays || o.wide;
    return v;
}

// One listing as text: the table, or with --json the answer with the tasks the filters keep.
std::string queue_text(const json& answer, const QueueOptions& o, QueueView v) {
    if (o.json) {
        if (v.users.empty() && v.states.empty()) {
            return answer.dump(2) + "\n";
        }
        json kept = answer;
        kept["tasks"] = filter_queue_tasks(array_of(answer, "tasks"), v);
        return kept.dump(2) + "\n";
    }
    v.width = o.wide ? 0 : terminal_width();  // again each time: a terminal may be resized
    std::string out;
    for (const std::string& line : queue_lines(array_of(answer, "tasks"), v, now_epoch())) {
        out += line + "\n";
    }
    return out;
}

// Refreshes every --watch seconds until interrupted. On a terminal the screen is redrawn in
// place (home, each line cleared to its end, the rest cleared); elsewhere each listing follows
// the last after a blank line. A refused connection (a daemon restarting) is shown and waited
// out; any other error ends the watch.
int watch_queue(api::ApiClient& client, const QueueOptions& o, const QueueView& v, bool all) {
    const bool terminal = ::isatty(STDOUT_FILENO) != 0;
    const auto period = std::chrono::duration<double>(o.watch_s);
    for (bool printed = false;; std::this_thread::sleep_for(period)) {
        auto answer = client.list_tasks(all);
        if (!answer && answer.error().code != ErrorCode::Io) {
            die(answer.error().message);
        }
        std::string text;
        if (answer) {
            text = queue_text(*answer, o, v);
        } else {
            text = fmt::format("carma: {}; still watching\n", printable(answer.error().message));
            if (!terminal) {
                fmt::print(stderr, "{}", text);  // a pipe gets tables only
                continue;
            }
        }
        if (terminal) {
            std::string screen = fmt::format("Every {:g}s: carma queue    {}\033[K\n\033[K\n",
                                             o.watch_s, format_clock(now_epoch()));
            for (const std::string& line : split_list(text, '\n')) {
                screen += line + "\033[K\n";
            }
            screen.resize(screen.size() - 4);  // the last piece is empty: no line after it
            text = "\033[H" + screen + "\033[J";
        } else if (printed) {
            text = "\n" + text;
        }
        printed = true;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    }
}

int run_queue(const QueueOptions& o) {
    const QueueView view = queue_view(o);
    // Finished tasks are only in the full listing.
    const bool all = o.all || queue_states_need_finished(view.states);
    api::ApiClient client = connect(o.socket);
    if (o.watch_option->count() > 0) {
        if (!(o.watch_s >= 0.1) || !std::isfinite(o.watch_s)) {
            die(fmt::format("--watch {:g}: give the seconds between refreshes, 0.1 or more",
                            o.watch_s));
        }
        return watch_queue(client, o, view, all);
    }
    const std::string text = queue_text(or_die(client.list_tasks(all)), o, view);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

// ---- show ---------------------------------------------------------------------------------

std::string memory_summary(const json& memory) {
    const std::pair<const char*, const char*> parts[] = {{"declared_mib", "declared"},
                                                         {"profiled_mib", "profiled"},
                                                         {"horus_mib", "horus"},
                                                         {"faketensor_mib", "faketensor"},
                                                         {"gpumemnet_mib", "gpumemnet"}};
    std::vector<std::string> given;
    for (const auto& [key, label] : parts) {
        if (std::optional<std::int64_t> mib = integer_of(memory, key)) {
            given.push_back(fmt::format("{} {}", label, format_mib(*mib)));
        }
    }
    return given.empty() ? "not given" : fmt::format("{}", fmt::join(given, ", "));
}

// What the daemon plans with: "need 13,236 MiB + 1,024 MiB margin; run time 10m00s; activity
// 0.71", or "-" from a daemon that does not learn.
std::string knowledge_summary(const json& learned) {
    if (!learned.is_object()) {
        return "-";
    }
    const std::optional<std::int64_t> need = integer_of(learned, "need_mib");
    std::string out = need ? fmt::format("need {} + {} margin", format_mib(*need),
                                         format_mib_or_dash(integer_of(learned, "margin_mib")))
                           : "need unknown";
    if (const std::int64_t bound = integer_of(learned, "lower_bound_mib").value_or(0); bound > 0) {
        out += fmt::format(", at least {}", format_mib(bound));
    }
    if (const std::optional<double> d = number_of(learned, "duration_s")) {
        out += "; run time " + format_duration(*d);
    }
    if (const std::optional<double> a = number_of(learned, "activity")) {
        out += "; activity " + format_ratio(a);
    }
    return out;
}

std::string env_summary(const json& task) {
    const json* env = member(task, "env");
    std::vector<std::string> pairs;
    if (env != nullptr && env->is_object()) {
        for (const auto& [key, value] : env->items()) {
            pairs.push_back(key + "=" +
                            (value.is_string() ? value.get<std::string>() : value.dump()));
        }
    }
    return pairs.empty() ? "-" : fmt::format("{}", fmt::join(pairs, " "));
}

std::string attempt_exit(const json& attempt) {
    if (std::optional<std::int64_t> sig = integer_of(attempt, "signal")) {
        return fmt::format("signal {}", *sig);
    }
    return text_of(attempt, "exit_code");
}

std::string attempt_gpus(const json& attempt) {
    std::vector<std::string> ids;
    for (const json& g : array_of(attempt, "gpus")) {
        ids.push_back(g.dump());
    }
    return ids.empty() ? "-" : fmt::format("{}", fmt::join(ids, ","));
}

// "GPU0 13,236 MiB, GPU1 13,180 MiB", or "-" before the task was seen on a GPU, "unobserved"
// when it ended without being seen (print_attempts says why).
std::string attempt_peak(const json& attempt) {
    if (!text_of(attempt, "unobserved", "").empty()) {
        return "unobserved";
    }
    const json* peak = member(attempt, "peak_mib");
    if (peak == nullptr || !peak->is_object() || peak->empty()) {
        return "-";
    }
    std::vector<std::string> parts;
    for (const auto& [gpu, mib] : peak->items()) {
        parts.push_back(fmt::format("GPU{} {}", gpu,
                                    mib.is_number() ? format_mib(mib.get<MiB>()) : "?"));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

void print_attempts(const json& attempts, double now) {
    if (attempts.empty()) {
        fmt::print("\nno attempts yet\n");
        return;
    }
    fmt::print("\n");
    TextTable table({"ATTEMPT", "GPUS", "STARTED", "ENDED", "TIME", "OUTCOME", "EXIT",
                     "RECOVERED", "PEAK GPU MEMORY"});
    for (const json& a : attempts) {
        const std::optional<double> started = number_of(a, "started_at");
        const std::optional<double> ended = number_of(a, "ended_at");
        const std::string time = started ? format_duration(ended.value_or(now) - *started) : "-";
        const std::string outcome = text_of(a, "outcome", "");
        table.add({text_of(a, "number"), attempt_gpus(a), format_clock(started),
                   format_clock(ended), time, outcome.empty() ? "running" : outcome,
                   attempt_exit(a), flag_of(a, "recovered") ? "yes" : "no", attempt_peak(a)});
    }
    table.print();
    for (const json& a : attempts) {
        if (const std::string why = text_of(a, "unobserved_why", ""); !why.empty()) {
            print_line(stdout, "attempt {} unobserved ({}): {}", text_of(a, "number"),
                       text_of(a, "unobserved"), why);
        }
    }
}

void print_task(const json& t, double now) {
    const std::optional<double> submitted = number_of(t, "submitted_at");
    const json* memory = member(t, "memory");
    print_line(stdout, "{}", task_label(t));
    print_line(stdout, "  state       {}", text_of(t, "state"));
    print_line(stdout, "  message     {}", or_dash(text_of(t, "message")));
    print_line(stdout, "  user        {} (uid {}, gid {})", text_of(t, "user"), text_of(t, "uid"),
               text_of(t, "gid"));
    const json* command = member(t, "command");
    print_line(stdout, "  command     {}", format_command(command != nullptr ? *command : json()));
    print_line(stdout, "  workdir     {}", text_of(t, "workdir"));
    print_line(stdout, "  gpus        {}", text_of(t, "gpus"));
    print_line(stdout, "  memory      {}",
               memory != nullptr ? memory_summary(*memory) : "not given");
    const json* learned = member(t, "learned");
    print_line(stdout, "  knowledge   {}", learned != nullptr ? knowledge_summary(*learned) : "-");
    print_line(stdout, "  basis       {}",
               learned != nullptr ? or_dash(text_of(*learned, "basis", "")) : "-");
    print_line(stdout, "  env         {}", env_summary(t));
    print_line(stdout, "  workload    {}", or_dash(text_of(t, "workload")));
    // Scheduling controls, only where given.
    if (const std::optional<double> limit = number_of(t, "time_limit_s")) {
        print_line(stdout, "  time limit  {}", format_duration(*limit));
    }
    if (const json* after = member(t, "after"); after != nullptr && after->is_array() &&
                                                !after->empty()) {
        std::vector<std::string> ids;
        for (const json& id : *after) {
            ids.push_back(id.dump());
        }
        print_line(stdout, "  after       {} (starts once they succeeded)", fmt::join(ids, ", "));
    }
    if (const json* array = member(t, "array"); array != nullptr && array->is_object()) {
        print_line(stdout, "  array       {}_{} (CARMA_ARRAY_INDEX={})", text_of(*array, "id"),
                   text_of(*array, "index"), text_of(*array, "index"));
    }
    print_line(stdout, "  attempts    {} of at most {}", text_of(t, "attempts", "0"),
               text_of(t, "max_attempts"));
    print_line(stdout, "  submitted   {}{}", format_clock(submitted),
               submitted ? fmt::format(" ({} ago)", format_duration(now - *submitted)) : "");
    print_line(stdout, "  finished    {}", format_clock(number_of(t, "finished_at")));
    print_attempts(array_of(t, "attempt_list"), now);
}

struct ShowOptions {
    std::string socket;
    TaskId id = 0;
    bool json = false;
};

int run_show(const ShowOptions& o) {
    api::ApiClient client = connect(o.socket);
    const json task = or_die(client.task(o.id));
    if (o.json) {
        print_json(task);
    } else {
        print_task(task, now_epoch());
    }
    return 0;
}

// ---- cancel -------------------------------------------------------------------------------

// cancel, hold and release: the same selection of tasks, one request per task.
enum class TaskAction { Cancel, Hold, Release };

struct SelectOptions {
    std::string socket;
    std::vector<std::string> ids;
    std::vector<std::string> users;
    std::vector<std::string> states;
    bool me = false;
    bool json = false;
};

TaskFilter build_filter(const SelectOptions& o) {
    TaskFilter filter;
    for (const std::string& word : o.ids) {
        filter.refs.push_back(or_die(parse_task_ref(word)));
    }
    // The same words as `carma queue --user/--state`.
    filter.users = parse_queue_users(o.users);
    if (o.me) {
        filter.users.push_back(login_name());
    }
    if (!o.states.empty()) {
        filter.states = or_die(parse_queue_states(o.states));
    }
    if (auto ok = check_filter(filter); !ok) {
        die(ok.error().message);
    }
    return filter;
}

void report_action(TaskAction action, const json& task) {
    const std::string state = text_of(task, "state");
    if (action == TaskAction::Hold) {
        print_line(stdout, "held {}", task_label(task));
    } else if (action == TaskAction::Release) {
        print_line(stdout, "released {}", task_label(task));
    } else if (state == "cancelled") {
        print_line(stdout, "cancelled {}", task_label(task));
    } else {
        // Running tasks get SIGTERM and keep their state until the daemon sees them exit.
        print_line(stdout, "stopping {}; it stays {} until its processes have exited",
                   task_label(task), state);
    }
}

int run_task_action(TaskAction action, const SelectOptions& o) {
    const TaskFilter filter = build_filter(o);
    api::ApiClient client = connect(o.socket);
    std::vector<TaskId> ids;
    if (needs_task_list(filter)) {
        const json listed = or_die(client.list_tasks(false));
        ids = select_tasks(array_of(listed, "tasks"), filter);
        if (ids.empty()) {
            fmt::print(stderr, "carma: no unfinished task matches\n");
            return 1;
        }
    } else {
        for (const TaskRef& r : filter.refs) {
            ids.push_back(r.id);
        }
    }
    json answers = json::array();
    int failures = 0;
    for (TaskId id : ids) {
        auto task = action == TaskAction::Cancel ? client.cancel(id)
                                                 : client.hold(id, action == TaskAction::Hold);
        if (!task && ids.size() == 1) {
            die(task.error().message);  // one task: its error is the command's
        }
        if (!task) {
            print_line(stderr, "carma: task {}: {}", id, task.error().message);
            ++failures;
            continue;
        }
        if (o.json) {
            answers.push_back(*task);
        } else {
            report_action(action, *task);
        }
    }
    if (o.json) {
        print_json(answers.size() == 1 && ids.size() == 1 ? answers.front() : answers);
    }
    return failures == 0 ? 0 : 1;
}

// ---- logs ---------------------------------------------------------------------------------

struct LogsOptions {
    std::string socket;
    TaskId id = 0;
    bool stderr_stream = false;
    int attempt = 0;  // 0: the latest
    bool follow = false;
};

// A log is the task's own output, which only its owner and root may read: printed as `cat`
// would, escapes and all (programs colour their output and draw progress bars). What carma adds
// around it (the end of a followed log) goes through print_line().
void write_out(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

api::LogRequest log_request(const LogsOptions& o, int attempt, std::uint64_t offset) {
    api::LogRequest r;
    r.stream = o.stderr_stream ? api::LogStream::Stderr : api::LogStream::Stdout;
    if (attempt > 0) {
        r.attempt = attempt;
    }
    r.offset = offset;
    return r;
}

// Reads one log from `offset` to its current end; returns the new offset.
std::uint64_t drain_log(api::ApiClient& client, const LogsOptions& o, int attempt,
                        std::uint64_t offset) {
    for (;;) {
        const api::LogChunk chunk = or_die(client.logs(o.id, log_request(o, attempt, offset)));
        write_out(chunk.text);
        offset += chunk.text.size();
        if (chunk.text.empty() || offset >= chunk.log_size) {
            return offset;
        }
    }
}

// Polls the task and its log until the task is final and the log drained. Without --attempt it
// moves on to each new attempt (after an OOM relaunch) once the previous one is drained.
// The end of a followed log: how the task ended, and for one that did not succeed the last lines
// of its stderr (a failure usually says why there, not on stdout). Exit status 1 then.
int report_end(api::ApiClient& client, const LogsOptions& o, const json& task, int attempt) {
    const std::string state = text_of(task, "state");
    print_line(stderr, "carma: {} {}: {}", task_label(task), state, text_of(task, "message"));
    if (state == "succeeded") {
        return 0;
    }
    if (!o.stderr_stream && attempt > 0) {
        api::LogRequest tail{api::LogStream::Stderr, attempt, 0};
        if (auto size = client.logs(o.id, tail); size && size->log_size > 0) {
            constexpr std::uint64_t kTailBytes = 4096;
            tail.offset = size->log_size > kTailBytes ? size->log_size - kTailBytes : 0;
            if (auto chunk = client.logs(o.id, tail); chunk) {
                std::vector<std::string> lines;
                std::istringstream in(chunk->text);
                for (std::string line; std::getline(in, line);) {
                    lines.push_back(line);
                }
                const std::size_t keep = std::min<std::size_t>(lines.size(), 10);
                fmt::print(stderr, "carma: the last {} line(s) of its stderr (`carma logs {} "
                                   "--stderr` has all):\n",
                           keep, o.id);
                for (std::size_t i = lines.size() - keep; i < lines.size(); ++i) {
                    fmt::print(stderr, "  {}\n", lines[i]);  // the log itself, as write_out
                }
            }
        }
    }
    return 1;
}

int follow_logs(api::ApiClient& client, const LogsOptions& o) {
    int current = 0;
    std::uint64_t offset = 0;
    for (;;) {
        const json task = or_die(client.task(o.id));
        const int latest = static_cast<int>(integer_of(task, "attempts").value_or(0));
        const bool final = api::is_final_state(text_of(task, "state"));
        const int wanted = o.attempt > 0 ? o.attempt : latest;
        if (wanted > latest || wanted == 0) {
            if (final && wanted == 0) {
                return report_end(client, o, task, 0);  // ended before any attempt (cancelled)
            }
            if (final) {
                die(fmt::format("{} ended with {} attempt(s); there is no log for attempt {}",
                                task_label(task), latest, wanted));
            }
            std::this_thread::sleep_for(kLogPollInterval);
            continue;
        }
        if (wanted != current) {
            if (current > 0) {
                drain_log(client, o, current, offset);
                print_line(stderr, "carma: --- attempt {} of {} ---", wanted, task_label(task));
            }
            current = wanted;
            offset = 0;
        }
        auto answer = client.logs(o.id, log_request(o, current, offset));
        if (!answer && answer.error().code == ErrorCode::NotFound && !final) {
            // A just-launched attempt may not have its log file yet.
            std::this_thread::sleep_for(kLogPollInterval);
            continue;
        }
        const api::LogChunk chunk = or_die(std::move(answer));
        write_out(chunk.text);
        offset += chunk.text.size();
        const bool drained = offset >= chunk.log_size;
        // Only the task's state read *before* the log proves the log complete: a final state in
        // the log's header may hide an attempt started since the task was read.
        if (final && drained) {
            return report_end(client, o, task, current);
        }
        if (drained && !api::is_final_state(chunk.task_state)) {
            std::this_thread::sleep_for(kLogPollInterval);
        }
    }
}

int run_logs(const LogsOptions& o) {
    if (o.attempt < 0) {
        die(fmt::format("--attempt must be 1 or more (got {})", o.attempt));
    }
    api::ApiClient client = connect(o.socket);
    if (o.follow) {
        return follow_logs(client, o);
    }
    drain_log(client, o, o.attempt, 0);
    return 0;
}

// ---- gpus ---------------------------------------------------------------------------------

std::string memory_cell(const json& gpu) {
    const std::optional<std::int64_t> total = integer_of(gpu, "total_mib");
    const std::optional<std::int64_t> free = integer_of(gpu, "free_mib");
    std::optional<std::int64_t> used = integer_of(gpu, "used_mib");
    if (!used && total && free) {
        used = *total - *free;
    }
    if (!total || !used) {
        return "-";
    }
    return fmt::format("{}/{}", format_mib(*used), format_mib(*total));
}

std::string risk_cell(const json& window, const char* metric) {
    const json* stats = member(window, metric);
    return stats != nullptr ? format_ratio(number_of(*stats, "risk")) : "-";
}

std::string verdict_cell(const json& gpu) {
    const json* risk = member(gpu, "risk");
    if (risk == nullptr) {
        return "-";
    }
    if (!flag_of(*risk, "high")) {
        return "ok";
    }
    const std::string reason = text_of(*risk, "reason", "");
    return truncate(reason.empty() ? "high" : "high: " + reason, kReasonWidth);
}

std::string tasks_cell(const json& gpu) {
    std::vector<std::string> ids;
    for (const json& id : array_of(gpu, "tasks")) {
        ids.push_back(id.dump());
    }
    return ids.empty() ? "-" : fmt::format("{}", fmt::join(ids, ","));
}

// "SMACT dcgm, SMOCC dcgm, DRAMA dcgm, util dcgm" from a GPU's "sources".
std::string sources_line(const json& gpu) {
    const json* sources = member(gpu, "sources");
    if (sources == nullptr) {
        return "unknown (no sample yet)";
    }
    return fmt::format("SMACT {}, SMOCC {}, DRAMA {}, util {}, power {}, memory {}",
                       text_of(*sources, "smact"), text_of(*sources, "smocc"),
                       text_of(*sources, "drama"), text_of(*sources, "util"),
                       text_of(*sources, "power"), text_of(*sources, "memory"));
}

std::string health_cell(const json& gpu) {
    const json* health = member(gpu, "health");
    if (health == nullptr) {
        return "-";
    }
    return text_of(*health, "state", "-");
}

void print_gpus(const json& answer) {
    const std::string backend = text_of(answer, "backend");
    print_line(stdout, "backend: {}", backend);
    if (backend.starts_with("emulated")) {
        fmt::print("EMULATED GPUs: not real hardware; only carma-fakejob processes use them\n");
    }
    TextTable table({"GPU", "NAME", "HEALTH", "MEMORY USED/TOTAL", "AVAILABLE", "UTIL", "SAMPLES",
                     "SMACT", "SMOCC", "DRAMA", "LOCKED", "TASKS", "RISK"});
    for (const json& g : array_of(answer, "gpus")) {
        const json empty = json::object();
        const json* window = member(g, "window");
        const json& w = window != nullptr ? *window : empty;
        table.add({text_of(g, "index"), text_of(g, "name"), health_cell(g), memory_cell(g),
                   format_mib_or_dash(integer_of(g, "available_mib")),
                   format_ratio(number_of(g, "util")), text_of(w, "samples"), risk_cell(w, "smact"),
                   risk_cell(w, "smocc"), risk_cell(w, "drama"),
                   flag_of(g, "locked") ? "warm-up" : "-", tasks_cell(g), verdict_cell(g)});
    }
    table.print();
    fmt::print(
        "SMACT/SMOCC/DRAMA: each one's risk statistic over the window, which the risk "
        "filter compares; '-' = unknown\n");
    // Where each metric comes from and the risk rule that follows, per GPU: nothing silent.
    for (const json& g : array_of(answer, "gpus")) {
        const json* risk = member(g, "risk");
        const json* health = member(g, "health");
        print_line(stdout, "GPU {}: {}", text_of(g, "index"), sources_line(g));
        print_line(stdout, "  risk rule: {}",
                   risk != nullptr ? text_of(*risk, "rule_text", "-") : "-");
        if (health != nullptr && !text_of(*health, "reason", "").empty()) {
            print_line(stdout, "  {}: {}", text_of(*health, "state"), text_of(*health, "reason"));
        }
        // Processes CARMA did not start: their memory is taken and never planned into.
        for (const json& f : array_of(g, "foreign")) {
            print_line(stdout, "  foreign: pid {} user {} holds {} (not a CARMA task; never "
                               "planned into)",
                       text_of(f, "pid"), text_of(f, "user", "?"),
                       format_mib_or_dash(integer_of(f, "used_mib")));
        }
    }
}

struct GpusOptions {
    std::string socket;
    bool json = false;
};

int run_gpus(const GpusOptions& o) {
    api::ApiClient client = connect(o.socket);
    const json answer = or_die(client.gpus());
    if (o.json) {
        print_json(answer);
    } else {
        print_gpus(answer);
    }
    return 0;
}

// ---- replay -------------------------------------------------------------------------------

struct ReplayOptions {
    std::string socket;
    std::string trace;
    double time_scale = 1;
    CLI::Option* time_scale_option = nullptr;  // not given: the daemon's time scale
    bool dry_run = false;
    bool wait = false;
};

// carma-fakejob is installed next to carma; the daemon runs it, so it must be an absolute path.
// $CARMA_FAKEJOB overrides that, for other layouts and for tests.
fs::path fakejob_path() {
    if (const char* env = std::getenv("CARMA_FAKEJOB"); env != nullptr && env[0] != '\0') {
        return fs::absolute(env);
    }
    return or_die(exec::this_executable()).parent_path() / "carma-fakejob";
}

std::string format_seconds(double s) {
    return fmt::format("{:g}", s);
}

api::SubmitRequest replay_request(const sim::TraceEntry& entry, const model::Catalog& catalog,
                                  const fs::path& fakejob, const fs::path& cwd) {
    const model::WorkloadProfile profile = sim::resolve_profile(entry, catalog);
    const bool known = catalog.find(entry.task_name) != nullptr;
    api::SubmitRequest r;
    r.name = entry.task_name;
    r.command = {fakejob.string(), "--profile", entry.task_name};
    if (!known) {
        // The fake job cannot look this task up; give it what the trace row says.
        r.command.insert(r.command.end(), {"--duration-s", format_seconds(profile.t_solo_s),
                                           "--memory", fmt::format("{}MiB", profile.m_peak_mib)});
        if (!entry.task_class.empty()) {
            r.command.insert(r.command.end(), {"--class", entry.task_class});
        }
    } else {
        r.workload = entry.task_name;
        const model::WorkloadProfile* catalog_profile = catalog.find(entry.task_name);
        if (entry.standalone_s && std::abs(*entry.standalone_s - catalog_profile->t_solo_s) > 0.5) {
            // The trace shortens or lengthens a known workload (the demo trace does).
            r.command.insert(r.command.end(), {"--duration-s", format_seconds(profile.t_solo_s)});
        }
    }
    r.gpus = profile.gpus;
    r.memory = model::task_spec_for(profile).memory;
    r.memory.model.reset();
    if (profile.m_peak_mib > 0) {
        r.memory.declared_mib = profile.m_peak_mib;  // so the oracle policies know it
    } else {
        r.memory.profiled_mib.reset();  // the row gave no memory: nothing is known
    }
    r.workdir = cwd.string();
    return r;
}

std::string describe_request(const api::SubmitRequest& r) {
    const int gpus = r.gpus.value_or(1);
    return fmt::format(
        "{} GPU{}, {}", gpus, gpus == 1 ? "" : "s",
        r.memory.declared_mib ? format_mib(*r.memory.declared_mib) : std::string("memory unknown"));
}

struct Submitted {
    TaskId id = 0;
    std::string name;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Tallies of the final tasks, for the summary line.
struct ReplaySummary {
    std::map<std::string, int> by_state;
    long long attempts = 0;
    long long oom_attempts = 0;
    std::optional<double> first_submit;
    std::optional<double> last_finish;
};

// core::to_string(AttemptOutcome::OutOfMemory) is "out-of-memory"; "oom" is its short form.
bool is_oom_outcome(std::string_view outcome) {
    return outcome == "out-of-memory" || outcome == "oom";
}

void tally(const json& task, ReplaySummary& s) {
    ++s.by_state[text_of(task, "state")];
    s.attempts += integer_of(task, "attempts").value_or(0);
    for (const json& a : array_of(task, "attempt_list")) {
        s.oom_attempts += is_oom_outcome(text_of(a, "outcome", "")) ? 1 : 0;
    }
    if (std::optional<double> t = number_of(task, "submitted_at")) {
        s.first_submit = std::min(s.first_submit.value_or(*t), *t);
    }
    if (std::optional<double> t = number_of(task, "finished_at")) {
        s.last_finish = std::max(s.last_finish.value_or(*t), *t);
    }
}

void print_summary(const std::string& trace, std::size_t count, double k, const ReplaySummary& s) {
    auto n = [&](const char* state) {
        auto it = s.by_state.find(state);
        return it == s.by_state.end() ? 0 : it->second;
    };
    fmt::print(
        "replay of {} done: {} tasks: {} succeeded, {} failed, {} cancelled, {} lost, {} "
        "rejected\n",
        trace, count, n("succeeded"), n("failed"), n("cancelled"), n("lost"), n("rejected"));
    fmt::print("attempts: {} ({} out of memory)\n", s.attempts, s.oom_attempts);
    if (s.first_submit && s.last_finish) {
        // The daemon's clock is the wall clock; the simulator's is trace time, K times longer.
        const double wall = *s.last_finish - *s.first_submit;
        fmt::print("makespan: {} (first submission to last finish){}\n", format_duration(wall),
                   k == 1 ? std::string()
                          : fmt::format(", {} in trace time at time scale {}",
                                        format_duration(wall * k), k));
    }
}

// Waits until every submitted task is final, reporting each as it finishes. A finish line is
// stamped with the task's own finished_at, against the replay's start on the wall clock
// (`start_unix`; the daemon's clock is this machine's), not with when the poll saw it.
void wait_for_tasks(api::ApiClient& client, const std::vector<Submitted>& submitted,
                    Clock::time_point start, double start_unix) {
    std::map<TaskId, std::string> pending;
    for (const Submitted& s : submitted) {
        pending.emplace(s.id, s.name);
    }
    while (!pending.empty()) {
        const json answer = or_die(client.list_tasks(true));
        std::map<TaskId, std::string> unseen = pending;
        std::vector<std::pair<double, std::string>> finished;  // stamp, line
        for (const json& t : array_of(answer, "tasks")) {
            const TaskId id = integer_of(t, "id").value_or(-1);
            unseen.erase(id);
            auto it = pending.find(id);
            if (it != pending.end() && api::is_final_state(text_of(t, "state"))) {
                const std::optional<double> at = number_of(t, "finished_at");
                const double stamp = at ? *at - start_unix : seconds_since(start);
                finished.emplace_back(stamp, fmt::format("[{:>9.1f}s] {} {} after {} attempt(s)",
                                                         stamp, task_label(t), text_of(t, "state"),
                                                         text_of(t, "attempts", "0")));
                pending.erase(it);
            }
        }
        // Tasks seen in one poll are listed in the order they finished.
        std::stable_sort(finished.begin(), finished.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& [stamp, line] : finished) {
            print_line(stdout, "{}", line);
        }
        // A task the daemon no longer lists (its state was lost) would be waited for forever.
        for (const auto& [id, name] : unseen) {
            print_line(stderr, "carma: task {} ({}) is no longer known to the daemon", id, name);
            pending.erase(id);
        }
        std::fflush(stdout);
        if (!pending.empty()) {
            std::this_thread::sleep_for(kWaitPollInterval);
        }
    }
}

void print_dry_run(const sim::Trace& trace, const std::vector<api::SubmitRequest>& requests,
                   double time_scale) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
        fmt::print("[{:>9.1f}s] would submit {}: {}: {}\n", trace.entries[i].submit_s / time_scale,
                   requests[i].name, describe_request(requests[i]),
                   format_command(json(requests[i].command)));
    }
}

void check_time_scale(double k, const sim::Trace& trace) {
    if (!(k > 0) || !std::isfinite(k)) {
        die(fmt::format("--time-scale must be a positive number (got {})", k));
    }
    if (!trace.entries.empty() && trace.entries.back().submit_s / k > kLongestReplay) {
        die(
            fmt::format("trace {} would take {:.3g} s to submit at time scale {}; raise "
                        "--time-scale",
                        trace.name, trace.entries.back().submit_s / k, k));
    }
}

// The daemon runs fake jobs K times faster than their profiles (its time_scale). Submitting at
// the same K keeps the trace's arrivals in step with the jobs' run times, so that is the default.
double replay_time_scale(const ReplayOptions& o, api::ApiClient& client) {
    const std::optional<double> daemon_k = number_of(or_die(client.status()), "time_scale");
    if (o.time_scale_option->count() == 0) {
        return daemon_k.value_or(1.0);
    }
    if (daemon_k && *daemon_k != o.time_scale) {
        fmt::print(stderr,
                   "carma: note: submitting at time scale {} while the daemon runs jobs at {}; "
                   "the trace's load will differ from the simulator's\n",
                   o.time_scale, *daemon_k);
    }
    return o.time_scale;
}

// Submits each request at its trace time / k after the start; returns the tasks the daemon took.
std::vector<Submitted> submit_trace(api::ApiClient& client, const sim::Trace& trace,
                                    const std::vector<api::SubmitRequest>& requests, double k,
                                    Clock::time_point start) {
    std::vector<Submitted> submitted;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        // Sleeping until a deadline (not for a gap) lets a late submission catch up at once.
        std::this_thread::sleep_until(
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(trace.entries[i].submit_s / k)));
        auto task = client.submit(api::request_body(requests[i]));
        // A refused connection is usually a daemon restarting: retry with backoff for a minute
        // before giving up on the rest of the trace, and then say exactly what was not sent.
        auto wait = std::chrono::milliseconds(250);
        const auto give_up = Clock::now() + std::chrono::seconds(60);
        while (!task && task.error().code == ErrorCode::Io && Clock::now() < give_up) {
            print_line(stderr, "carma: [{:>9.1f}s] {}: {}; retrying in {} ms", seconds_since(start),
                       requests[i].name, task.error().message, wait.count());
            std::this_thread::sleep_for(wait);
            wait = std::min(wait * 2, std::chrono::milliseconds(5000));
            task = client.submit(api::request_body(requests[i]));
        }
        if (!task && task.error().code == ErrorCode::Io) {
            std::vector<std::string> left;
            for (std::size_t j = i; j < requests.size(); ++j) {
                left.push_back(requests[j].name);
            }
            print_line(stderr,
                       "carma: the daemon did not answer for a minute ({}); not submitted: "
                       "{}",
                       task.error().message, fmt::join(left, ", "));
            return submitted;
        }
        if (!task) {
            print_line(stderr, "carma: [{:>9.1f}s] {} refused: {}", seconds_since(start),
                       requests[i].name, task.error().message);
            continue;
        }
        const std::optional<TaskId> id = integer_of(*task, "id");
        if (!id) {
            die(fmt::format("the daemon accepted {} but its answer has no task id: {}",
                            requests[i].name, task->dump()));
        }
        submitted.push_back({*id, requests[i].name});
        print_line(stdout, "[{:>9.1f}s] submitted {}: {}", seconds_since(start), task_label(*task),
                   describe_request(requests[i]));
        std::fflush(stdout);
    }
    return submitted;
}

int run_replay(const ReplayOptions& o) {
    const sim::Trace trace = or_die(sim::load_trace(o.trace));
    const fs::path fakejob = fakejob_path();
    const fs::path cwd = fs::current_path();
    std::vector<api::SubmitRequest> requests;
    for (const sim::TraceEntry& e : trace.entries) {
        requests.push_back(replay_request(e, model::Catalog::embedded(), fakejob, cwd));
    }
    if (o.dry_run) {
        check_time_scale(o.time_scale, trace);
        print_dry_run(trace, requests, o.time_scale);
        return 0;
    }
    if (!fs::exists(fakejob)) {
        die(fmt::format("{} does not exist; build the carma-fakejob target next to carma",
                        fakejob.string()));
    }
    api::ApiClient client = connect(o.socket);
    // A daemon that is (re)starting refuses connections for a moment: wait for it, as each
    // submission below does, rather than drop the whole trace.
    auto wait = std::chrono::milliseconds(250);
    const auto give_up = Clock::now() + std::chrono::seconds(60);
    for (auto up = client.healthz(); !up && Clock::now() < give_up; up = client.healthz()) {
        print_line(stderr, "carma: {}; retrying in {} ms", up.error().message, wait.count());
        std::this_thread::sleep_for(wait);
        wait = std::min(wait * 2, std::chrono::milliseconds(5000));
    }
    const double k = replay_time_scale(o, client);
    check_time_scale(k, trace);
    fmt::print("replaying {} ({} tasks) at time scale {}\n", trace.name, requests.size(), k);
    const Clock::time_point start = Clock::now();
    const double start_unix = now_epoch();
    const std::vector<Submitted> submitted = submit_trace(client, trace, requests, k, start);
    fmt::print("submitted {} of {} tasks of trace {}\n", submitted.size(), requests.size(),
               trace.name);
    if (o.wait && !submitted.empty()) {
        wait_for_tasks(client, submitted, start, start_unix);
        ReplaySummary summary;
        for (const Submitted& s : submitted) {
            tally(or_die(client.task(s.id)), summary);
        }
        print_summary(trace.name, submitted.size(), k, summary);
    }
    return submitted.size() == requests.size() ? 0 : 1;
}

}  // namespace

Result<MiB> parse_mem_flag(const std::string& text) {
    // A bare number on the command line is a guess at the unit (12 = 12 MiB, nothing a training
    // task needs); the paper writes GB for 1,000 MiB, so units are spelled out.
    const std::string_view m = trim(text);
    if (!m.empty() && m.find_first_not_of("0123456789.") == std::string_view::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--mem {}: give a unit: {}GiB, {}MiB, or {}GB (= {} x 1,000 MiB, "
                                "as the CARMA paper writes)",
                                text, m, m, m, m));
    }
    auto mib = parse_memory(text);
    if (!mib) {
        return fail(mib.error().code, "--mem: " + mib.error().message);
    }
    return *mib;
}

Result<int> check_gpus_flag(int gpus) {
    if (gpus < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gpus must be at least 1 (got {}); every task gets whole GPUs",
                                gpus));
    }
    return gpus;
}

Action add_submit_command(CLI::App& app) {
    auto o = std::make_shared<SubmitOptions>();
    CLI::App* cmd = app.add_subcommand(
        "submit",
        "Queue a task: `carma submit [options] -- COMMAND ARGS...` or a task file "
        "(.yaml, .rad)");
    o->gpus_option = cmd->add_option("-g,--gpus", o->gpus, "Number of GPUs (default 1)");
    cmd->add_option("--mem", o->memory, "Memory the task needs per GPU, e.g. 12GiB or 12000MiB");
    cmd->add_option("--name", o->name, "Task name (default: the daemon derives one)");
    cmd->add_option("--workdir", o->workdir, "Directory to run in (default: the current one)");
    cmd->add_option("--env", o->env, "Environment variable NAME=VALUE for the task (repeatable)")
        ->allow_extra_args(false);  // `--env A=1 python x` must not swallow the command
    o->max_attempts_option = cmd->add_option("--max-attempts", o->max_attempts,
                                             "Launches at most, counting out-of-memory retries");
    cmd->add_option("--workload", o->workload, "Workload profile name (for fake jobs)");
    cmd->add_option("--export", o->export_spec,
                    "Environment variables the task gets: ALL (default, as sbatch), NONE, or "
                    "NAME[=VALUE],... (may start with ALL)");
    cmd->add_option("--conda", o->conda,
                    "Run in this conda environment (name or path); a .rad file's `conda "
                    "activate NAME` line does the same");
    cmd->add_option("--venv", o->venv, "Run in this Python virtual environment (path)");
    cmd->add_option("-t,--time-limit", o->time_limit,
                    "Stop the task after this long: 45s, 90m, 2h, 1h30m, 2d or HH:MM:SS "
                    "(SIGTERM, then SIGKILL after the grace period; state timeout)");
    cmd->add_option("--after", o->after,
                    "Start only after these tasks succeeded: ID[:ID...] (fails if one does not)");
    cmd->add_flag("-H,--hold", o->hold, "Submit held: it waits for `carma release`");
    cmd->add_option("--array", o->array,
                    "One task per index: 0-9, 0-20:5, 1,3,8-12 (CARMA_ARRAY_INDEX tells each "
                    "which)");
    cmd->add_flag("--json", o->json, "Print the task object the daemon returns");
    add_socket_option(cmd, o->socket);
    cmd->add_option("args", o->args, "The command and its arguments (after --), or a task file");
    return [o] { return run_submit(*o); };
}

Action add_queue_command(CLI::App& app) {
    auto o = std::make_shared<QueueOptions>();
    CLI::App* cmd = app.add_subcommand("queue", "List queued and running tasks");
    cmd->add_flag("-a,--all", o->all, "Include finished tasks");
    cmd->add_flag("--json", o->json,
                  "Print {\"tasks\": [...]} as the daemon returns it (only the tasks the "
                  "filters keep)");
    cmd->add_option("-u,--user", o->users, "Only these users' tasks (repeatable, or a comma list)")
        ->allow_extra_args(false);
    cmd->add_flag("--me", o->me, "Only your own tasks");
    cmd->add_option("-t,--state", o->states,
                    "Only tasks in these states (comma list; a finished state implies --all)")
        ->allow_extra_args(false);
    cmd->add_flag("--wide", o->wide,
                  "Cut nothing, and one line per task of a job array");
    cmd->add_flag("-r,--array", o->expand_arrays, "One line per task of a job array");
    o->format_option = cmd->add_option(
        "-o,--format", o->format,
        "Columns: a comma list of id,user,name,state,gpus,mem,wait,time,reason, or squeue "
        "codes \"%i %u %j %t %b %m %W %M %R\"");
    o->watch_option = cmd->add_option("--watch", o->watch_s,
                                      "Refresh every S seconds (default 2) until ctrl-C")
                          ->expected(0, 1)
                          ->default_str("2");
    add_socket_option(cmd, o->socket);
    return [o] { return run_queue(*o); };
}

Action add_show_command(CLI::App& app) {
    auto o = std::make_shared<ShowOptions>();
    CLI::App* cmd = app.add_subcommand("show", "Show one task with its attempts");
    cmd->add_option("id", o->id, "Task ID")->required();
    cmd->add_flag("--json", o->json, "Print the task object the daemon returns");
    add_socket_option(cmd, o->socket);
    return [o] { return run_show(*o); };
}

Action add_task_action_command(CLI::App& app, TaskAction action) {
    auto o = std::make_shared<SelectOptions>();
    const char* name = action == TaskAction::Cancel ? "cancel"
                       : action == TaskAction::Hold ? "hold"
                                                    : "release";
    const char* about = action == TaskAction::Cancel
                            ? "Cancel queued tasks or stop running ones"
                        : action == TaskAction::Hold ? "Keep queued tasks from starting"
                                                     : "Let held tasks queue again";
    CLI::App* cmd = app.add_subcommand(name, about);
    cmd->add_option("ids", o->ids, "Task ids: 12, an array member 12_3, a whole array 12_*");
    cmd->add_option("-u,--user", o->users, "Only tasks of these users (comma list, repeatable)");
    cmd->add_option("-t,--state", o->states,
                    "Only tasks in these states, e.g. queued,held (comma list, repeatable)");
    cmd->add_flag("--me", o->me, "Only your own tasks");
    cmd->add_flag("--json", o->json, "Print the task object(s) the daemon returns");
    add_socket_option(cmd, o->socket);
    return [o, action] { return run_task_action(action, *o); };
}

Action add_cancel_command(CLI::App& app) {
    return add_task_action_command(app, TaskAction::Cancel);
}

Action add_hold_command(CLI::App& app) { return add_task_action_command(app, TaskAction::Hold); }

Action add_release_command(CLI::App& app) {
    return add_task_action_command(app, TaskAction::Release);
}

Action add_logs_command(CLI::App& app) {
    auto o = std::make_shared<LogsOptions>();
    CLI::App* cmd = app.add_subcommand("logs", "Print a task's output");
    cmd->add_option("id", o->id, "Task ID")->required();
    cmd->add_flag("--stderr", o->stderr_stream, "The standard error log instead of stdout");
    cmd->add_option("--attempt", o->attempt, "Attempt number (default: the latest)");
    cmd->add_flag("-f,--follow", o->follow, "Keep printing until the task has finished");
    add_socket_option(cmd, o->socket);
    return [o] { return run_logs(*o); };
}

Action add_gpus_command(CLI::App& app) {
    auto o = std::make_shared<GpusOptions>();
    CLI::App* cmd = app.add_subcommand("gpus", "Show the GPUs: memory, activity, risk, tasks");
    cmd->add_flag("--json", o->json, "Print the daemon's answer as JSON");
    add_socket_option(cmd, o->socket);
    return [o] { return run_gpus(*o); };
}

Action add_replay_command(CLI::App& app) {
    auto o = std::make_shared<ReplayOptions>();
    CLI::App* cmd = app.add_subcommand(
        "replay", "Submit a trace's tasks as fake jobs to the daemon, at the trace's times");
    cmd->add_option(
           "trace", o->trace,
           fmt::format("{} (built in) or a CSV file", fmt::join(sim::builtin_trace_names(), ", ")))
        ->required();
    o->time_scale_option = cmd->add_option(
        "--time-scale", o->time_scale,
        "Submit K times faster than the trace (default: the daemon's time scale, which also "
        "speeds up its fake jobs; 1 for --dry-run)");
    cmd->add_flag("--dry-run", o->dry_run, "Print what would be submitted, submit nothing");
    cmd->add_flag("--wait", o->wait, "Wait until every task has finished and print a summary");
    add_socket_option(cmd, o->socket);
    return [o] { return run_replay(*o); };
}

}  // namespace carma::cli
