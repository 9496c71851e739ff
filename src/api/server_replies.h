#pragma once
// Private to api/server*.cpp: how the API answers (JSON errors with Retry-After, results, the
// page's compiled assets), what it reads of a request (a cookie, a parameter, a listing's page,
// the path's task id), and the error handlers that turn a known path asked with another method
// into 405 with an Allow header (server_replies.cpp).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/query.h"
#include "api/service.h"
#include "http/json_reply.h"
#include "http/message.h"
#include "http/router.h"

namespace carma::api::detail {

// Replace rather than throw: an answer must go out even if some stored text is not UTF-8.
using http::send_json;

void send_error(http::Response& res, const ApiError& e);

template <typename T>
void send_result(http::Response& res, const ApiResult<T>& r, int ok_status = 200) {
    if (r) {
        send_json(res, ok_status, *r);
    } else {
        send_error(res, r.error());
    }
}

// The value of one cookie of the request (RFC 6265 "name=value; name2=value2").
std::optional<std::string> cookie_value(const http::Request& req, std::string_view name);
// The page's files, compiled in (src/web/), with the headers that keep them the page's own.
void send_asset(http::Response& res, const std::string& path);
std::optional<std::string> param(const http::Request& req, const char* name);
// A task id from the path; one too large for any task is none (a task id is a 64-bit integer).
std::optional<std::int64_t> parse_id(const std::string& text);
// A listing's page (`after`, `limit`), or the 400 naming the parameter.
ApiResult<Page> page_params(const http::Request& req);

// The path's task, "12" or an array member "12_3" (Slurm's ARRAY_INDEX, looked up through the
// service); the 404 names it as written.
ApiResult<std::int64_t> path_task_id(Service& service, const Caller& caller,
                                     const std::string& text);

// Runs `fn` with the path's task id, or answers 404 naming the task as written.
template <typename F>
void with_task_id(Service& service, const Caller& caller, const http::Request& req,
                  http::Response& res, F fn) {
    auto id = path_task_id(service, caller, req.matches[1]);
    if (!id) {
        send_error(res, id.error());
        return;
    }
    fn(*id);
}

// `web`: only the web listener's routes exist there, so others are 404, not 405.
void error_handlers(http::Router& s, bool web);

}  // namespace carma::api::detail
