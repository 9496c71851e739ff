#pragma once
// How far a periodic loop falls behind its period. The daemon's loop runs every 1/time_scale s;
// at a time scale its machine cannot keep up with, its samples, scheduling rounds and warm-up
// checks come less often than the scaled clock assumes, and a replay silently drifts from what
// the simulator would do. A period counts as late when it ended half a period or more after the
// next one was due: a loop whose rounds take 1.5 periods is late every time and runs two rounds
// where the clock assumes three; shorter jitter is the operating system's.
// Pure: the caller measures the times.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace carma {

struct LoopLagConfig {
    std::size_t window = 500;   // newest periods the recent share is taken over
    double behind_share = 0.1;  // of them late: the loop is behind
};

class LoopLag {
public:
    explicit LoopLag(double period_s, LoopLagConfig config = {});

    // One period: how long after the next period was due it ended (0 or less: on time).
    void record(double overrun_s);

    double period_s() const { return period_s_; }
    std::uint64_t periods() const { return periods_; }
    std::uint64_t late() const { return late_; }
    // The most periods one overrun spanned, over the whole run.
    double worst_late_periods() const { return worst_late_periods_; }
    // Share of the newest `window` periods that were late (0 before any).
    double recent_late_share() const;
    // A full window of which at least `behind_share` was late.
    bool behind() const;

private:
    double period_s_;
    LoopLagConfig config_;
    std::vector<char> recent_;  // ring of the newest periods: late or not
    std::size_t next_ = 0;
    std::size_t recent_late_ = 0;
    std::uint64_t periods_ = 0;
    std::uint64_t late_ = 0;
    double worst_late_periods_ = 0;
};

}  // namespace carma
