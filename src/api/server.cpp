#include "api/server.h"

#include "api/query.h"
#include "api/server_replies.h"
#include "api/web_session.h"
#include "core/host_port.h"
#include "core/json_limits.h"
#include "core/secret.h"
#include "core/text.h"
#include "http/json_reply.h"
#include "http/listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace carma::api {

using namespace detail;

namespace {

// A daemon already answering on the socket must not be unlinked from under it.
bool socket_in_use(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const bool in_use = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return in_use;
}

// Which listener a request came in on: who the caller is and what it may reach follow from it.
enum class Listener { Unix, Tcp, Web };

}  // namespace

struct ApiServer::Impl {
    Service& service;
    ServerOptions options;
    http::Listener unix_server{http::Listener::Transport::UnixSocket,
                               limits(options, options.max_connections_per_uid)};
    http::Listener tcp_server{http::Listener::Transport::Tcp,
                              limits(options, options.max_connections_per_uid)};
    // Browsers open several connections per tab, and a lab screen and a few tabs share it.
    http::Listener web_server{http::Listener::Transport::Tcp,
                              limits(options, options.max_web_connections, 1024)};
    std::thread tcp_thread;
    std::thread web_thread;
    bool tcp_bound = false;
    bool web_bound = false;
    // What bind() listens on, one line each, for the log (ApiServer::listening).
    std::vector<std::string> listening;

    Impl(Service& s, ServerOptions o) : service(s), options(std::move(o)) {}

    // `authenticated`: on the Unix socket, connections per uid; elsewhere, those that have
    // presented valid credentials. `max_body`: the web listener takes no bodies.
    static http::ListenerLimits limits(const ServerOptions& o, std::size_t authenticated,
                                       std::optional<std::size_t> max_body = std::nullopt) {
        http::ListenerLimits l;
        l.max_body_bytes = max_body.value_or(o.max_body_bytes);
        l.read_timeout_s = o.read_timeout_s;
        l.head_timeout_s = o.head_timeout_s;
        l.request_timeout_s = o.request_timeout_s;
        l.keep_alive_s = o.keep_alive_s;
        l.max_head_bytes = o.max_head_bytes;
        l.max_unauthenticated_connections = o.max_unauthenticated_connections;
        l.max_authenticated_connections = authenticated;
        l.max_threads = o.max_threads;
        return l;
    }

    ApiResult<Caller> identify(const http::Request& req, Listener where) {
        if (where == Listener::Web) {
            if (options.web_needs_token && !web_session(req)) {
                return api_fail(401, "this page needs the web page's token: open it once as "
                                     "/?token=<token> (a session cookie then stands for it), or "
                                     "send 'Authorization: Bearer <token>'");
            }
            // Nobody in particular: may look at what the page shows, nothing else.
            Caller c = nobody_caller("web viewer");
            c.via_web = true;
            return c;
        }
        if (where == Listener::Tcp) {
            if (options.token.empty() || !secrets_equal(req.get_header_value("Authorization"),
                                                        "Bearer " + options.token)) {
                return api_fail(401, "missing or wrong bearer token; send 'Authorization: Bearer "
                                     "<token>' with the daemon's token");
            }
            Caller c = options.tcp_caller ? *options.tcp_caller : nobody_caller("TCP reader");
            c.via_tcp = true;
            return c;
        }
        // Taken when the connection was accepted: nothing about the caller is looked up by pid.
        const http::Connection* conn = http::current_connection();
        if (!conn || !conn->peer()) {
            return api_fail(403, "cannot identify the caller: " +
                                     (conn ? conn->peer_error()
                                           : std::string("no peer credentials on this connection")));
        }
        return caller_from_credentials(*conn->peer());
    }

