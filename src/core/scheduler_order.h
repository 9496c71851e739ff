#pragma once
// Scheduler::carma_order (core/scheduler.h), the order carma takes waiting tasks in: those past
// their bounded wait in arrival order, then the longest expected run first. A template over what
// is done with each task, so both halves of the scheduler (scheduler.cpp, scheduler_carma.cpp)
// need its body.

#include "core/scheduler.h"

namespace carma {

template <typename Take>
void Scheduler::carma_order(double now, Take take) const {
    const double max_wait = config_.carma.max_wait_s;
    auto aged = [&](const QueuedTask& t) { return t.queued_at + max_wait <= now; };
    // Arrival order is queue order, so the aged tasks are a prefix of it.
    for (const QueuedTask& t : main_) {
        if (!config_.policy.long_first) {
            if (take(t)) {
                return;
            }
            continue;
        }
        if (!aged(t)) {
            break;
        }
        if (take(t)) {
            return;
        }
    }
    if (!config_.policy.long_first) {
        return;
    }
    for (const OrderKey& k : by_length_) {
        if (!aged(*k.it) && take(*k.it)) {
            return;
        }
    }
}

}  // namespace carma
