#include "http/connection_gate.h"

#include <algorithm>
#include <utility>

namespace carma::http {

SlotPool::SlotPool(std::size_t max, std::function<void(int fd)> evict)
    : max_(max), evict_(std::move(evict)) {}

std::optional<std::uint64_t> SlotPool::take(int fd) {
    std::lock_guard lock(mu_);
    if (slots_.size() >= max_) {
        auto idlest = slots_.end();
        for (auto it = slots_.begin(); it != slots_.end(); ++it) {
            if (it->second.idle &&
                (idlest == slots_.end() || it->second.idle_since < idlest->second.idle_since)) {
                idlest = it;
            }
        }
        if (idlest == slots_.end()) {
            return std::nullopt;
        }
        evict_(idlest->second.fd);
        slots_.erase(idlest);
        ++evicted_;
    }
    const std::uint64_t id = next_++;
    slots_.emplace(id, Slot{fd, false, 0});
    return id;
}

void SlotPool::set_idle(std::uint64_t slot, bool idle) {
    std::lock_guard lock(mu_);
    if (auto it = slots_.find(slot); it != slots_.end()) {
        it->second.idle = idle;
        it->second.idle_since = idle ? ++idle_clock_ : 0;
    }
}

void SlotPool::give_back(std::uint64_t slot) {
    std::lock_guard lock(mu_);
    slots_.erase(slot);
}

std::size_t SlotPool::taken() const {
    std::lock_guard lock(mu_);
    return slots_.size();
}

std::size_t SlotPool::evicted() const {
    std::lock_guard lock(mu_);
    return evicted_;
}

ConnectionGate::ConnectionGate(std::size_t max_unauthenticated, std::size_t max_authenticated,
                               std::function<void(int fd)> evict)
    : max_unauthenticated_(std::max<std::size_t>(1, max_unauthenticated)),
      evict_(evict),
      authenticated_(max_authenticated, evict) {}

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
    return Ticket{id, std::nullopt};
}

bool ConnectionGate::promote(Ticket& ticket, int fd) {
    if (ticket.authenticated()) {
        return true;
    }
    // Leaves the unauthenticated pool first: a connection is in one pool at a time, so it is
    // never evicted from both.
    {
        std::lock_guard lock(mu_);
        waiting_.erase(ticket.id);  // it may have been evicted meanwhile; it still got this far
    }
    ticket.slot = authenticated_.take(fd);
    return ticket.authenticated();
}

void ConnectionGate::set_idle(const Ticket& ticket, bool idle) {
    if (ticket.slot) {
        authenticated_.set_idle(*ticket.slot, idle);
    }
}

void ConnectionGate::leave(const Ticket& ticket) {
    if (ticket.slot) {
        authenticated_.give_back(*ticket.slot);
        return;
    }
    std::lock_guard lock(mu_);
    waiting_.erase(ticket.id);
}

std::size_t ConnectionGate::unauthenticated() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
}

std::size_t ConnectionGate::evicted() const {
    std::lock_guard lock(mu_);
    return evicted_ + authenticated_.evicted();
}

SlotPool& PeerSlots::of(std::int64_t key) {
    std::lock_guard lock(mu_);
    auto it = pools_.find(key);
    if (it == pools_.end()) {
        it = pools_.emplace(key, std::make_unique<SlotPool>(per_peer_, evict_)).first;
    }
    return *it->second;
}

}  // namespace carma::http
