#pragma once
// A cumulative histogram as Prometheus exports one: for each upper bound, how many observations
// were at or below it, plus their number and sum. Pure.

#include <cstdint>
#include <vector>

namespace carma {

class Histogram {
public:
    // `bounds`: ascending and finite; +Inf is implied.
    explicit Histogram(std::vector<double> bounds);

    // A NaN is not counted; below 0 counts as 0 (durations: a clock step back is no time).
    void observe(double value);

    const std::vector<double>& bounds() const { return bounds_; }
    // Observations at or below each bound, in bound order (the +Inf bucket is count()).
    std::vector<std::uint64_t> cumulative() const;
    std::uint64_t count() const { return count_; }
    double sum() const { return sum_; }

private:
    std::vector<double> bounds_;
    std::vector<std::uint64_t> in_bucket_;  // per bound: observations above the previous one
    std::uint64_t count_ = 0;
    double sum_ = 0;
};

// Seconds, from a second to three days: a task's wait or run time on a group's GPU server.
std::vector<double> duration_buckets_s();

}  // namespace carma
