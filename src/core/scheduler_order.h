#pragma once
// Scheduler::carma_order (core/scheduler.h), the order carma takes waiting tasks in: those past
// their bounded wait in arrival order, then the shortest expected run first; with several users
// (fair share) or nice values, the merge of each one's order by priority. A template over what is
// done with each task, so both halves of the scheduler (scheduler.cpp, scheduler_carma.cpp) need
// its body.

#include <tuple>
#include <vector>

#include "core/scheduler.h"

namespace carma {

template <typename Take>
void Scheduler::carma_order(double now, Take take) const {
    if (buckets_.size() > 1) {
        merge_buckets(now, take);
        return;
    }
    const double max_wait = config_.carma.max_wait_s;
    auto aged = [&](const QueuedTask& t) { return t.queued_at + max_wait <= now; };
    // Arrival order is queue order, so the aged tasks are a prefix of it.
    for (const QueuedTask& t : main_) {
        if (!config_.policy.by_run_time()) {
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
    if (!config_.policy.by_run_time() || buckets_.empty()) {
        return;
    }
    for (const OrderKey& k : buckets_.begin()->second.length) {
        if (!aged(*k.it) && take(*k.it)) {
            return;
        }
    }
}

template <typename Take>
void Scheduler::merge_buckets(double now, Take take) const {
    const double max_wait = config_.carma.max_wait_s;
    const bool by_run_time = config_.policy.by_run_time();
    auto aged = [&](const QueuedTask& t) { return t.queued_at + max_wait <= now; };
    // One cursor per bucket over its own order: its aged tasks by arrival, then (by run time) the
    // others by run time. Its keys never decrease, so taking the least head each time is
    // the order of the whole queue.
    struct Cursor {
        const Bucket* bucket = nullptr;
        std::set<OrderKey>::const_iterator it;
        bool in_length = false;
        double base = 0;
    };
    std::vector<Cursor> cursors;
    cursors.reserve(buckets_.size());
    auto settle = [&](Cursor& c) {
        if (!c.in_length) {
            if (!by_run_time || (c.it != c.bucket->arrival.end() && aged(*c.it->it))) {
                return;
            }
            c.in_length = true;
            c.it = c.bucket->length.begin();
        }
        while (c.it != c.bucket->length.end() && aged(*c.it->it)) {
            ++c.it;
        }
    };
    auto done = [&](const Cursor& c) {
        return c.it == (c.in_length ? c.bucket->length.end() : c.bucket->arrival.end());
    };
    for (const auto& [key, bucket] : buckets_) {
        Cursor c{&bucket, bucket.arrival.begin(), false, bucket_base(bucket)};
        settle(c);
        if (!done(c)) {
            cursors.push_back(c);
        }
    }
    // Higher priority first; then overdue by arrival; then by run time (or arrival).
    auto key = [&](const Cursor& c) {
        const QueuedTask& t = *c.it->it;
        const bool overdue = aged(t);
        const double p = c.base + (overdue ? config_.carma.age_weight : 0);
        return std::make_tuple(-p, overdue ? 0 : 1,
                               by_run_time && !overdue ? t.order_key : 0.0, t.seq);
    };
    while (!cursors.empty()) {
        std::size_t best = 0;
        auto best_key = key(cursors[0]);
        for (std::size_t k = 1; k < cursors.size(); ++k) {
            auto kk = key(cursors[k]);
            if (kk < best_key) {
                best = k;
                best_key = kk;
            }
        }
        Cursor& c = cursors[best];
        if (take(*c.it->it)) {
            return;
        }
        ++c.it;
        settle(c);
        if (done(c)) {
            cursors.erase(cursors.begin() + static_cast<std::ptrdiff_t>(best));
        }
    }
}

}  // namespace carma
