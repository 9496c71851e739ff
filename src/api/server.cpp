#include "api/server.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

namespace carma::api {

namespace {

std::string user_name(uid_t uid) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
    res.status = status;
    // Replace rather than throw: an answer must go out even if some stored text is not UTF-8.
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
}

// Offset of the first byte that breaks UTF-8, or npos. nlohmann's parser passes such bytes
// through inside strings, so bodies are checked before parsing.
std::size_t invalid_utf8_at(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (i + len > s.size()) {
            return i;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) {
                return i;
            }
            cp = (cp << 6) | (cc & 0x3F);
        }
        const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                              (len == 4 && cp < 0x10000);
        if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return i;
        }
        i += len;
    }
    return std::string_view::npos;
}

void send_error(httplib::Response& res, const ApiError& e) {
    send_json(res, e.status, nlohmann::json{{"error", e.message}});
}

template <typename T>
void send_result(httplib::Response& res, const ApiResult<T>& r, int ok_status = 200) {
    if (r) {
        send_json(res, ok_status, *r);
    } else {
        send_error(res, r.error());
    }
}

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

std::int64_t parse_id(const std::string& text) {
    try {
        return std::stoll(text);
    } catch (const std::exception&) {
        return -1;
    }
}

}  // namespace

Result<Caller> caller_from_pid(pid_t pid) {
    if (pid <= 0) {
        return fail(ErrorCode::InvalidArgument, "no peer credentials on this connection");
    }
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    if (!status) {
        return fail(ErrorCode::NotFound, fmt::format("peer process {} is gone", pid));
    }
    Caller c;
    c.pid = pid;
    bool have_uid = false, have_gid = false;
    std::string line;
    while (std::getline(status, line)) {
        std::istringstream fields(line);
        std::string key;
        fields >> key;
        if (key == "Uid:") {
            unsigned real = 0;
            fields >> real;
            c.uid = real;
            have_uid = true;
        } else if (key == "Gid:") {
            unsigned real = 0;
            fields >> real;
            c.gid = real;
            have_gid = true;
        }
    }
    if (!have_uid || !have_gid) {
        return fail(ErrorCode::Internal, fmt::format("cannot read the identity of process {}", pid));
    }
    c.user = user_name(c.uid);
    return c;
}

struct ApiServer::Impl {
    Service& service;
    ServerOptions options;
    httplib::Server unix_server;
    httplib::Server tcp_server;
    std::thread tcp_thread;
    bool tcp_bound = false;

    Impl(Service& s, ServerOptions o) : service(s), options(std::move(o)) {}

    ApiResult<Caller> identify(const httplib::Request& req, bool tcp) {
        if (tcp) {
            const std::string expected = "Bearer " + options.token;
            if (options.token.empty() || req.get_header_value("Authorization") != expected) {
                return api_fail(401, "missing or wrong bearer token; send 'Authorization: Bearer "
                                     "<token>' with the daemon's token");
            }
            Caller c;
            c.uid = ::geteuid();
            c.gid = ::getegid();
            c.user = user_name(c.uid);
            c.via_tcp = true;
            return c;
        }
        auto caller = caller_from_pid(static_cast<pid_t>(req.remote_port));
        if (!caller) {
            return api_fail(403, "cannot identify the caller: " + caller.error().message);
        }
        return *caller;
    }

