// `carma show ID [--json]`: one task with its attempts (GET /v1/tasks/ID).

#include "cli/commands.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/commands/task_select.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/common/local_time.h"
#include "cli/views/cells.h"
#include "core/task.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;

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

// The variables the submitter set on purpose (explicit_env; all of env where it is null) and how
// many came from the submitter's shell besides: `carma submit` exports the whole environment, as
// sbatch does, and forty inherited variables hid the two that were chosen. `all`: every one.
std::string env_summary(const json& task, bool all) {
    const json* env = member(task, "env");
    if (env == nullptr || !env->is_object()) {
        return "- (only the task's owner and root see it)";
    }
    const json* chosen = member(task, "explicit_env");
    std::set<std::string> explicit_names;
    const bool every = all || chosen == nullptr || !chosen->is_array();
    if (!every) {
        for (const json& name : *chosen) {
            if (name.is_string()) {
                explicit_names.insert(name.get<std::string>());
            }
        }
    }
    std::vector<std::string> pairs;
    std::size_t others = 0;
    for (const auto& [key, value] : env->items()) {
        if (!every && !explicit_names.contains(key)) {
            ++others;
            continue;
        }
        pairs.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    }
    std::string out = pairs.empty() ? "-" : fmt::format("{}", fmt::join(pairs, " "));
    if (others > 0) {
        out += fmt::format("; and {} from the submitter's environment (--env-all shows them)",
                           others);
    }
    return out;
}

// "afterok:12:13_2,afterany:14" as sbatch's --dependency writes it; "" when none.
std::string dependencies_text(const json& task) {
    std::vector<std::string> parts;
    for (const json& d : array_of(task, "dependencies")) {
        parts.push_back(fmt::format("{}:{}", text_of(d, "type"), text_of(d, "task")));
    }
    return fmt::format("{}", fmt::join(parts, ","));
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
    // Fair share: what each attempt was charged, and the slowdown it saw beside others.
    for (const json& a : attempts) {
        const std::optional<double> charged = number_of(a, "charged_gpu_s");
        const std::optional<double> slowdown = number_of(a, "slowdown");
        if (!charged && !slowdown) {
            continue;
        }
        std::vector<std::string> parts;
        if (charged) {
            parts.push_back(fmt::format("charged {:.3f} GPU-h", *charged / 3600));
        }
        if (slowdown) {
            parts.push_back(fmt::format("observed slowdown {:.2f}x (run time over its command's "
                                        "solo runs)",
                                        *slowdown));
        }
        print_line(stdout, "attempt {}: {}", text_of(a, "number"), fmt::join(parts, "; "));
    }
    for (const json& a : attempts) {
        if (const std::string why = text_of(a, "unobserved_why", ""); !why.empty()) {
            print_line(stdout, "attempt {} unobserved ({}): {}", text_of(a, "number"),
                       text_of(a, "unobserved"), why);
        }
    }
}