    // The request's JSON body, or nothing with the 400 already sent.
    static std::optional<nlohmann::json> json_body(const http::Request& req,
                                                   http::Response& res) {
        if (auto bad = invalid_utf8_at(req.body); bad != std::string_view::npos) {
            send_error(res, {400, fmt::format("the request body is not valid JSON (UTF-8): "
                                              "invalid byte at offset {}",
                                              bad)});
            return std::nullopt;
        }
        if (auto at = json_too_deep_at(req.body)) {
            send_error(res, {400, json_too_deep_message("the request body", kMaxJsonDepth, *at)});
            return std::nullopt;
        }
        try {
            return nlohmann::json::parse(req.body);
        } catch (const nlohmann::json::exception& e) {
            send_error(res, {400, fmt::format("the request body is not valid JSON (UTF-8): {}",
                                              e.what())});
            return std::nullopt;
        }
    }

    // Whether a web request presents the web token or a session made from it; the session's
    // expiry (far ahead for the token itself), to renew a session nearing its end.
    std::optional<std::int64_t> web_session(const http::Request& req) const {
        if (secrets_equal(req.get_header_value("Authorization"), "Bearer " + options.web_token)) {
            return std::numeric_limits<std::int64_t>::max();
        }
        const std::optional<std::string> cookie = cookie_value(req, kSessionCookie);
        if (!cookie) {
            return std::nullopt;
        }
        return check_session(*cookie, options.web_token, unix_seconds());
    }

    static std::int64_t unix_seconds() {
        return std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }

    // Behind a proxy that terminates TLS, the cookie is marked Secure.
    static bool over_tls(const http::Request& req) {
        return req.get_header_value("X-Forwarded-Proto") == "https";
    }

    void set_session_cookie(const http::Request& req, http::Response& res) const {
        res.set_header("Set-Cookie",
                       session_cookie_header(make_session(options.web_token, unix_seconds()),
                                             kSessionLifetimeS, over_tls(req)));
    }

    GuardOptions guard_options(Listener where) const {
        GuardOptions g;
        g.allowed_hosts = options.allowed_hosts;
        if (where == Listener::Web && options.web_host && !is_loopback_host(*options.web_host) &&
            *options.web_host != "0.0.0.0" && *options.web_host != "::") {
            g.allowed_hosts.push_back(*options.web_host);  // the address it was told to serve
        }
        g.unix_socket = where == Listener::Unix;
        return g;
    }

    static RequestHead head_of(const http::Request& req) {
        RequestHead h;
        h.method = req.method;
        h.path = req.path;
        if (req.has_header("Host")) {
            h.host = req.get_header_value("Host");
        }
        h.origin = req.get_header_value("Origin");
        h.sec_fetch_site = req.get_header_value("Sec-Fetch-Site");
        h.sec_fetch_mode = req.get_header_value("Sec-Fetch-Mode");
        h.content_type = req.get_header_value("Content-Type");
        h.carma_page = req.get_header_value(std::string(kPageHeader).c_str());
        // The parser's reading (Transfer-Encoding in any case, Content-Length), never the raw
        // header: `Chunked` once passed here as no body and skipped the 415 check.
        h.has_body = req.has_body;
        return h;
    }

    // Runs on every request once its head is in, before its body is read and before any handler:
    // what a browser may have sent on someone's behalf is refused (request_guard.h), and on the
    // TCP and web listeners the caller proves who it is before the request takes anything more
    // than its head (connection_gate.h).
    http::HandlerResponse admit_request(Listener where, const http::Request& req,
                                        http::Response& res, http::Connection& conn) {
        auto refuse_request = [&](const ApiError& e) {
            send_error(res, e);
            conn.close_after_answer();
            return http::HandlerResponse::Handled;
        };
        if (auto refused = check_request_head(head_of(req), guard_options(where))) {
            return refuse_request(*refused);
        }
        if (where == Listener::Unix) {
            return http::HandlerResponse::Unhandled;
        }
        // Open to all, and answered at once: the health check and the page's sign-in link.
        const bool sign_in = where == Listener::Web && req.path == "/" && req.has_param("token");
        if (req.path == "/healthz" || sign_in) {
            if (!conn.authenticated()) {
                conn.close_after_answer();
            }
            return http::HandlerResponse::Unhandled;
        }
        auto caller = identify(req, where);
        if (!caller) {
            return refuse_request(caller.error());
        }
        if (!conn.promote()) {
            return refuse_request(ApiError{
                429, fmt::format("too many open connections of {} (at most {}); close idle "
                                 "connections and retry",
                                 where == Listener::Web ? "the web page's viewers"
                                                        : "TCP clients",
                                 where == Listener::Web ? options.max_web_connections
                                                        : options.max_connections_per_uid)});
        }
        if (where == Listener::Web && options.web_needs_token) {
            // A session in use is renewed before it ends: an open lab screen stays signed in.
            const std::optional<std::int64_t> expiry = web_session(req);
            if (expiry && *expiry - unix_seconds() < kSessionLifetimeS / 2) {
                set_session_cookie(req, res);
            }
        }
        return http::HandlerResponse::Unhandled;
    }