    // Wraps a handler: identity, admission, JSON errors for anything thrown.
    template <typename F>
    httplib::Server::Handler guarded(bool tcp, F handler) {
        return [this, tcp, handler](const httplib::Request& req, httplib::Response& res) {
            auto caller = identify(req, tcp);
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

    void routes(httplib::Server& s, bool tcp) {
        s.set_payload_max_length(options.max_body_bytes);
        s.Post("/v1/tasks", guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                                httplib::Response& res) {
                   if (auto bad = invalid_utf8_at(req.body); bad != std::string_view::npos) {
                       send_error(res, {400, fmt::format("the request body is not valid JSON "
                                                         "(UTF-8): invalid byte at offset {}",
                                                         bad)});
                       return;
                   }
                   nlohmann::json body;
                   try {
                       body = nlohmann::json::parse(req.body);
                   } catch (const nlohmann::json::exception& e) {
                       send_error(res, {400, fmt::format("the request body is not valid JSON "
                                                         "(UTF-8): {}", e.what())});
                       return;
                   }
                   send_result(res, service.submit(c, body), 201);
               }));
        s.Get("/v1/tasks", guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                               httplib::Response& res) {
                  const bool all = req.has_param("all") && req.get_param_value("all") != "0";
                  auto listed = service.list_tasks(c, all);
                  if (!listed) {
                      send_error(res, listed.error());
                      return;
                  }
                  res.set_content(*listed, "application/json");
              }));
        s.Get(R"(/v1/tasks/(-?\d+))",
              guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                  httplib::Response& res) {
                  send_result(res, service.show_task(c, parse_id(req.matches[1])));
              }));
        s.Delete(R"(/v1/tasks/(-?\d+))",
                 guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                     httplib::Response& res) {
                     send_result(res, service.cancel_task(c, parse_id(req.matches[1])));
                 }));
        s.Get(R"(/v1/tasks/(-?\d+)/logs)",
              guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                  httplib::Response& res) {
                  const bool err = req.get_param_value("stream") == "stderr";
                  int attempt = 0;
                  std::uint64_t offset = 0;
                  try {
                      if (req.has_param("attempt")) {
                          attempt = std::stoi(req.get_param_value("attempt"));
                      }
                      if (req.has_param("offset")) {
                          offset = std::stoull(req.get_param_value("offset"));
                      }
                  } catch (const std::exception&) {
                      send_error(res, {400, "attempt and offset must be whole numbers"});
                      return;
                  }
                  auto chunk = service.task_logs(c, parse_id(req.matches[1]), err, attempt, offset);
                  if (!chunk) {
                      send_error(res, chunk.error());
                      return;
                  }
                  res.set_header("X-Carma-Log-Size", std::to_string(chunk->size));
                  res.set_header("X-Carma-Task-State", chunk->task_state);
                  res.set_content(chunk->text, "text/plain");
              }));
        s.Get("/v1/gpus", guarded(tcp, [this](const Caller& c, const httplib::Request&,
                                              httplib::Response& res) {
                  send_result(res, service.gpus(c));
              }));
        s.Get("/v1/events", guarded(tcp, [this](const Caller& c, const httplib::Request& req,
                                                httplib::Response& res) {
                  std::int64_t after = 0, task = 0;
                  int limit = 100;
                  try {
                      if (req.has_param("after")) {
                          after = std::stoll(req.get_param_value("after"));
                      }
                      if (req.has_param("task")) {
                          task = std::stoll(req.get_param_value("task"));
                      }
                      if (req.has_param("limit")) {
                          limit = std::stoi(req.get_param_value("limit"));
                      }
                  } catch (const std::exception&) {
                      send_error(res, {400, "after, task and limit must be whole numbers"});
                      return;
                  }
                  send_result(res, service.events(c, after, task, limit));
              }));
        s.Get("/v1/status", guarded(tcp, [this](const Caller& c, const httplib::Request&,
                                                httplib::Response& res) {
                  send_result(res, service.status(c));
              }));
        s.Get("/metrics", guarded(tcp, [this](const Caller&, const httplib::Request&,
                                              httplib::Response& res) {
                  res.set_content(service.metrics(), "text/plain; version=0.0.4");
              }));
        s.Get("/healthz",
              [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
        s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) {
                return;
            }
            std::string message;
            switch (res.status) {
                case 404: message = fmt::format("no such endpoint: {} {}", req.method, req.path); break;
                case 413: message = "the request body is too large (the limit is 1 MiB)"; break;
                default: message = fmt::format("request failed with HTTP {}", res.status); break;
            }
            res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
        });
        s.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                   std::exception_ptr ep) {
            std::string what = "unknown error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            send_json(res, 500, nlohmann::json{{"error", "internal error: " + what}});
        });
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
    impl_->routes(impl_->unix_server, false);
    impl_->unix_server.set_address_family(AF_UNIX);
    if (!impl_->unix_server.bind_to_port(path.c_str(), 80)) {
        return fail(ErrorCode::Io, fmt::format("cannot listen on socket {}: {}", path,
                                               std::strerror(errno)));
    }
    // Everyone may connect; who may do what is decided per request from peer credentials.
    ::chmod(path.c_str(), 0666);
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
        impl_->routes(impl_->tcp_server, true);
        if (!impl_->tcp_server.bind_to_port(host.c_str(), impl_->options.tcp_port)) {
            return fail(ErrorCode::Io, fmt::format("cannot listen on {}:{}: {}", host,
                                                   impl_->options.tcp_port, std::strerror(errno)));
        }
        impl_->tcp_bound = true;
    }
    return {};
}

void ApiServer::serve() {
    if (impl_->tcp_bound) {
        impl_->tcp_thread = std::thread([this] { impl_->tcp_server.listen_after_bind(); });
    }
    impl_->unix_server.listen_after_bind();
}

void ApiServer::stop() {
    impl_->unix_server.stop();
    impl_->tcp_server.stop();
    if (impl_->tcp_thread.joinable()) {
        impl_->tcp_thread.join();
    }
}

}  // namespace carma::api