void print_task(const json& t, double now, bool env_all, const json& warnings) {
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
    print_line(stdout, "  env         {}", env_summary(t, env_all));
    print_line(stdout, "  workload    {}", or_dash(text_of(t, "workload")));
    // What it asked of its co-runners and of the queue, only where given.
    if (flag_of(t, "exclusive")) {
        print_line(stdout, "  sharing     exclusive: no co-runner on its GPUs");
    } else if (const std::optional<double> share = number_of(t, "gpu_share")) {
        print_line(stdout, "  sharing     reserves {} of one GPU (--gpu-share)", *share);
    }
    if (const std::optional<double> bound = number_of(t, "max_slowdown");
        bound && !flag_of(t, "exclusive")) {
        print_line(stdout, "  sharing     co-runners only while its predicted slowdown stays at "
                           "most {:.2f}x",
                   *bound);
    }
    if (const std::optional<std::int64_t> nice = integer_of(t, "nice"); nice && *nice != 0) {
        print_line(stdout, "  nice        {}", *nice);
    }
    if (flag_of(t, "requeue")) {
        print_line(stdout, "  requeue     may be stopped for fair share and queued again");
    }
    // Scheduling controls, only where given.
    if (const std::optional<double> limit = number_of(t, "time_limit_s")) {
        print_line(stdout, "  time limit  {}", format_duration(*limit));
    }
    if (const std::string deps = dependencies_text(t); !deps.empty()) {
        print_line(stdout, "  dependency  {}", deps);
    }
    for (const char* field : {"output", "error", "mail_type", "mail_user"}) {
        if (const std::string value = text_of(t, field, ""); !value.empty()) {
            print_line(stdout, "  {:<11} {}", field, value);
        }
    }
    if (const json* script = member(t, "script"); script != nullptr && script->is_object()) {
        print_line(stdout, "  script      copy of {} bytes taken at submit runs, not the file "
                           "(`carma show {} --script` prints it)",
                   text_of(*script, "bytes"), text_of(t, "id"));
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
    // What the submitter's side noticed in a task file and did not read (a duplicated block).
    for (const json& w : warnings) {
        print_line(stdout, "  warning     {}", text_of(w, "message"));
    }
    print_attempts(array_of(t, "attempt_list"), now);
}

struct ShowOptions {
    std::string socket;
    std::string id;
    bool json = false;
    bool env_all = false;
    bool script = false;
};

// The task's `warning` events; none where the daemon keeps no events for it (an older daemon,
// or a task whose events were pruned).
json warning_events(api::ApiClient& client, TaskId task) {
    json out = json::array();
    auto events = client.events(api::EventQuery{std::nullopt, task, 10000});
    if (!events) {
        return out;
    }
    for (const json& e : array_of(*events, "events")) {
        if (text_of(e, "kind", "") == "warning") {
            out.push_back(e);
        }
    }
    return out;
}

int run_show(const ShowOptions& o) {
    const TaskRef ref = or_die(parse_one_task(o.id));
    api::ApiClient client = connect(o.socket);
    const json task = or_die(client.task(ref));
    if (o.script) {
        // As sbatch's `scontrol write batch_script ID -`: the copy that runs, as it was taken.
        const json* script = member(task, "script");
        if (script == nullptr || !script->is_object()) {
            die(fmt::format("task {} has no script copy: it runs its command as given (`carma "
                            "show {}` shows it)",
                            o.id, o.id));
        }
        const json* text = member(*script, "text");
        if (text == nullptr || !text->is_string()) {
            die(fmt::format("task {}'s script is shown to its owner and root only", o.id));
        }
        std::fwrite(text->get_ref<const std::string&>().data(), 1,
                    text->get_ref<const std::string&>().size(), stdout);
        return 0;
    }
    if (o.json) {
        print_json(task);
    } else {
        const std::optional<std::int64_t> id = integer_of(task, "id");
        print_task(task, now_epoch(), o.env_all,
                   id ? warning_events(client, static_cast<TaskId>(*id)) : json::array());
    }
    return 0;
}

}  // namespace

Action add_show_command(CLI::App& app) {
    auto o = std::make_shared<ShowOptions>();
    CLI::App* cmd = app.add_subcommand("show", "Show one task with its attempts");
    cmd->add_option("id", o->id, "Task: an id (12) or an array member (12_3)")->required();
    cmd->add_flag("--json", o->json, "Print the task object the daemon returns");
    cmd->add_flag("--env-all", o->env_all,
                  "Print every environment variable, also those exported from the submitter's "
                  "shell (by default only those set with --env or a task file's env:)");
    cmd->add_flag("--script", o->script,
                  "Print the batch script's copy the task runs (taken at submit, as sbatch "
                  "keeps one); its owner and root only");
    add_socket_option(cmd, o->socket);
    return [o] { return run_show(*o); };
}

}  // namespace carma::cli
