#include "http/router.h"

#include <fmt/format.h>

#include "http/json_reply.h"

namespace carma::http {

Router& Router::add(const char* method, const std::string& pattern, Handler handler) {
    routes_.push_back(Route{method, std::regex(pattern), std::move(handler)});
    return *this;
}

Router& Router::Get(const std::string& p, Handler h) { return add("GET", p, std::move(h)); }
Router& Router::Post(const std::string& p, Handler h) { return add("POST", p, std::move(h)); }
Router& Router::Put(const std::string& p, Handler h) { return add("PUT", p, std::move(h)); }
Router& Router::Delete(const std::string& p, Handler h) { return add("DELETE", p, std::move(h)); }
Router& Router::Patch(const std::string& p, Handler h) { return add("PATCH", p, std::move(h)); }
Router& Router::Options(const std::string& p, Handler h) {
    return add("OPTIONS", p, std::move(h));
}

Router& Router::set_error_handler(Handler handler) {
    error_handler_ = std::move(handler);
    return *this;
}

Router& Router::set_exception_handler(ExceptionHandler handler) {
    exception_handler_ = std::move(handler);
    return *this;
}

namespace {

void internal_error(Response& res, const std::string& what) {
    res = Response{};
    send_json(res, 500, nlohmann::json{{"error", "internal error: " + what}});
}

}  // namespace

void Router::route(Request& req, Response& res) const {
    const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
    for (const Route& r : routes_) {
        if (r.method != method || !std::regex_match(req.path, req.matches, r.pattern)) {
            continue;
        }
        try {
            r.handler(req, res);
        } catch (...) {
            const std::exception_ptr ep = std::current_exception();
            if (exception_handler_) {
                try {
                    exception_handler_(req, res, ep);
                } catch (...) {
                    internal_error(res, "the exception handler failed");
                }
            } else {
                internal_error(res, exception_text(ep));
            }
        }
        return;
    }
    req.matches = std::smatch();
    res.status = 404;
}

void Router::finish(const Request& req, Response& res) const {
    if (res.status < 0) {
        res.status = 200;
    }
    if (res.status < 400) {
        return;
    }
    if (error_handler_) {
        try {
            error_handler_(req, res);
        } catch (...) {
            // The answer goes out as it is.
        }
    }
    if (res.body.empty()) {
        const std::string message =
            !req.parse_error.empty()
                ? "malformed request: " + req.parse_error
                : fmt::format("request failed with HTTP {}", res.status);
        send_json(res, res.status, nlohmann::json{{"error", message}});
    }
}

}  // namespace carma::http
