#pragma once
// How often a sender may do something: a token bucket per sender, time given by the caller
// (any steady clock in seconds), so the rule is tested without waiting.
//
// A bucket holds up to `burst` tokens and gains `rate_per_s` a second; each event takes one, and
// one that finds the bucket empty is refused. A sender that keeps to the rate is never refused,
// however long it runs; one that sends faster is refused once its burst is spent.

#include <cstddef>
#include <map>
#include <string>

namespace carma {

class TokenBucket {
public:
    TokenBucket(double rate_per_s, double burst);

    // Whether an event at `now_s` fits; if it does, it takes its token.
    bool take(double now_s);
    // Seconds from `now_s` until the next event would fit (0 when it fits now).
    double wait_s(double now_s) const;
    // Whether the bucket is full at `now_s` (its sender has been quiet long enough).
    bool full(double now_s) const;

private:
    double tokens_at(double now_s) const;

    double rate_;
    double burst_;
    double tokens_;
    double last_s_ = 0;
    bool started_ = false;
};

// Buckets by sender. Senders quiet long enough to be full again are forgotten once more than
// `max_senders` are known, so names that come and go cannot grow it without bound.
class RateLimiter {
public:
    RateLimiter(double rate_per_s, double burst, std::size_t max_senders = 4096);

    // Whether `sender` may act at `now_s`; on refusal, `retry_after_s` (if given) is set to the
    // seconds until it may.
    bool allow(const std::string& sender, double now_s, double* retry_after_s = nullptr);
    std::size_t senders() const { return buckets_.size(); }
    double rate_per_s() const { return rate_; }
    double burst() const { return burst_; }

private:
    double rate_;
    double burst_;
    std::size_t max_senders_;
    std::map<std::string, TokenBucket> buckets_;
};

}  // namespace carma
