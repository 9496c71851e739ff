// `carma queue`: the table is cli/views/queue_view (pure); here: the options, the terminal and
// --watch.

#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/common/local_time.h"
#include "cli/views/queue_view.h"
#include "core/text.h"

namespace carma::cli {

namespace {

using nlohmann::json;

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

}  // namespace

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
                    "Only tasks in these states (comma list; a finished state implies --all); "
                    "squeue's codes and names too (PD, R, CD, F, CA, TO, OOM; PENDING, ...)")
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

}  // namespace carma::cli
