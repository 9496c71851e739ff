#pragma once
// The HTTP+JSON API (docs/api.md) on a Unix socket, optionally also on loopback TCP with a bearer
// token. Caller identity comes from the socket's peer credentials, taken once per connection.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/request_guard.h"
#include "api/service.h"
#include "core/result.h"
#include "http/peer_credentials.h"

namespace carma::api {

struct ServerOptions {
    std::string socket_path;
    std::optional<std::string> tcp_host;  // must be a loopback address
    int tcp_port = 0;
    std::string token;                    // the TCP API's bearer token; required with tcp_host
    // Who a request with the right token acts as, for looking as for acting. Unset: nobody in
    // particular, who may look at what every user may see but not act (a root daemon without
    // tcp_run_as must never act or read for a TCP client as root).
    std::optional<Caller> tcp_caller;
    // The read-only web page (--web): any address; one that is not loopback needs `web_token`,
    // its own token, never the TCP API's: holding it shows the page and nothing more. Whenever
    // `web_token` is given, loopback or not, the page requires it (web_needs_token is then set);
    // loopback without one serves every local user as the socket does.
    std::optional<std::string> web_host;
    int web_port = 0;
    std::string web_token;
    bool web_needs_token = false;
    // Names (besides localhost and loopback addresses) that requests may carry in Host: the
    // names people type to reach --web from elsewhere. Any other Host is refused (a web page
    // that re-points its own name at this machine must not reach the API; request_guard.h).
    std::vector<std::string> allowed_hosts;
    // Connections of the TCP and web listeners that have presented valid credentials (web) or
    // at most max_connections_per_uid (TCP); those that have not yet wait in a pool of their
    // own whose oldest is dropped when it is full (connection_gate.h).
    std::size_t max_web_connections = 32;
    std::size_t max_unauthenticated_connections = 16;
    std::size_t max_body_bytes = 1 << 20;
    // Against slow or idle clients: each read or write waits at most read_timeout_s, a
    // request's head (request line and headers) must arrive within head_timeout_s and stay
    // under max_head_bytes (else 431), its body within request_timeout_s; an idle
    // keep-alive connection is closed after keep_alive_s.
    int read_timeout_s = 5;
    int head_timeout_s = 10;
    int request_timeout_s = 60;
    int keep_alive_s = 5;
    std::size_t max_head_bytes = 8192;
    // Open connections per peer uid (all TCP clients count as one peer); beyond it, 429. Below
    // max_threads, so one user can never hold every handler thread.
    std::size_t max_connections_per_uid = 8;
    std::size_t max_threads = 128;
};

// The socket's peer (http/peer_credentials.h): the listener takes it once per connection.
using http::PeerCredentials;
using http::peer_credentials;

// The caller for those credentials; the user name from the uid (getpwuid_r), never from the
// pid, which may by now belong to another process.
Caller caller_from_credentials(const PeerCredentials& peer);

// The caller a user name stands for (tcp_run_as); errors name the user.
Result<Caller> caller_for_user(const std::string& name);

// The bearer token from the first line of a token file, which must be a regular file owned by
// the daemon's user and closed to group and others (else anyone on the machine could act as a
// TCP client); errors name the file and the chmod that fixes it.
Result<std::string> read_token_file(const std::string& path);

class ApiServer {
public:
    ApiServer(Service& service, ServerOptions options);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    // Binds the socket(s); errors name the path or address.
    Result<void> bind();
    // After bind(): each address it listens on and who may use it, one line each ("the web page
    // on http://127.0.0.1:8080/ (...)"), for the log; ports as bound (a port 0 is chosen then).
    const std::vector<std::string>& listening() const;
    // Serves until stop() (blocking; run it on its own thread).
    void serve();
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace carma::api
