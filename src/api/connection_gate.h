#pragma once
// Connection slots of a listener whose callers prove who they are inside the request (a bearer
// token, the web page's session): the TCP API and the web listener. Authentication comes before
// resources: a connection starts unauthenticated, in a small pool of its own; once a request on
// it presents valid credentials it moves to the authenticated pool. When the unauthenticated
// pool is full, the connection that has waited longest in it is shut down to make room, so
// slow or idle connections without credentials (which may never finish a request) cannot keep
// a viewer who holds the token out. A client that finishes its request head takes milliseconds,
// so it is never the oldest for long; an attacker's stalled ones are.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace carma::api {

class ConnectionGate {
public:
    // `evict` ends a connection from another thread (shutdown(2), so its own thread sees the
    // end and closes it); it is called with the gate's lock held, so the descriptor it gets is
    // still open.
    ConnectionGate(std::size_t max_unauthenticated, std::size_t max_authenticated,
                   std::function<void(int fd)> evict);

    struct Ticket {
        std::uint64_t id = 0;
        bool authenticated = false;
    };

    // A new connection on `fd`, unauthenticated.
    Ticket enter(int fd);
    // Its request presented valid credentials: false (and it stays where it was) when every
    // authenticated slot is taken.
    bool promote(Ticket& ticket);
    // The connection ends; its thread closes the descriptor after this returns.
    void leave(const Ticket& ticket);

    std::size_t unauthenticated() const;
    std::size_t authenticated() const;
    std::size_t evicted() const;

private:
    mutable std::mutex mu_;
    std::map<std::uint64_t, int> waiting_;  // unauthenticated: id (arrival order) -> fd
    std::size_t authenticated_ = 0;
    std::size_t evicted_ = 0;
    std::uint64_t next_id_ = 1;
    std::size_t max_unauthenticated_;
    std::size_t max_authenticated_;
    std::function<void(int)> evict_;
};

}  // namespace carma::api
