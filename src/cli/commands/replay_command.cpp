// `carma replay TRACE [--time-scale K] [--dry-run] [--wait]`: a trace's tasks submitted as fake
// jobs to the daemon at the trace's times.

#include "cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "api/task_file.h"
#include "cli/commands/client_common.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/common/local_time.h"
#include "cli/views/cells.h"
#include "cli/views/loop_lag_text.h"
#include "core/task.h"
#include "core/units.h"
#include "exec/self.h"
#include "model/catalog.h"
#include "sim/trace.h"

namespace carma::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kWaitPollInterval = std::chrono::seconds(1);
constexpr double kLongestReplay = 1e8;  // seconds; ~3 years of submissions is a mistaken scale

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
    // The daemon's loop before and after: whether it kept up with its period meanwhile.
    const json status_before = client.status().value_or(json());
    const auto warn_if_behind = [&] {
        if (auto warning = replay_lag_warning(status_before, client.status().value_or(json()))) {
            print_line(stderr, "carma: warning: {}", *warning);
        }
    };
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
    warn_if_behind();
    return submitted.size() == requests.size() ? 0 : 1;
}

}  // namespace

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
