#pragma once
// What the HTTP layer asks of the daemon. The server turns requests into these calls (with the
// caller's identity) and their results into HTTP answers; it knows nothing about scheduling.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace carma::api {

struct Caller {
    uid_t uid = 0;
    gid_t gid = 0;
    pid_t pid = 0;         // the connecting process, for logs only (it may be gone)
    std::string user;
    bool via_tcp = false;  // authenticated by bearer token; acts as tcp_run_as or the daemon's user
    bool read_only = false;  // may look but not submit, cancel or read logs (TCP, no tcp_run_as)
    bool via_web = false;    // the read-only web listener (--web): nobody in particular
};

// The uid of a caller who is nobody in particular (a TCP reader of a root daemon without
// tcp_run_as, a viewer of the web page): no task and no file belongs to it, so it sees only what
// every user may see. (uid_t)-1 is no user's: setresuid(2) reads it as "unchanged".
inline constexpr uid_t kNobodyUid = static_cast<uid_t>(-1);

inline Caller nobody_caller(std::string label) {
    Caller c;
    c.uid = kNobodyUid;
    c.gid = static_cast<gid_t>(-1);
    c.user = std::move(label);
    c.read_only = true;
    return c;
}

struct ApiError {
    int status = 500;     // HTTP status
    std::string message;  // names the object and what to do
    std::optional<double> retry_after_s = std::nullopt;  // 429: when asking again may work
};

template <typename T>
using ApiResult = tl::expected<T, ApiError>;

inline tl::unexpected<ApiError> api_fail(int status, std::string message) {
    return tl::unexpected<ApiError>(ApiError{status, std::move(message)});
}

// Listings come a page at a time, in id order: the tasks after `after`, at most `limit`; the
// answer's "next" is the id to ask after for the next page, null after the last. A page is what
// one request may cost the daemon, however many tasks it holds.
inline constexpr std::size_t kPageDefault = 1000;
inline constexpr std::size_t kPageMax = 10000;

struct Page {
    std::int64_t after = 0;
    std::size_t limit = kPageDefault;
};

// Which tasks GET /v1/tasks lists.
struct TaskListQuery {
    bool include_final = false;
    Page page;
};

// Which finished tasks GET /v1/acct lists (checked for shape by the server, for meaning by the
// service).
struct AcctQuery {
    std::string user;                 // the submitter's login name; empty = everyone
    std::vector<std::string> states;  // final state names; empty = every final state
    double since = 0;                 // finished at or after (unix seconds)
    Page page;
};

// Which stretch of stored history GET /v1/timeline answers (unix seconds; checked for shape by
// the server, defaults filled in by the service).
inline constexpr int kTimelinePointsMax = 5000;
inline constexpr int kTimelinePointsMin = 10;

struct TimelineQuery {
    std::optional<double> since;  // default: until − 6 h
    std::optional<double> until;  // default: now
    int points = 600;             // samples per GPU at most
    bool ran = false;             // only tasks with an attempt in the span (the page's charts)
    Page page;                    // the tasks; the GPUs' samples come with the first page
};

struct LogSlice {
    std::string text;
    std::uint64_t size = 0;  // whole file size
    std::string task_state;
};

class Service {
public:
    virtual ~Service() = default;
    virtual ApiResult<nlohmann::json> submit(const Caller& caller, const nlohmann::json& body) = 0;
    // Already serialized: a queue of 10,000 tasks as one JSON tree would cost tens of MiB per
    // request, which malloc keeps per handler thread.
    virtual ApiResult<std::string> list_tasks(const Caller& caller,
                                              const TaskListQuery& query) = 0;
    // The id of the member of array `array_id` with index `index`: a path's "12_3" (Slurm's
    // ARRAY_INDEX). The default knows no arrays.
    virtual ApiResult<std::int64_t> array_member(const Caller& /*caller*/, std::int64_t array_id,
                                                 int index) {
        return api_fail(404, fmt::format("no task {}_{}: this service keeps no arrays", array_id,
                                         index));
    }
    virtual ApiResult<nlohmann::json> show_task(const Caller& caller, std::int64_t id) = 0;
    virtual ApiResult<nlohmann::json> cancel_task(const Caller& caller, std::int64_t id) = 0;
    // Keeps a queued task from starting (`hold`) or lets a held one queue again.
    virtual ApiResult<nlohmann::json> hold_task(const Caller& caller, std::int64_t id,
                                                bool hold) = 0;
    virtual ApiResult<LogSlice> task_logs(const Caller& caller, std::int64_t id, bool stderr_stream,
                                          int attempt, std::uint64_t offset) = 0;
    virtual ApiResult<nlohmann::json> gpus(const Caller& caller) = 0;
    virtual ApiResult<nlohmann::json> events(const Caller& caller, std::int64_t after,
                                             std::int64_t task, int limit) = 0;
    virtual ApiResult<nlohmann::json> status(const Caller& caller) = 0;
    virtual std::string metrics() = 0;
    // Whether this caller may talk to the daemon at all (a non-root daemon serves its own user).
    virtual ApiResult<void> admit(const Caller& caller) = 0;
    // What every knowledge source says about a task described like a submission, for this
    // caller; changes nothing. Not every service keeps history, hence the default.
    virtual ApiResult<nlohmann::json> estimate(const Caller& /*caller*/,
                                               const nlohmann::json& /*body*/) {
        return api_fail(501, "this service keeps no history to estimate from");
    }
    // Accounting of finished tasks (docs/api.md), already serialized like list_tasks. Not every
    // service keeps records, hence the default.
    virtual ApiResult<std::string> acct(const Caller& /*caller*/, const AcctQuery& /*query*/) {
        return api_fail(501, "this service keeps no accounting");
    }
    // The live view (the web page, `carma top`) and the stored timeline (the page's charts,
    // `carma report`); both free of secrets. Not every service has them, hence the defaults.
    virtual ApiResult<nlohmann::json> view(const Caller& /*caller*/) {
        return api_fail(501, "this service has no live view");
    }
    virtual ApiResult<nlohmann::json> timeline(const Caller& /*caller*/,
                                               const TimelineQuery& /*query*/) {
        return api_fail(501, "this service keeps no timeline");
    }
    // Fair share (`carma share`, docs/api.md): every user's shares, charged usage, factor, GPUs in
    // use and waiting tasks. Not every service charges usage, hence the default.
    virtual ApiResult<nlohmann::json> share(const Caller& /*caller*/) {
        return api_fail(501, "this service keeps no fair-share usage");
    }
    // The nodes whose agents report to this server (`carma agent`, `carma slurm status`), and
    // stopping placement on some of them (`carma slurm down`). A single server has none.
    virtual ApiResult<nlohmann::json> nodes(const Caller& /*caller*/) {
        return api_fail(501, "this service schedules no nodes");
    }
    virtual ApiResult<nlohmann::json> drain_nodes(const Caller& /*caller*/,
                                                  const nlohmann::json& /*body*/) {
        return api_fail(501, "this service schedules no nodes");
    }
    // `carma nodes lost NAME`: a silent node is given up, its tasks queued again.
    virtual ApiResult<nlohmann::json> declare_node_lost(const Caller& /*caller*/,
                                                        const nlohmann::json& /*body*/) {
        return api_fail(501, "this service schedules no nodes");
    }
};

}  // namespace carma::api
