#pragma once
// Connection slots of the HTTP listeners (http/listener.h): the API's and the agents' port.
//
// SlotPool: connections of one kind of caller that may stay open between requests (keep-alive),
// at most `max`. A browser keeps several idle connections open per page, so when every slot is
// taken a newcomer takes the place of the connection idle longest, and is refused only when none
// is idle: a page left open (through a tunnel, as the caller's own uid) cannot lock its owner's
// `carma` commands out.
//
// ConnectionGate: the TCP API, the web listener and the agents' port, whose callers prove who
// they are in the request (a bearer token, the web page's session, an agent's credentials).
// Authentication comes before resources: a connection starts unauthenticated, in a small pool of
// its own; once a request on it presents valid credentials it moves to the authenticated
// SlotPool. When the unauthenticated pool is full,
// the connection that has waited longest in it is shut down to make room, so slow or idle
// connections without credentials (which may never finish a request) cannot keep a viewer who
// holds the token out. A client that finishes its request head takes milliseconds, so it is
// never the oldest for long; an attacker's stalled ones are.
//
// Eviction shuts a connection down from another thread (shutdown(2): its own thread sees the end
// and closes it), with the pool's lock held, so the descriptor it gets is still open: a
// connection leaves its pool before its thread closes the descriptor.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace carma::http {

class SlotPool {
public:
    SlotPool(std::size_t max, std::function<void(int fd)> evict);

    // A slot for the connection on `fd`, busy; nothing when all are taken and none is idle.
    std::optional<std::uint64_t> take(int fd);
    // Between requests (idle) or in one (busy).
    void set_idle(std::uint64_t slot, bool idle);
    void give_back(std::uint64_t slot);

    std::size_t taken() const;
    std::size_t evicted() const;

private:
    struct Slot {
        int fd = -1;
        bool idle = false;
        std::uint64_t idle_since = 0;  // order of becoming idle: smallest = idle longest
    };
    mutable std::mutex mu_;
    std::map<std::uint64_t, Slot> slots_;
    std::uint64_t next_ = 1;
    std::uint64_t idle_clock_ = 0;
    std::size_t evicted_ = 0;
    std::size_t max_;
    std::function<void(int)> evict_;
};

// Unix socket: a SlotPool per peer uid (the kernel's word for who connected), each of
// `per_peer` slots, evicting with `evict` as SlotPool does.
class PeerSlots {
public:
    PeerSlots(std::size_t per_peer, std::function<void(int fd)> evict)
        : per_peer_(per_peer), evict_(std::move(evict)) {}

    SlotPool& of(std::int64_t key);

private:
    std::mutex mu_;
    // A pool per uid that ever connected: a machine has few.
    std::map<std::int64_t, std::unique_ptr<SlotPool>> pools_;
    std::size_t per_peer_;
    std::function<void(int)> evict_;
};

class ConnectionGate {
public:
    // `max_per_identity`: of the authenticated, at most this many per identity, idle or not (an
    // agent opens a connection per report and closes it); 0: no cap per identity.
    ConnectionGate(std::size_t max_unauthenticated, std::size_t max_authenticated,
                   std::function<void(int fd)> evict, std::size_t max_per_identity = 0);

    struct Ticket {
        std::uint64_t id = 0;              // in the unauthenticated pool
        std::optional<std::uint64_t> slot;  // in the authenticated one, once promoted
        std::string identity;  // whom its credentials name, counted against its cap; "": none
        bool authenticated() const { return slot.has_value(); }
    };

    enum class Promotion {
        Promoted,
        IdentityFull,  // its identity holds max_per_identity connections already
        Full,          // every authenticated slot is busy
    };

    // A new connection on `fd`, unauthenticated.
    Ticket enter(int fd);
    // Its request presented valid credentials: false (and it stays where it was) when every
    // authenticated slot is busy.
    bool promote(Ticket& ticket, int fd);
    // Likewise, for credentials that name `identity` (a node): also counted against the
    // identity's cap. A connection whose request names another identity than its last one
    // moves to the new identity's pool.
    Promotion promote(Ticket& ticket, int fd, const std::string& identity);
    // An authenticated connection between requests (idle) or in one.
    void set_idle(const Ticket& ticket, bool idle);
    // The connection ends; its thread closes the descriptor after this returns.
    void leave(const Ticket& ticket);

    std::size_t unauthenticated() const;
    std::size_t authenticated() const { return authenticated_.taken(); }
    // The connections of one identity now (0 for one without any).
    std::size_t of_identity(const std::string& identity) const;
    std::size_t evicted() const;

private:
    void leave_identity(Ticket& ticket);

    mutable std::mutex mu_;
    std::map<std::uint64_t, int> waiting_;  // unauthenticated: id (arrival order) -> fd
    // The connections (tickets' ids) of each identity that has one now: an identity leaves with
    // its last connection, so names that credentials may choose (MUNGE's node) cannot grow it
    // beyond the connections.
    std::map<std::string, std::set<std::uint64_t>> identities_;
    std::size_t evicted_ = 0;
    std::uint64_t next_id_ = 1;
    std::size_t max_unauthenticated_;
    std::size_t max_per_identity_;
    std::function<void(int)> evict_;
    SlotPool authenticated_;
};

}  // namespace carma::http
