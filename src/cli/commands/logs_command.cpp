// `carma logs ID [--stderr] [--attempt N] [--follow]`: a task's output (GET /v1/tasks/ID/logs).

#include "cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/commands/task_select.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "core/task.h"

namespace carma::cli {

namespace {

using nlohmann::json;

constexpr auto kLogPollInterval = std::chrono::milliseconds(500);

struct LogsOptions {
    std::string socket;
    std::string word;  // as typed: 12 or 12_3
    TaskRef id;
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
                           keep, o.word);
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
                print_line(stderr, "carma: {}", attempt_separator(task, wanted));
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

}  // namespace

Action add_logs_command(CLI::App& app) {
    auto o = std::make_shared<LogsOptions>();
    CLI::App* cmd = app.add_subcommand("logs", "Print a task's output");
    cmd->add_option("id", o->word, "Task: an id (12) or an array member (12_3)")->required();
    cmd->add_flag("--stderr", o->stderr_stream, "The standard error log instead of stdout");
    cmd->add_option("--attempt", o->attempt, "Attempt number (default: the latest)");
    cmd->add_flag("-f,--follow", o->follow, "Keep printing until the task has finished");
    add_socket_option(cmd, o->socket);
    return [o] {
        o->id = or_die(parse_one_task(o->word));
        return run_logs(*o);
    };
}

}  // namespace carma::cli
