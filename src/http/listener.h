#pragma once
// An HTTP listener that a client without credentials cannot exhaust: cpp-httplib's Server with
// its own connection loop (a thread per connection up to a cap, deadlines for a request's head
// and body, a cap on the head and on the body, connection slots that put authentication before
// resources) and an admission step that runs on every request once its head is in, before its
// body is read. The API's listeners (api/server.h) and the agents' port (cluster/hub.h) use it.
//
// Routes are registered on it as on any httplib::Server (Get, Post, set_error_handler, ...);
// admission replaces set_pre_routing_handler.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <httplib.h>

#include "http/connection_gate.h"
#include "http/listener_limits.h"
#include "http/peer_credentials.h"

namespace carma::http {

class ConnectionStream;

// The connection a handler's request came on. cpp-httplib runs a connection's handlers on the
// thread that serves it and hands them only the Request, whose headers are the client's to
// write: what the listener knows of the connection itself is here (current_connection()).
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

    // No more requests on it after this answer: one that presented no valid credentials, or
    // whose body is refused unread, gets one answer and then the connection ends.
    void close_after_answer() { close_after_ = true; }
    bool closing() const { return close_after_; }

private:
    friend class Listener;
    friend class ConnectionStream;
    void set_idle(bool idle) const;

    int fd_ = -1;
    std::optional<PeerCredentials> peer_;
    std::string peer_error_;
    ConnectionGate* gate_ = nullptr;  // TCP
    ConnectionGate::Ticket ticket_;
    SlotPool* pool_ = nullptr;  // Unix socket: its uid's pool
    std::uint64_t slot_ = 0;
    ConnectionStream* stream_ = nullptr;
    bool close_after_ = false;
};

// The connection the calling thread serves; nullptr outside a Listener's handlers.
Connection* current_connection();

class Listener : public httplib::Server {
public:
    enum class Transport { Tcp, UnixSocket };
    Listener(Transport transport, ListenerLimits limits);
    ~Listener() override;

    // Decides on a request from its head alone, before its body is read: Handled with the
    // answer in the response (a refusal usually also calls close_after_answer()), or Unhandled
    // to go on to the body and the routes. Runs before the body limit is applied, so a client
    // without credentials learns only that it has none.
    using Admission = std::function<httplib::Server::HandlerResponse(
        const httplib::Request& head, httplib::Response& res, Connection& connection)>;
    void set_admission(Admission admission);

    const ListenerLimits& limits() const { return limits_; }

    // Stops listening, also when listen_after_bind() has not begun yet on its thread (where
    // httplib's own stop() does nothing, and the listener would then run on for ever).
    void stop();

    // Not for a Listener: admission takes its place (and the body limit comes after it).
    httplib::Server& set_pre_routing_handler(HandlerWithResponse) = delete;
    httplib::Server& set_payload_max_length(std::size_t) = delete;

private:
    bool process_and_close_socket(socket_t fd) override;
    bool serve(int fd, Connection& connection);
    bool next_request(int fd) const;
    HandlerResponse admit(const httplib::Request& req, httplib::Response& res);

    Transport transport_;
    ListenerLimits limits_;
    Admission admission_;
    struct Pools;
    std::unique_ptr<Pools> pools_;
};

// The text of a size for messages: "8 MiB", "512 KiB", "1000 bytes".
std::string size_text(std::size_t bytes);

}  // namespace carma::http