    void install_admission(http::Listener& s, Listener where) {
        s.set_admission([this, where](const http::Request& req, http::Response& res,
                                      http::Connection& conn) {
            return admit_request(where, req, res, conn);
        });
    }

    // Wraps a handler: identity, admission, JSON errors for anything thrown.
    template <typename F>
    http::Handler guarded(Listener where, F handler) {
        return [this, where, handler](const http::Request& req, http::Response& res) {
            auto caller = identify(req, where);
            if (!caller) {
                send_error(res, caller.error());
                return;
            }
            if (auto ok = service.admit(*caller); !ok) {
                send_error(res, ok.error());
                return;
            }
            handler(*caller, req, res);
        };
    }

    // The page, its assets and the two endpoints it reads: on the socket and the web listener.
    void page_routes(http::Router& s, Listener where) {
        s.Get("/", [this, where](const http::Request& req, http::Response& res) {
            if (where == Listener::Web && options.web_needs_token && req.has_param("token")) {
                // The token leaves the address bar (and the history) at once; a session cookie
                // made from it, not the token, goes with this page's own requests from then on.
                if (!secrets_equal(req.get_param_value("token"), options.web_token)) {
                    send_error(res, {401, "wrong token in ?token=; use the web page's token (the "
                                          "first line of the daemon's --web-token-file)"});
                    return;
                }
                set_session_cookie(req, res);
                res.set_redirect("/", 303);
                return;
            }
            guarded(where, [](const Caller&, const http::Request&, http::Response& r) {
                send_asset(r, "/");
            })(req, res);
        });
        s.Get(R"(/(app\.js|style\.css))",
              guarded(where, [](const Caller&, const http::Request& req,
                                http::Response& res) { send_asset(res, req.path); }));
    }

    // What every listener serves, the read-only web listener too (a Prometheus server scrapes
    // /metrics there with the page's token).
    void view_routes(http::Router& s, Listener where) {
        s.Get("/metrics", guarded(where, [this](const Caller&, const http::Request&,
                                              http::Response& res) {
                  res.set_content(service.metrics(), "text/plain; version=0.0.4");
              }));
        s.Get("/v1/view", guarded(where, [this](const Caller& c, const http::Request&,
                                                http::Response& res) {
                  send_result(res, service.view(c));
              }));
        s.Get("/v1/timeline", guarded(where, [this](const Caller& c, const http::Request& req,
                                                    http::Response& res) {
                  auto since = number_param("since", param(req, "since"), 0, 1e11, -1);
                  auto until = number_param("until", param(req, "until"), 0, 1e11, -1);
                  auto points = integer_param("points", param(req, "points"),
                                              kTimelinePointsMin, kTimelinePointsMax, 600);
                  auto ran = flag_param("ran", param(req, "ran"));
                  for (const Error* e : {since ? nullptr : &since.error(),
                                         until ? nullptr : &until.error(),
                                         points ? nullptr : &points.error(),
                                         ran ? nullptr : &ran.error()}) {
                      if (e != nullptr) {
                          send_error(res, {400, e->message});
                          return;
                      }
                  }
                  auto page = page_params(req);
                  if (!page) {
                      send_error(res, page.error());
                      return;
                  }
                  TimelineQuery q;
                  q.ran = *ran;
                  q.page = *page;
                  q.since = *since >= 0 ? std::optional<double>(*since) : std::nullopt;
                  q.until = *until >= 0 ? std::optional<double>(*until) : std::nullopt;
                  q.points = static_cast<int>(*points);
                  send_result(res, service.timeline(c, q));
              }));
    }

