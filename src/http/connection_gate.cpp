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
                               std::function<void(int fd)> evict, std::size_t max_per_identity)
    : max_unauthenticated_(std::max<std::size_t>(1, max_unauthenticated)),
      max_per_identity_(max_per_identity),
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
    Ticket ticket;
    ticket.id = id;
    return ticket;
}

bool ConnectionGate::promote(Ticket& ticket, int fd) {
    return promote(ticket, fd, std::string()) == Promotion::Promoted;
}

ConnectionGate::Promotion ConnectionGate::promote(Ticket& ticket, int fd,
                                                  const std::string& identity) {
    // Its identity's count first: an identity at its cap is refused before it can take (or
    // evict) anyone else's slot.
    if (max_per_identity_ > 0 && !identity.empty() && ticket.identity != identity) {
        leave_identity(ticket);
        std::lock_guard lock(mu_);
        std::set<std::uint64_t>& held = identities_[identity];
        if (held.size() >= max_per_identity_) {
            if (held.empty()) {
                identities_.erase(identity);
            }
            return Promotion::IdentityFull;
        }
        held.insert(ticket.id);
        ticket.identity = identity;
    }
    if (ticket.authenticated()) {
        return Promotion::Promoted;
    }
    // Leaves the unauthenticated pool first: a connection is in one pool at a time, so it is
    // never evicted from both.
    {
        std::lock_guard lock(mu_);
        waiting_.erase(ticket.id);  // it may have been evicted meanwhile; it still got this far
    }
    ticket.slot = authenticated_.take(fd);
    if (!ticket.slot) {
        leave_identity(ticket);
        return Promotion::Full;
    }
    return Promotion::Promoted;
}

void ConnectionGate::leave_identity(Ticket& ticket) {
    if (ticket.identity.empty()) {
        return;
    }
    std::lock_guard lock(mu_);
    if (auto it = identities_.find(ticket.identity); it != identities_.end()) {
        it->second.erase(ticket.id);
        if (it->second.empty()) {
            identities_.erase(it);
        }
    }
    ticket.identity.clear();
}

void ConnectionGate::set_idle(const Ticket& ticket, bool idle) {
    if (ticket.slot) {
        authenticated_.set_idle(*ticket.slot, idle);
    }
}

void ConnectionGate::leave(const Ticket& ticket) {
    Ticket left = ticket;
    leave_identity(left);
    if (ticket.slot) {
        authenticated_.give_back(*ticket.slot);
        return;
    }
    std::lock_guard lock(mu_);
    waiting_.erase(ticket.id);
}

std::size_t ConnectionGate::of_identity(const std::string& identity) const {
    std::lock_guard lock(mu_);
    const auto it = identities_.find(identity);
    return it == identities_.end() ? 0 : it->second.size();
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
