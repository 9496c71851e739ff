// The daemon's answers to API requests (api::Service), by topic: submissions and estimates in
// daemon_submit.cpp; the task queries, cancel and logs in daemon_tasks.cpp; hold/release in
// daemon_controls.cpp; the GPUs, events, status and metrics in daemon_status.cpp; the nodes in
// daemon_nodes.cpp; view and timeline in daemon_view.cpp, accounting in daemon_acct.cpp. Each
// takes the daemon's lock only for the short time it reads or changes shared state. Here: who the
// daemon serves, and what the others share (daemon_api.h).

#include "daemon/daemon_api.h"

#include <unistd.h>

#include <fmt/format.h>

#include "daemon/daemon.h"

namespace carma::daemon {

api::ApiResult<void> may_act(const api::Caller& caller, const char* what) {
    if (!caller.read_only) {
        return {};
    }
    return api::api_fail(403, fmt::format("TCP clients of this daemon may not {}: it runs as "
                                          "root and tcp_run_as is not set; set tcp_run_as "
                                          "(--tcp-run-as USER) to the unprivileged user that "
                                          "TCP-submitted tasks run as, or use the Unix socket",
                                          what));
}

api::ApiError store_error(const Error& e) { return api::ApiError{500, e.message}; }

api::ApiResult<void> Daemon::admit(const api::Caller& caller) {
    if (caller.via_tcp || ::geteuid() == 0 || caller.uid == ::geteuid()) {
        return {};
    }
    return api::api_fail(403, fmt::format("this CARMA daemon runs as uid {} and serves only that "
                                          "user; ask its owner or use a daemon running as root",
                                          ::geteuid()));
}

api::ApiResult<store::TaskRow> Daemon::load_task(std::int64_t id) {
    auto t = store_->task(id);
    if (!t) {
        return tl::unexpected(store_error(t.error()));
    }
    if (!*t) {
        return api::api_fail(404, fmt::format("no task with id {}; `carma queue --all` lists "
                                              "tasks",
                                              id));
    }
    return **t;
}

}  // namespace carma::daemon