    // The read-only web listener: the page and what it reads, nothing that changes anything.
    void web_routes(http::Listener& s) {
        install_admission(s, Listener::Web);
        page_routes(s, Listener::Web);
        view_routes(s, Listener::Web);
        s.Get("/healthz",
              [](const http::Request&, http::Response& res) {
                  res.set_content("ok\n", "text/plain");
              });
        error_handlers(s, true);
    }

    void routes(http::Listener& s, Listener where) {
        const bool tcp = where == Listener::Tcp;
        install_admission(s, where);
        if (!tcp) {
            page_routes(s, where);
        }
        view_routes(s, where);
        s.Post("/v1/tasks", guarded(where, [this](const Caller& c, const http::Request& req,
                                                http::Response& res) {
                   if (auto body = json_body(req, res)) {
                       send_result(res, service.submit(c, *body), 201);
                   }
               }));
        s.Post("/v1/estimate", guarded(where, [this](const Caller& c, const http::Request& req,
                                                   http::Response& res) {
                   if (auto body = json_body(req, res)) {
                       send_result(res, service.estimate(c, *body));
                   }
               }));
        s.Get("/v1/tasks", guarded(where, [this](const Caller& c, const http::Request& req,
                                               http::Response& res) {
                  auto all = flag_param("all", param(req, "all"));
                  if (!all) {
                      send_error(res, {400, all.error().message});
                      return;
                  }
                  auto page = page_params(req);
                  if (!page) {
                      send_error(res, page.error());
                      return;
                  }
                  auto listed = service.list_tasks(c, TaskListQuery{*all, *page});
                  if (!listed) {
                      send_error(res, listed.error());
                      return;
                  }
                  res.set_content(*listed, "application/json");
              }));
        s.Get(R"(/v1/tasks/(-?\d+(?:_\d+)?))",
              guarded(where, [this](const Caller& c, const http::Request& req,
                                  http::Response& res) {
                  with_task_id(service, c, req, res, [&](std::int64_t id) {
                      send_result(res, service.show_task(c, id));
                  });
              }));
        s.Delete(R"(/v1/tasks/(-?\d+(?:_\d+)?))",
                 guarded(where, [this](const Caller& c, const http::Request& req,
                                     http::Response& res) {
                     with_task_id(service, c, req, res, [&](std::int64_t id) {
                         send_result(res, service.cancel_task(c, id));
                     });
                 }));
        s.Post(R"(/v1/tasks/(-?\d+(?:_\d+)?)/(hold|release))",
               guarded(where, [this](const Caller& c, const http::Request& req,
                                   http::Response& res) {
                   with_task_id(service, c, req, res, [&](std::int64_t id) {
                       send_result(res, service.hold_task(c, id, req.matches[2] == "hold"));
                   });
               }));
        s.Get(R"(/v1/tasks/(-?\d+(?:_\d+)?)/logs)",
              guarded(where, [this](const Caller& c, const http::Request& req,
                                  http::Response& res) {
                  // attempt 0 (the default) is the latest attempt.
                  auto stream = word_param("stream", param(req, "stream"), {"stdout", "stderr"},
                                           "stdout");
                  auto attempt = integer_param("attempt", param(req, "attempt"), 0, 1000000, 0);
                  auto offset = integer_param("offset", param(req, "offset"), 0,
                                              std::numeric_limits<std::int64_t>::max(), 0);
                  for (const Error* e : {stream ? nullptr : &stream.error(),
                                         attempt ? nullptr : &attempt.error(),
                                         offset ? nullptr : &offset.error()}) {
                      if (e != nullptr) {
                          send_error(res, {400, e->message});
                          return;
                      }
                  }
                  const bool err = *stream == "stderr";
                  with_task_id(service, c, req, res, [&](std::int64_t id) {
                      auto chunk = service.task_logs(c, id, err, static_cast<int>(*attempt),
                                                     static_cast<std::uint64_t>(*offset));
                      if (!chunk) {
                          send_error(res, chunk.error());
                          return;
                      }
                      res.set_header("X-Carma-Log-Size", std::to_string(chunk->size));
                      res.set_header("X-Carma-Task-State", chunk->task_state);
                      // A log is the task's own output: never something a browser renders.
                      res.set_header("X-Content-Type-Options", "nosniff");
                      res.set_content(chunk->text, "text/plain; charset=utf-8");
                  });
              }));
        s.Get("/v1/gpus", guarded(where, [this](const Caller& c, const http::Request&,
                                              http::Response& res) {
                  send_result(res, service.gpus(c));
              }));
        s.Get("/v1/nodes", guarded(where, [this](const Caller& c, const http::Request&,
                                               http::Response& res) {
                  send_result(res, service.nodes(c));
              }));
        s.Get("/v1/share", guarded(where, [this](const Caller& c, const http::Request&,
                                               http::Response& res) {
                  send_result(res, service.share(c));
              }));
        s.Post("/v1/nodes/drain", guarded(where, [this](const Caller& c,
                                                      const http::Request& req,
                                                      http::Response& res) {
                   if (auto body = json_body(req, res)) {
                       send_result(res, service.drain_nodes(c, *body));
                   }
               }));
        s.Post("/v1/nodes/lost", guarded(where, [this](const Caller& c,
                                                     const http::Request& req,
                                                     http::Response& res) {
                   if (auto body = json_body(req, res)) {
                       send_result(res, service.declare_node_lost(c, *body));
                   }
               }));
        s.Get("/v1/events", guarded(where, [this](const Caller& c, const http::Request& req,
                                                http::Response& res) {
                  constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
                  auto after = integer_param("after", param(req, "after"), 0, kMaxId, 0);
                  auto task = integer_param("task", param(req, "task"), 0, kMaxId, 0);
                  auto limit = integer_param("limit", param(req, "limit"), 1, 10000, 100);
                  for (const Error* e : {after ? nullptr : &after.error(),
                                         task ? nullptr : &task.error(),
                                         limit ? nullptr : &limit.error()}) {
                      if (e != nullptr) {
                          send_error(res, {400, e->message});
                          return;
                      }
                  }
                  send_result(res, service.events(c, *after, *task, static_cast<int>(*limit)));
              }));
        s.Get("/v1/acct", guarded(where, [this](const Caller& c, const http::Request& req,
                                              http::Response& res) {
                  auto user = text_param("user", param(req, "user"), 256);
                  auto states = list_param("state", param(req, "state"));
                  // Unix seconds; far enough ahead for any date a person writes.
                  auto since = number_param("since", param(req, "since"), 0, 1e11, 0);
                  for (const Error* e : {user ? nullptr : &user.error(),
                                         states ? nullptr : &states.error(),
                                         since ? nullptr : &since.error()}) {
                      if (e != nullptr) {
                          send_error(res, {400, e->message});
                          return;
                      }
                  }
                  auto page = page_params(req);
                  if (!page) {
                      send_error(res, page.error());
                      return;
                  }
                  auto listed = service.acct(c, AcctQuery{*user, *states, *since, *page});
                  if (!listed) {
                      send_error(res, listed.error());
                      return;
                  }
                  res.set_content(*listed, "application/json");
              }));
        s.Get("/v1/status", guarded(where, [this](const Caller& c, const http::Request&,
                                                http::Response& res) {
                  send_result(res, service.status(c));
              }));
        s.Get("/healthz",
              [](const http::Request&, http::Response& res) {
                  res.set_content("ok\n", "text/plain");
              });
        error_handlers(s, false);
    }
};

