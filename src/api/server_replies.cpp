// How the API answers and what it reads of a request (api/server_replies.h), and the route
// table behind its 405s.

#include "api/server_replies.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <exception>
#include <regex>
#include <vector>

#include "api/web_assets.h"

namespace carma::api::detail {

namespace {

// Every endpoint and the methods it takes: a known path asked with another method gets 405 with
// an Allow header, not 404 or a bare 400.
struct Route {
    std::regex path;
    const char* methods;
};

const std::vector<Route>& routes() {
    static const std::vector<Route> table = {
        {std::regex("/v1/tasks"), "GET, POST"},
        {std::regex("/v1/estimate"), "POST"},
        {std::regex(R"(/v1/tasks/-?\d+)"), "GET, DELETE"},
        {std::regex(R"(/v1/tasks/-?\d+/logs)"), "GET"},
        {std::regex(R"(/v1/tasks/-?\d+/(hold|release))"), "POST"},
        {std::regex("/v1/gpus"), "GET"},
        {std::regex("/v1/events"), "GET"},
        {std::regex("/v1/acct"), "GET"},
        {std::regex("/v1/nodes"), "GET"},
        {std::regex("/v1/share"), "GET"},
        {std::regex("/v1/nodes/drain"), "POST"},
        {std::regex("/v1/status"), "GET"},
        {std::regex("/metrics"), "GET"},
        {std::regex("/healthz"), "GET"},
        {std::regex("/v1/view"), "GET"},
        {std::regex("/v1/timeline"), "GET"},
        {std::regex("/"), "GET"},
        {std::regex(R"(/(app\.js|style\.css))"), "GET"},
    };
    return table;
}

// Whether METHOD is one of a route's "GET, POST" list.
bool method_listed(std::string_view methods, std::string_view method) {
    std::size_t pos = 0;
    while (pos < methods.size()) {
        std::size_t end = methods.find(',', pos);
        if (end == std::string_view::npos) {
            end = methods.size();
        }
        std::string_view m = methods.substr(pos, end - pos);
        while (!m.empty() && m.front() == ' ') {
            m.remove_prefix(1);
        }
        if (m == method) {
            return true;
        }
        pos = end + 1;
    }
    return false;
}

const char* allowed_methods(const std::string& path) {
    for (const Route& r : routes()) {
        if (std::regex_match(path, r.path)) {
            return r.methods;
        }
    }
    return nullptr;
}

}  // namespace

void send_error(http::Response& res, const ApiError& e) {
    if (e.retry_after_s) {
        // RFC 9110: whole seconds.
        res.set_header("Retry-After",
                       std::to_string(std::max<long>(1, std::lround(std::ceil(*e.retry_after_s)))));
    }
    send_json(res, e.status, nlohmann::json{{"error", e.message}});
}


// The value of one cookie of the request (RFC 6265 "name=value; name2=value2").
std::optional<std::string> cookie_value(const http::Request& req, std::string_view name) {
    const std::string header = req.get_header_value("Cookie");
    std::size_t pos = 0;
    while (pos < header.size()) {
        std::size_t end = header.find(';', pos);
        if (end == std::string::npos) {
            end = header.size();
        }
        std::string_view pair(header.data() + pos, end - pos);
        while (!pair.empty() && pair.front() == ' ') {
            pair.remove_prefix(1);
        }
        if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
            return std::string(pair.substr(name.size() + 1));
        }
        pos = end + 1;
    }
    return std::nullopt;
}

// The page's files, compiled in (src/web/); they never change while the daemon runs, but a new
// daemon may bring new ones, so the browser asks again each time the page loads.
void send_asset(http::Response& res, const std::string& path) {
    const std::optional<WebAsset> asset = web_asset(path);
    if (!asset) {
        send_json(res, 404, nlohmann::json{{"error", fmt::format("no such file: {}", path)}});
        return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                   "script-src 'self'; frame-ancestors 'none'");
    res.set_content(std::string(asset->body), asset->content_type);
}

std::optional<std::string> param(const http::Request& req, const char* name) {
    if (!req.has_param(name)) {
        return std::nullopt;
    }
    return req.get_param_value(name);
}

// A task id from the path; one too large for any task is none (a task id is a 64-bit integer).
std::optional<std::int64_t> parse_id(const std::string& text) {
    std::int64_t id = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return id;
}

ApiResult<std::int64_t> path_task_id(Service& service, const Caller& caller,
                                     const std::string& text) {
    const std::size_t under = text.find('_');
    const std::optional<std::int64_t> id = parse_id(text.substr(0, under));
    std::optional<std::int64_t> index;
    if (under != std::string::npos) {
        index = parse_id(text.substr(under + 1));
    }
    if (!id || (under != std::string::npos && (!index || *index > INT_MAX))) {
        return api_fail(404, fmt::format("no task with id {} (task ids are at most {}, array "
                                         "indices at most {}); `carma queue --all` lists tasks",
                                         text.substr(0, 40),
                                         std::numeric_limits<std::int64_t>::max(), INT_MAX));
    }
    if (!index) {
        return *id;
    }
    return service.array_member(caller, *id, static_cast<int>(*index));
}

// A listing's page (`after`, `limit`), or the 400 naming the parameter.
ApiResult<Page> page_params(const http::Request& req) {
    constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
    auto after = integer_param("after", param(req, "after"), 0, kMaxId, 0);
    if (!after) {
        return api_fail(400, after.error().message);
    }
    auto limit = integer_param("limit", param(req, "limit"), 1,
                               static_cast<std::int64_t>(kPageMax),
                               static_cast<std::int64_t>(kPageDefault));
    if (!limit) {
        return api_fail(400, limit.error().message);
    }
    return Page{*after, static_cast<std::size_t>(*limit)};
}

// `web`: only the web listener's routes exist there, so others are 404, not 405.
void error_handlers(http::Router& s, bool web) {
    s.set_error_handler([web](const http::Request& req, http::Response& res) {
        if (!res.body.empty()) {
            return;
        }
        if ((res.status == 404 || res.status == 400) && !web) {
            const char* allowed = allowed_methods(req.path);
            if (allowed && !method_listed(allowed, req.method)) {
                res.status = 405;
                res.set_header("Allow", allowed);
                res.set_content(
                    nlohmann::json{{"error", fmt::format("method {} is not allowed on {}; it "
                                                         "takes {}",
                                                         req.method, req.path, allowed)}}
                        .dump(),
                    "application/json");
                return;
            }
        }
        std::string message;
        switch (res.status) {
            case 404: message = fmt::format("no such endpoint: {} {}", req.method, req.path); break;
            case 400:
                message = fmt::format("malformed request {} {}: {}check the request line "
                                      "and the query (one '?', then name=value pairs "
                                      "joined by '&', percent-encoded)",
                                      req.method, req.path,
                                      req.parse_error.empty() ? "" : req.parse_error + "; ");
                break;
            case 413: message = "the request body is too large (the limit is 1 MiB)"; break;
            default: message = fmt::format("request failed with HTTP {}", res.status); break;
        }
        res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
    });
    s.set_exception_handler([](const http::Request&, http::Response& res,
                               std::exception_ptr ep) {
        send_json(res, 500,
                  nlohmann::json{{"error", "internal error: " + http::exception_text(ep)}});
    });
}

}  // namespace carma::api::detail
