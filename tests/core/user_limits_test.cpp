// What one user may ask of the daemon (issue 18): sizes, waiting tasks, submission rate.

#include <vector>

#include <gtest/gtest.h>

#include "core/user_limits.h"

namespace carma {
namespace {

// This test verifies that arrays and tasks above their limits are refused with 413 naming the
// limit, and that 0 means no limit.
TEST(UserLimitsTest, SizeLimits) {
    UserLimits l;
    l.max_array_size = 100;
    l.max_submit_bytes_per_task = 1000;
    EXPECT_FALSE(check_submission_size(l, {100, 1000, true}));
    auto big_array = check_submission_size(l, {101, 10, true});
    ASSERT_TRUE(big_array);
    EXPECT_EQ(big_array->status, 413);
    EXPECT_EQ(big_array->limit, "max_array_size");
    EXPECT_NE(big_array->message.find("101"), std::string::npos);
    auto big_task = check_submission_size(l, {1, 1001, false});
    ASSERT_TRUE(big_task);
    EXPECT_EQ(big_task->status, 413);
    EXPECT_NE(big_task->message.find("max_submit_bytes_per_task"), std::string::npos);
    // 100 members of 1,000 bytes: 100,000 bytes in all, past a request limit of 50,000.
    l.max_submit_bytes_per_request = 50000;
    auto amplified = check_submission_size(l, {100, 1000, true});
    ASSERT_TRUE(amplified);
    EXPECT_EQ(amplified->status, 413);
    EXPECT_EQ(amplified->limit, "max_submit_bytes_per_request");
    EXPECT_FALSE(check_submission_size(l, {50, 1000, true}));
    l.max_array_size = 0;
    l.max_submit_bytes_per_task = 0;
    l.max_submit_bytes_per_request = 0;
    EXPECT_FALSE(check_submission_size(l, {10000, 1 << 20, true}));
    // More GPUs than max_gpus_per_user lets one user hold: it could never start.
    l.max_gpus_per_user = 2;
    EXPECT_FALSE(check_submission_size(l, {1, 100, false, 2}));
    auto wide = check_submission_size(l, {1, 100, false, 3});
    ASSERT_TRUE(wide);
    EXPECT_EQ(wide->status, 422);
    EXPECT_EQ(wide->limit, "max_gpus_per_user");
    EXPECT_EQ(wide->message,
              "the task asks for 3 GPUs but limits.max_gpus_per_user lets one user hold at most 2 "
              "at once, so it could never start; ask for at most 2 (--gpus 2)");
}

// This test verifies the waiting limit: a submission that would take the user past it is
// refused (429) with the counts named; exactly at the limit passes.
TEST(UserLimitsTest, WaitingLimit) {
    UserLimits l;
    l.max_waiting_per_user = 10;
    EXPECT_FALSE(check_waiting(l, 9, {1, 0, false}));
    EXPECT_FALSE(check_waiting(l, 5, {5, 0, true}));
    auto over = check_waiting(l, 5, {6, 0, true});
    ASSERT_TRUE(over);
    EXPECT_EQ(over->status, 429);
    EXPECT_EQ(over->limit, "max_waiting_per_user");
    EXPECT_NE(over->message.find("5 task(s) waiting"), std::string::npos) << over->message;
    l.max_waiting_per_user = 0;
    EXPECT_FALSE(check_waiting(l, 1000000, {10000, 0, true}));
}

// This test verifies the token bucket: a burst passes at once, then one submission per 1/rate
// seconds; each user has a bucket of their own; the refusal says when to retry.
TEST(UserLimitsTest, SubmitRatePerUser) {
    UserLimits l;
    l.submit_rate_per_user = 2;   // per second
    l.submit_burst_per_user = 3;
    SubmitRate rate(l);
    for (int i = 0; i < 3; ++i) {
        EXPECT_FALSE(rate.take(1000, 10.0)) << i;
    }
    auto refused = rate.take(1000, 10.0);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 429);
    EXPECT_EQ(refused->limit, "submit_rate_per_user");
    ASSERT_TRUE(refused->retry_after_s);
    EXPECT_DOUBLE_EQ(*refused->retry_after_s, 0.5);
    EXPECT_FALSE(rate.take(1001, 10.0)) << "another user is not slowed down";
    EXPECT_FALSE(rate.take(1000, 10.5)) << "one token back after 1/rate";
    EXPECT_TRUE(rate.take(1000, 10.5));
    EXPECT_FALSE(rate.take(1000, 100.0));  // refilled, but never beyond the burst
    EXPECT_FALSE(rate.take(1000, 100.0));
    EXPECT_FALSE(rate.take(1000, 100.0));
    EXPECT_TRUE(rate.take(1000, 100.0));
    UserLimits off;
    off.submit_rate_per_user = 0;
    SubmitRate unlimited(off);
    for (int i = 0; i < 1000; ++i) {
        EXPECT_FALSE(unlimited.take(1000, 0));
    }
}

// This test verifies the running limits' reasons: a user at max_gpus_per_user or
// max_running_per_user is named with the figures, and a task asking for more GPUs than the limit
// lets anyone hold is told it starts only once the limit is raised, whatever its user runs.
TEST(UserLimitsTest, RunningLimitReasons) {
    UserLimits limits;
    limits.max_gpus_per_user = 2;
    limits.max_running_per_user = 3;
    EXPECT_EQ(running_limit(limits, "alice", RunningUse{1, 1}, 1), std::nullopt);
    EXPECT_EQ(running_limit(limits, "alice", RunningUse{2, 1}, 1),
              "alice is at max_gpus_per_user: 2 GPU(s) in use, 1 asked, limit 2");
    EXPECT_EQ(running_limit(limits, "alice", RunningUse{0, 0}, 3),
              "it asks for 3 GPUs, more than max_gpus_per_user (2) lets any user hold: it starts "
              "only once the limit is raised");
    EXPECT_EQ(running_limit(limits, "alice", RunningUse{1, 3}, 1),
              "alice is at max_running_per_user: 3 task(s) running, limit 3");
}

// This test verifies that max_gpus_per_user counts physical GPUs, as Slurm's
// MaxTRESPerUser=gres/gpu: two tasks of the user collocated on GPU 0 and one on GPU 2 hold two
// GPUs, a task on GPUs 2 and 3 adds only GPU 3; the reason names the GPUs counted.
TEST(UserLimitsTest, MaxGpusCountsDistinctPhysicalGpus) {
    RunningUse use;
    use.hold(std::vector<int>{0});
    use.hold(std::vector<int>{0});
    use.hold(std::vector<int>{2});
    use.tasks = 3;
    EXPECT_EQ(use.gpus, 2u);
    UserLimits limits;
    limits.max_gpus_per_user = 3;
    // Three tasks but two GPUs: one more GPU may be taken.
    EXPECT_EQ(running_limit(limits, "alice", use, 1), std::nullopt);
    use.hold(std::vector<int>{2, 3});
    EXPECT_EQ(use.gpus, 3u);
    EXPECT_EQ(running_limit(limits, "alice", use, 1),
              "alice is at max_gpus_per_user: 3 GPU(s) in use (GPUs 0, 2, 3), 1 asked, limit 3");
}

}  // namespace
}  // namespace carma
