#pragma once
// An HTTP/1.1 server that a client without credentials cannot exhaust, on a Unix socket or TCP:
// a thread per connection up to a cap, deadlines for a request's head and body, a cap on the
// head and on the body, connection slots that put authentication before resources
// (connection_gate.h), the peer's credentials on a Unix socket, and an admission step that runs
// on every request once its head is in, before its body is read. The API's listeners
// (api/server.h) and the agents' port (cluster/hub.h) use it.
//
// CARMA's own code end to end (no server library's internals): request_parser.h reads the
// bytes, router.h picks the handler, response_writer.h writes the answer; this file owns the
// sockets and the limits. Routes are registered on it as on a Router (Get, Post, ...,
// set_error_handler, set_exception_handler).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/result.h"
#include "http/connection_gate.h"
#include "http/listener_limits.h"
#include "http/message.h"
#include "http/peer_credentials.h"
#include "http/router.h"

namespace carma::http {

class SocketReader;
class ConnectionThreads;

// The connection a handler's request came on: what the listener knows of it that the request's
// headers (the client's to write) cannot say (current_connection()).
class Connection {
public:
    // Unix socket: the peer's credentials, taken once when the connection was accepted, or
    // why they could not be read.
    const std::optional<PeerCredentials>& peer() const { return peer_; }
    const std::string& peer_error() const { return peer_error_; }

    // TCP: whether a request on it has presented valid credentials (promote()); a Unix-socket
    // connection is counted against its uid from the start.
    bool authenticated() const { return !gate_ || ticket_.authenticated(); }
    // Its request presented valid credentials: it leaves the unauthenticated pool for the
    // authenticated one; false (and it stays) when every authenticated slot is busy.
    bool promote();
    // Likewise for credentials that name `identity` (an agent's node): counted against
    // ListenerLimits::max_connections_per_identity as well. Promoted on a Unix socket.
    ConnectionGate::Promotion promote_as(const std::string& identity);

    // No more requests on it after this answer: one that presented no valid credentials, or
    // whose body is refused unread, gets one answer and then the connection ends.
    void close_after_answer() { close_after_ = true; }
    bool closing() const { return close_after_; }

private:
    friend class Listener;
    void set_idle(bool idle) const;

    int fd_ = -1;
    std::optional<PeerCredentials> peer_;
    std::string peer_error_;
    ConnectionGate* gate_ = nullptr;  // TCP
    ConnectionGate::Ticket ticket_;
    SlotPool* pool_ = nullptr;  // Unix socket: its uid's pool
    std::uint64_t slot_ = 0;
    bool close_after_ = false;
};

// The connection the calling thread serves; nullptr outside a Listener's handlers.
Connection* current_connection();

class Listener : public Router {
public:
    enum class Transport { Tcp, UnixSocket };
    Listener(Transport transport, ListenerLimits limits);
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // Decides on a request from its head alone, before its body is read: Handled with the
    // answer in the response (a refusal usually also calls close_after_answer()), or Unhandled
    // to go on to the body and the routes. Runs before the body limit is applied, so a client
    // without credentials learns only that it has none.
    using Admission =
        std::function<HandlerResponse(const Request& head, Response& res, Connection& conn)>;
    void set_admission(Admission admission);

    const ListenerLimits& limits() const { return limits_; }

    // TCP: listens on host:port, port 0 for any free one; the port it got. Errors say why
    // (the caller names the address).
    Result<int> bind_tcp(const std::string& host, int port);
    // Unix socket: listens on `path` (which must not exist).
    Result<void> bind_unix(const std::string& path);

    // Serves until stop() (blocking; run it on its own thread); returns at once when nothing
    // is bound or stop() came first. Connections in progress are finished before it returns.
    void listen_after_bind();
    // Stops listening, also when listen_after_bind() has not begun yet on its thread.
    void stop();

    // Requests served on one connection before it is closed.
    static constexpr std::size_t kMaxRequestsPerConnection = 100;

private:
    void serve_connection(int fd);
    void serve(int fd, Connection& conn);
    bool serve_one(SocketReader& in, Connection& conn, bool last);
    bool next_request(SocketReader& in) const;
    bool answer(int fd, const Request& req, Response& res, bool close) const;

    Transport transport_;
    ListenerLimits limits_;
    Admission admission_;
    struct Pools;
    std::unique_ptr<Pools> pools_;
    std::unique_ptr<ConnectionThreads> threads_;
    std::mutex mu_;  // listen_fd_ and serving_
    int listen_fd_ = -1;
    bool serving_ = false;
    std::atomic<bool> stopping_{false};
};

// The text of a size for messages: "8 MiB", "512 KiB", "1000 bytes".
std::string size_text(std::size_t bytes);

}  // namespace carma::http
