#include "api/connection_gate.h"

#include <algorithm>
#include <utility>

namespace carma::api {

ConnectionGate::ConnectionGate(std::size_t max_unauthenticated, std::size_t max_authenticated,
                               std::function<void(int fd)> evict)
    : max_unauthenticated_(std::max<std::size_t>(1, max_unauthenticated)),
      max_authenticated_(max_authenticated),
      evict_(std::move(evict)) {}

ConnectionGate::Ticket ConnectionGate::enter(int fd) {
    std::lock_guard lock(mu_);
    while (waiting_.size() >= max_unauthenticated_) {
        const auto oldest = waiting_.begin();
        evict_(oldest->second);
        waiting_.erase(oldest);
        ++evicted_;
    }
    const std::uint64_t id = next_id_++;
    waiting_.emplace(id, fd);
    return Ticket{id, false};
}

bool ConnectionGate::promote(Ticket& ticket) {
    std::lock_guard lock(mu_);
    if (ticket.authenticated) {
        return true;
    }
    if (authenticated_ >= max_authenticated_) {
        return false;
    }
    waiting_.erase(ticket.id);  // it may have been evicted meanwhile; it still got this far
    ++authenticated_;
    ticket.authenticated = true;
    return true;
}

void ConnectionGate::leave(const Ticket& ticket) {
    std::lock_guard lock(mu_);
    if (ticket.authenticated) {
        --authenticated_;
    } else {
        waiting_.erase(ticket.id);
    }
}

std::size_t ConnectionGate::unauthenticated() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
}

std::size_t ConnectionGate::authenticated() const {
    std::lock_guard lock(mu_);
    return authenticated_;
}

std::size_t ConnectionGate::evicted() const {
    std::lock_guard lock(mu_);
    return evicted_;
}

}  // namespace carma::api
