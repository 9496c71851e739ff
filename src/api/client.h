#pragma once
// The client side of the daemon's HTTP+JSON API (docs/api.md) over its Unix socket. One method
// per endpoint; every failure comes back as an Error whose message a user can act on: either
// "cannot reach the daemon, here is why and how to point at it" or the daemon's own "error".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/service.h"
#include "core/result.h"
#include "core/task.h"
#include "core/task_ref.h"

namespace carma::api {

// Where the daemon listens unless told otherwise: /var/lib/carma/carma.sock for root, else
// $XDG_STATE_HOME/carma/carma.sock with XDG_STATE_HOME defaulting to ~/.local/state. The daemon
// and every client command use this same function, so they agree without configuration.
std::string default_socket_path();

// The rule behind default_socket_path(), with the environment passed in so it can be tested.
// `xdg_state_home` and `home` may be null or empty (unset).
std::string default_socket_path_for(bool is_root, const char* xdg_state_home, const char* home);

// The socket of the packaged, system-wide daemon (root's default_socket_path()).
std::string_view system_socket_path();

// Which socket a client command takes when neither --socket nor $CARMA_SOCKET names one. Root's
// default is the system daemon's. A user's is their own daemon's (`own`, default_socket_path())
// while one answers there; else the system daemon's when its socket exists, so that every user
// of a packaged installation reaches it without setting anything; else their own again, so the
// error names the daemon they would start. The probes are passed in so the rule can be tested.
std::string client_socket_path_for(bool is_root, const std::string& own, bool own_answers,
                                   bool system_exists);

// The socket a command uses: its --socket flag if given, else $CARMA_SOCKET, else
// client_socket_path_for() of this user and this machine.
std::string resolve_socket_path(std::string_view flag);

// The help text of a client command's --socket option: the order above, in words.
std::string socket_option_help();

enum class LogStream { Stdout, Stderr };

struct LogRequest {
    LogStream stream = LogStream::Stdout;
    std::optional<int> attempt;  // unset: the latest attempt
    std::uint64_t offset = 0;    // bytes of the log to skip
};

struct LogChunk {
    std::string text;            // the log from the requested offset to its current end
    std::uint64_t log_size = 0;  // X-Carma-Log-Size: the whole file's size when it was read
    std::string task_state;      // X-Carma-Task-State: the task's state when it was read
};

struct EventQuery {
    std::optional<std::int64_t> after;  // only events with a larger id
    std::optional<TaskId> task;         // only events of this task
    std::optional<int> limit;           // at most this many (the daemon's default is 100)
};

struct AcctRequest {
    std::optional<std::string> user;   // only this submitter's tasks
    std::optional<std::string> state;  // only these final states, comma-separated
    std::optional<double> since;       // only tasks finished at or after (unix seconds)
};

class ApiClient {
public:
    explicit ApiClient(std::string socket_path);

    const std::string& socket_path() const { return socket_path_; }

    Result<nlohmann::json> submit(const nlohmann::json& body);    // POST /v1/tasks -> task
    Result<nlohmann::json> estimate(const nlohmann::json& body);  // POST /v1/estimate
    Result<nlohmann::json> list_tasks(bool all);  // GET /v1/tasks, every page -> {"tasks"}
    // A task by id or as an array member (12_3: Slurm's ARRAY_INDEX); not a whole array.
    Result<nlohmann::json> task(const TaskRef& ref);                    // GET /v1/tasks/{id}
    Result<nlohmann::json> cancel(const TaskRef& ref);                  // DELETE /v1/tasks/{id}
    Result<nlohmann::json> hold(const TaskRef& ref, bool hold);  // POST .../{id}/hold|release
    Result<LogChunk> logs(const TaskRef& ref, const LogRequest& request);  // GET .../{id}/logs
    Result<nlohmann::json> task(TaskId id) { return task(TaskRef::of(id)); }
    Result<nlohmann::json> cancel(TaskId id) { return cancel(TaskRef::of(id)); }
    Result<nlohmann::json> hold(TaskId id, bool h) { return hold(TaskRef::of(id), h); }
    Result<LogChunk> logs(TaskId id, const LogRequest& request) {
        return logs(TaskRef::of(id), request);
    }
    Result<nlohmann::json> gpus();                                // GET /v1/gpus
    Result<nlohmann::json> nodes();                               // GET /v1/nodes (cluster mode)
    Result<nlohmann::json> share();                               // GET /v1/share
    // POST /v1/nodes/drain {"slurm_job": ID} or {"node": NAME} -> {"draining": [...]}
    Result<nlohmann::json> drain_nodes(const nlohmann::json& body);
    Result<nlohmann::json> declare_node_lost(const std::string& node);
    Result<nlohmann::json> events(const EventQuery& query);       // GET /v1/events
    Result<nlohmann::json> status();                              // GET /v1/status
    Result<nlohmann::json> acct(const AcctRequest& request);  // GET /v1/acct, every page
    Result<nlohmann::json> view();                                // GET /v1/view (carma top)
    Result<std::string> metrics();                                // GET /metrics (Prometheus text)
    Result<std::string> healthz();                                // GET /healthz

    // One HTTP exchange, whatever the status: only a transport failure (no daemon, a broken
    // connection) is an error here. The methods above build on it and turn non-2xx answers into
    // errors; tests and future commands use it to reach any endpoint or check a status.
    // `body` is sent as application/json when given.
    struct Reply {
        int status = 0;
        std::string body;
        std::string log_size;    // X-Carma-Log-Size, empty when absent
        std::string task_state;  // X-Carma-Task-State, empty when absent
    };
    Result<Reply> exchange(std::string_view method, const std::string& target,
                           const std::string* body = nullptr) const;

private:
    // exchange() with a non-2xx answer turned into the daemon's error.
    Result<Reply> exchange_ok(std::string_view method, const std::string& target,
                              const std::string* body = nullptr) const;
    Result<nlohmann::json> exchange_json(std::string_view method, const std::string& target,
                                         const std::string* body = nullptr) const;
    Result<std::string> exchange_text(const std::string& target) const;
    // GET every page of a listing (`target` without after/limit): one answer with every page's
    // "tasks" and the rest of the last page.
    Result<nlohmann::json> all_pages(const std::string& target) const;

    std::string socket_path_;
};

// The final states of a task (docs/api.md): nothing more happens to it after one of these.
bool is_final_state(std::string_view state);

}  // namespace carma::api