ApiServer::ApiServer(Service& service, ServerOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {}

ApiServer::~ApiServer() { stop(); }

Result<void> ApiServer::bind() {
    const std::string& path = impl_->options.socket_path;
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("socket path '{}' is longer than {} bytes; choose a shorter path",
                                path, sizeof(sockaddr_un::sun_path) - 1));
    }
    if (socket_in_use(path)) {
        return fail(ErrorCode::Io, fmt::format("another daemon is already serving on {}; stop it "
                                               "or choose another --socket",
                                               path));
    }
    ::unlink(path.c_str());
    impl_->routes(impl_->unix_server, Listener::Unix);
    if (auto bound = impl_->unix_server.bind_unix(path); !bound) {
        return fail(ErrorCode::Io, fmt::format("cannot listen on socket {}: {}", path,
                                               bound.error().message));
    }
    // Everyone may connect; who may do what is decided per request from peer credentials.
    ::chmod(path.c_str(), 0666);
    impl_->listening = {fmt::format("the API on socket {} (every local user; who may do what "
                                    "follows from the caller's uid)",
                                    path)};
    if (impl_->options.web_host) {
        const std::string& host = *impl_->options.web_host;
        if (!is_loopback_host(host) && impl_->options.web_token.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--web {} is not loopback: anyone who can reach it would see "
                                    "the page, so it needs its own token (--web-token-file); or "
                                    "serve on 127.0.0.1 and reach it through an SSH tunnel",
                                    host));
        }
        if (!impl_->options.web_token.empty() && impl_->options.web_token == impl_->options.token) {
            return fail(ErrorCode::InvalidArgument,
                        "the web page's token (--web-token-file) is the TCP API's token "
                        "(--token-file): whoever may see the page could then act as the TCP "
                        "API's user; give the page a token of its own");
        }
        // A token file given is a token required, loopback or not: on a shared server every
        // local user reaches a loopback page, and an admin who gave the page a token meant it
        // to keep them out.
        impl_->options.web_needs_token =
            !is_loopback_host(host) || !impl_->options.web_token.empty();
        impl_->web_routes(impl_->web_server);
        auto bound = impl_->web_server.bind_tcp(host, impl_->options.web_port);
        if (!bound) {
            return fail(ErrorCode::Io, fmt::format("cannot serve the web page on {}:{}: {}", host,
                                                   impl_->options.web_port,
                                                   bound.error().message));
        }
        impl_->web_bound = true;
        impl_->listening.push_back(fmt::format(
            "the web page on http://{}/ ({})", format_host_port(host, *bound),
            impl_->options.web_needs_token ? "sign in with the --web-token-file token"
                                           : "loopback: reach it through an SSH tunnel"));
    }
    if (impl_->options.tcp_host) {
        const std::string& host = *impl_->options.tcp_host;
        if (host != "127.0.0.1" && host != "localhost" && host != "::1") {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("TCP address {} is not loopback; CARMA listens on TCP only on "
                                    "127.0.0.1 or ::1",
                                    host));
        }
        if (impl_->options.token.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        "listening on TCP needs a bearer token (--token-file)");
        }
        impl_->routes(impl_->tcp_server, Listener::Tcp);
        auto bound = impl_->tcp_server.bind_tcp(host, impl_->options.tcp_port);
        if (!bound) {
            return fail(ErrorCode::Io, fmt::format("cannot listen on {}:{}: {}", host,
                                                   impl_->options.tcp_port,
                                                   bound.error().message));
        }
        impl_->tcp_bound = true;
        impl_->listening.push_back(fmt::format("the API on TCP {} (bearer token of "
                                               "--token-file)",
                                               format_host_port(host, *bound)));
    }
    return {};
}

const std::vector<std::string>& ApiServer::listening() const {
    return impl_->listening;
}

void ApiServer::serve() {
    if (impl_->tcp_bound) {
        impl_->tcp_thread = std::thread([this] { impl_->tcp_server.listen_after_bind(); });
    }
    if (impl_->web_bound) {
        impl_->web_thread = std::thread([this] { impl_->web_server.listen_after_bind(); });
    }
    impl_->unix_server.listen_after_bind();
}

void ApiServer::stop() {
    impl_->unix_server.stop();
    impl_->tcp_server.stop();
    impl_->web_server.stop();
    if (impl_->tcp_thread.joinable()) {
        impl_->tcp_thread.join();
    }
    if (impl_->web_thread.joinable()) {
        impl_->web_thread.join();
    }
}

}  // namespace carma::api
