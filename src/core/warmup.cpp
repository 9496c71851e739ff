#include "core/warmup.h"

#include <algorithm>

namespace carma {

void WarmupTracker::launched(TaskId task, const std::vector<int>& gpus, double now) {
    exited(task);
    for (int gpu : gpus) {
        locks_.push_back(Lock{task, gpu, now, std::nullopt});
    }
}

void WarmupTracker::seen(TaskId task, int gpu, double now) {
    for (Lock& lock : locks_) {
        if (lock.task == task && lock.gpu == gpu && !lock.seen_at) {
            lock.seen_at = now;
        }
    }
}

void WarmupTracker::seen(TaskId task, double now) {
    for (Lock& lock : locks_) {
        if (lock.task == task && !lock.seen_at) {
            lock.seen_at = now;
        }
    }
}

void WarmupTracker::exited(TaskId task) {
    std::erase_if(locks_, [&](const Lock& l) { return l.task == task; });
}

double WarmupTracker::ends_at(const Lock& lock) const {
    if (lock.seen_at) {
        return *lock.seen_at + config_.settle_s;
    }
    return lock.launched_at + config_.unseen_timeout_s;
}

bool WarmupTracker::active(const Lock& lock, double now) const {
    // The paper frees the GPU once now - seen_at > 30 s, i.e. the lock holds up to and including
    // the 30th second.
    if (lock.seen_at) {
        return now <= ends_at(lock);
    }
    return now < ends_at(lock);
}

bool WarmupTracker::locked(int gpu, double now) const {
    for (const Lock& lock : locks_) {
        if (lock.gpu == gpu && active(lock, now)) {
            return true;
        }
    }
    return false;
}

std::optional<double> WarmupTracker::next_unlock(double now) const {
    std::optional<double> best;
    for (const Lock& lock : locks_) {
        if (!active(lock, now)) {
            continue;
        }
        const double end = ends_at(lock);
        if (!best || end < *best) {
            best = end;
        }
    }
    return best;
}

void WarmupTracker::expire(double now) {
    std::erase_if(locks_, [&](const Lock& l) { return !active(l, now); });
}

}  // namespace carma
