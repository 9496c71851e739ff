#pragma once
// The HTTP+JSON API (docs/api.md) on a Unix socket, optionally also on loopback TCP with a bearer
// token. Caller identity comes from the socket's peer credentials.

#include <memory>
#include <optional>
#include <string>

#include "api/service.h"
#include "core/result.h"

namespace carma::api {

struct ServerOptions {
    std::string socket_path;
    std::optional<std::string> tcp_host;  // must be a loopback address
    int tcp_port = 0;
    std::string token;                    // required when tcp_host is set
    std::size_t max_body_bytes = 1 << 20;
};

// The identity of the process at the other end of a Unix-socket request. cpp-httplib reports
// the peer's pid (SO_PEERCRED) as remote_port on AF_UNIX sockets; uid and gid are read from
// /proc/<pid>/status while the connection (and so the process) is alive.
Result<Caller> caller_from_pid(pid_t pid);

class ApiServer {
public:
    ApiServer(Service& service, ServerOptions options);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    // Binds the socket(s); errors name the path or address.
    Result<void> bind();
    // Serves until stop() (blocking; run it on its own thread).
    void serve();
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace carma::api
