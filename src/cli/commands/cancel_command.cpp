// `carma cancel`, `carma hold` and `carma release` ID... [--user U] [--state S] [--me] [--json];
// cli/commands/task_select.h picks the tasks.

#include "cli/commands.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/commands/task_select.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/views/queue_view.h"
#include "core/task.h"

namespace carma::cli {

namespace {

using nlohmann::json;

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
    default_to_own_tasks(filter, ::geteuid() == 0, login_name());
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
    std::vector<TaskRef> ids = filter.refs;
    if (needs_task_list(filter)) {
        const json listed = or_die(client.list_tasks(false));
        ids = select_tasks(array_of(listed, "tasks"), filter);
        if (ids.empty()) {
            fmt::print(stderr, "carma: no unfinished task matches\n");
            return 1;
        }
    }
    json answers = json::array();
    int failures = 0;
    for (const TaskRef& id : ids) {
        auto task = action == TaskAction::Cancel ? client.cancel(id)
                                                 : client.hold(id, action == TaskAction::Hold);
        if (!task && ids.size() == 1) {
            die(task.error().message);  // one task: its error is the command's
        }
        if (!task) {
            print_line(stderr, "carma: {}", task_failure_line(id, task.error().message));
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

}  // namespace

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
    cmd->add_option("-u,--user", o->users,
                    "Only tasks of these users (comma list, repeatable); without ids or --user, "
                    "a user who is not root acts on their own tasks");
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

}  // namespace carma::cli
