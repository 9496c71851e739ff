// The agents' port: every request admitted on its head (credentials, the node's report rate, a
// connection slot) before its body is read, then the report verified, taken and answered with a
// signature bound to its nonce.

#include "cluster/hub.h"
#include "cluster/hub_impl.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/json_reply.h"

namespace carma::cluster {

using nlohmann::json;

namespace {

// The head the pre-routing check admitted, for the handler that runs next on the same thread
// (the listener serves a connection's requests on one thread, one at a time).
thread_local std::optional<auth::RequestHead> t_admitted;

}  // namespace

bool Hub::Impl::allow_report(const std::string& node, double* retry_after_s) {
    std::lock_guard lock(limiter_mu);
    if (!report_limiter) {
        const double rate =
            options.report_rate_per_s > 0
                ? options.report_rate_per_s
                : std::max(10.0, 20.0 / std::max(options.report_period_s, 1e-3));
        report_limiter.emplace(rate, options.report_burst);
    }
    return report_limiter->allow(node, exec::steady_now(), retry_after_s);
}

std::variant<auth::RequestHead, Hub::Impl::Refusal> Hub::Impl::admit(const std::string& header) {
    if (header.empty()) {
        return Refusal{401, fmt::format("the request carries no {} header: agents sign every "
                                        "report (carma agent --token-file F, or --munge)",
                                        auth::kAuthHeader)};
    }
    auto head = options.auth->verify_head(header, exec::unix_now());
    if (!head) {
        return Refusal{head.error().code == ErrorCode::Io ? 503 : 401, head.error().message};
    }
    // The body's own length is the mode's to check (verify_body): in MUNGE mode what travels
    // is a credential of the signed JSON. Its size is the listener's (limits.max_body_bytes).
    return std::move(*head);
}

Hub::Impl::Reply Hub::Impl::error_reply(int status, const std::string& message) {
    return Reply{status, "",
                 json{{"error", message}}.dump(-1, ' ', false,
                                               json::error_handler_t::replace),
                 "application/json"};
}

int Hub::Impl::status_of(ErrorCode code) {
    switch (code) {
        case ErrorCode::Forbidden: return 403;
        case ErrorCode::Conflict: return 409;
        case ErrorCode::Io: return 503;
        default: return 400;
    }
}

Hub::Impl::Reply Hub::Impl::serve(const auth::RequestHead& head, const std::string& body) {
    auto text = options.auth->verify_body(head, body);
    if (!text) {
        return error_reply(text.error().code == ErrorCode::Io ? 503 : 401,
                           text.error().message);
    }
    auto parsed = parse_wire_json(*text);
    if (!parsed) {
        return error_reply(400, parsed.error().message);
    }
    auto report = report_from_json(*parsed);
    if (!report) {
        return error_reply(400, report.error().message);
    }
    if (head.mode == auth::Mode::Munge) {
        if (auto in = node_in_allocation(*report); !in) {
            return error_reply(status_of(in.error().code), in.error().message);
        }
    }
    Result<json> answer = [&] {
        std::lock_guard lock(mu);
        return take_report(std::move(*report), head.node);
    }();
    if (!answer) {
        return error_reply(status_of(answer.error().code), answer.error().message);
    }
    auto sealed = options.auth->sign_answer(head, answer->dump(), exec::unix_now());
    if (!sealed) {
        return error_reply(status_of(sealed.error().code),
                           "cannot sign the answer: " + sealed.error().message);
    }
    return Reply{200, sealed->header, sealed->body,
                 head.mode == auth::Mode::Munge ? "text/plain" : "application/json"};
}

namespace {

void send_error(http::Response& res, int status, const std::string& message) {
    http::send_json(res, status, json{{"error", message}});
}

// What a refusal the listener made says, as JSON, whatever bytes the request held.
void agent_port_errors(http::Listener& server) {
    server.set_error_handler([](const http::Request& req, http::Response& res) {
        if (!res.body.empty()) {
            return;
        }
        switch (res.status) {
            case 404:
                send_error(res, 404, fmt::format("no such endpoint on the agents' port: {} {} "
                                                 "(agents POST /agent/v1/report)",
                                                 req.method, req.path));
                break;
            case 400:
                send_error(res, 400, fmt::format("malformed request {} {}: {}check the request "
                                                 "line and the headers",
                                                 req.method, req.path,
                                                 req.parse_error.empty()
                                                     ? ""
                                                     : req.parse_error + "; "));
                break;
            default:
                send_error(res, res.status,
                           fmt::format("request failed with HTTP {}", res.status));
                break;
        }
    });
    server.set_exception_handler([](const http::Request&, http::Response& res,
                                    std::exception_ptr ep) {
        send_error(res, 500, "internal error: " + http::exception_text(ep));
    });
}

}  // namespace

Result<void> Hub::listen() {
    Impl& m = *impl_;
    m.http = std::make_unique<http::Listener>(http::Listener::Transport::Tcp, m.options.limits);
    http::Listener& server = *m.http;
    // Before the body is read: a sender without the node's credentials never gets to send one,
    // and a node over its report rate is answered without its report being read.
    server.set_admission([this](const http::Request& req, http::Response& res,
                                http::Connection& conn) {
        t_admitted.reset();
        auto refuse = [&](int status, const std::string& message) {
            send_error(res, status, message);
            conn.close_after_answer();
            return http::HandlerResponse::Handled;
        };
        auto admitted = impl_->admit(req.get_header_value(std::string(auth::kAuthHeader).c_str()));
        if (auto* refused = std::get_if<Impl::Refusal>(&admitted)) {
            return refuse(refused->status, refused->message);
        }
        auth::RequestHead head = std::get<auth::RequestHead>(std::move(admitted));
        double wait_s = 0;
        if (!impl_->allow_report(head.node, &wait_s)) {
            res.set_header("Retry-After",
                           std::to_string(std::max<long>(1, std::lround(std::ceil(wait_s)))));
            return refuse(429, fmt::format("node {} reports faster than the server takes "
                                           "reports (a burst of {:g}, then {:g} a second); "
                                           "this report is dropped, the next in its period is "
                                           "taken",
                                           head.node, impl_->report_limiter->burst(),
                                           impl_->report_limiter->rate_per_s()));
        }
        switch (conn.promote_as(head.node)) {
            case http::ConnectionGate::Promotion::Promoted: break;
            case http::ConnectionGate::Promotion::IdentityFull:
                return refuse(429, fmt::format(
                                       "node {} has too many connections open at once (at most "
                                       "{} per node, agent_connections_per_node): an agent "
                                       "needs one; this one is closed, retry when the others "
                                       "are done",
                                       head.node,
                                       impl_->options.limits.max_connections_per_identity));
            case http::ConnectionGate::Promotion::Full:
                return refuse(429, fmt::format(
                                       "too many agents' connections at once (at most {}, "
                                       "agent_connections); retry in a moment",
                                       impl_->options.limits.max_authenticated_connections));
        }
        // After the caps, so a flood of names costs at most a slot's worth of look-ups.
        if (head.mode == auth::Mode::Munge) {
            if (auto at = impl_->node_at_origin(head); !at) {
                return refuse(Impl::status_of(at.error().code), at.error().message);
            }
        }
        t_admitted = std::move(head);
        return http::HandlerResponse::Unhandled;
    });
    server.Post("/agent/v1/report", [this](const http::Request& req, http::Response& res) {
        std::optional<auth::RequestHead> head = std::move(t_admitted);
        t_admitted.reset();
        const Impl::Reply r = head ? impl_->serve(*head, req.body)
                                   : Impl::error_reply(401, "the request was not admitted");
        res.status = r.status;
        if (!r.auth_header.empty()) {
            res.set_header(std::string(auth::kAuthHeader).c_str(), r.auth_header);
        }
        res.set_content(r.body, r.content_type);
    });
    agent_port_errors(server);
    auto bound = server.bind_tcp(m.options.host, m.options.port);
    if (!bound && m.options.port == 0) {
        return fail(ErrorCode::Io, fmt::format("cannot listen for agents on {}: no free port",
                                               m.options.host));
    }
    if (!bound) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot listen for agents on {}:{}: the address is in use or not "
                                "this machine's; pick another with --agents HOST:PORT",
                                m.options.host, m.options.port));
    }
    m.options.port = *bound;
    m.http_thread = std::thread([this] { impl_->http->listen_after_bind(); });
    m.monitor_thread = std::thread([this] { impl_->monitor(); });
    spdlog::info("listening for node agents on {}", address());
    return {};
}

}  // namespace carma::cluster
