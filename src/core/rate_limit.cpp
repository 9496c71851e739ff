#include "core/rate_limit.h"

#include <algorithm>

namespace carma {

namespace {
// Times are sums and differences of doubles: an event exactly 1/rate after the last would
// otherwise find 0.9999999 of a token.
constexpr double kSlack = 1e-9;
}  // namespace

TokenBucket::TokenBucket(double rate_per_s, double burst)
    : rate_(std::max(rate_per_s, 0.0)), burst_(std::max(burst, 1.0)), tokens_(burst_) {}

double TokenBucket::tokens_at(double now_s) const {
    if (!started_) {
        return burst_;
    }
    // A clock that goes back (another caller's "now" taken a moment earlier) adds nothing.
    const double elapsed = std::max(0.0, now_s - last_s_);
    return std::min(burst_, tokens_ + elapsed * rate_);
}

bool TokenBucket::take(double now_s) {
    const double tokens = tokens_at(now_s);
    if (!started_ || now_s > last_s_) {
        last_s_ = now_s;
    }
    started_ = true;
    tokens_ = tokens;
    if (tokens_ < 1 - kSlack) {
        return false;
    }
    tokens_ = std::max(0.0, tokens_ - 1);
    return true;
}

double TokenBucket::wait_s(double now_s) const {
    const double tokens = tokens_at(now_s);
    if (tokens >= 1 - kSlack) {
        return 0;
    }
    return rate_ > 0 ? (1 - tokens) / rate_ : 1e9;
}

bool TokenBucket::full(double now_s) const { return tokens_at(now_s) >= burst_ - kSlack; }

RateLimiter::RateLimiter(double rate_per_s, double burst, std::size_t max_senders)
    : rate_(rate_per_s), burst_(burst), max_senders_(std::max<std::size_t>(1, max_senders)) {}

bool RateLimiter::allow(const std::string& sender, double now_s, double* retry_after_s) {
    auto it = buckets_.find(sender);
    if (it == buckets_.end()) {
        if (buckets_.size() >= max_senders_) {
            std::erase_if(buckets_, [&](const auto& entry) { return entry.second.full(now_s); });
        }
        it = buckets_.emplace(sender, TokenBucket(rate_, burst_)).first;
    }
    if (it->second.take(now_s)) {
        return true;
    }
    if (retry_after_s) {
        *retry_after_s = it->second.wait_s(now_s);
    }
    return false;
}

}  // namespace carma
