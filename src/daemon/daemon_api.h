#pragma once
// Private to the daemon's API answers (daemon_api.cpp, daemon_submit.cpp, daemon_tasks.cpp,
// daemon_status.cpp, daemon_nodes.cpp, daemon_controls.cpp): the checks and error shapes more
// than one of them uses.

#include "api/service.h"
#include "core/result.h"

namespace carma::daemon {

// A TCP client of a root daemon acts as tcp_run_as; without it, as nobody who may act.
api::ApiResult<void> may_act(const api::Caller& caller, const char* what);

// A store that cannot be read or written: the daemon's fault, not the request's.
api::ApiError store_error(const Error& e);

}  // namespace carma::daemon
