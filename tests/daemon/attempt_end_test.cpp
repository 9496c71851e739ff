// What an attempt's end means for its task (daemon/attempt_end.h), without a daemon.

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "daemon/attempt_end.h"

namespace carma::daemon {
namespace {

exec::ExitRecord exited(int code, bool cancel_requested = false, double ended_at = 100) {
    exec::ExitRecord r;
    r.started = true;
    r.exit_code = code;
    r.cancel_requested = cancel_requested;
    r.ended_at = ended_at;
    return r;
}

TEST(AttemptEnd, ReadsTheRecordAndSaysWhatWasMissing) {
    const exec::ExitRecord r = exited(3);
    const AttemptEnd end = attempt_end(&r, AttemptWatch{});
    EXPECT_TRUE(end.started);
    EXPECT_EQ(end.exit_code, 3);
    EXPECT_FALSE(end.record_missing);
    EXPECT_EQ(how_it_ended(end, &r), "exit code 3");

    const AttemptEnd none = attempt_end(nullptr, AttemptWatch{});
    EXPECT_TRUE(none.record_missing);
    EXPECT_EQ(how_it_ended(none, nullptr), "its supervisor vanished without an exit record");

    exec::ExitRecord signalled;
    signalled.started = true;
    signalled.signal = 9;
    EXPECT_EQ(how_it_ended(attempt_end(&signalled, AttemptWatch{}), &signalled),
              "killed by signal 9");
    exec::ExitRecord unstarted;
    unstarted.error = "No such file or directory";
    EXPECT_EQ(how_it_ended(attempt_end(&unstarted, AttemptWatch{}), &unstarted),
              "No such file or directory");
}

TEST(AttemptEnd, AStopAfterTheTimeLimitIsTheLimitsEvenAfterARestart) {
    // The daemon that stopped it is gone: its timed_out flag with it. The record says a stop
    // came, 7200 s after the start the store has, with a limit of 7200 s.
    const exec::ExitRecord r = exited(143, true, 1000 + 7200);
    AttemptWatch watch;
    watch.time_limit_s = 7200;
    watch.started_unix = 1000;
    EXPECT_TRUE(attempt_end(&r, watch).time_limit_reached);
    watch.time_limit_s = 9000;
    EXPECT_FALSE(attempt_end(&r, watch).time_limit_reached) << "stopped before its limit";
    watch.timed_out = true;
    EXPECT_TRUE(attempt_end(&r, watch).time_limit_reached);
    AttemptWatch stopped;
    stopped.stop_requested = true;
    EXPECT_TRUE(attempt_end(&r, stopped).cancel_requested);
}

TEST(TaskAfterAttempt, OutOfMemoryRelaunchesWhileAttemptsAreLeft) {
    const AttemptEnd end;
    const TaskAfterAttempt again = task_after_attempt(AttemptOutcome::OutOfMemory, end,
                                                      "exit code 1", 1, 1, 3, false,
                                                      std::nullopt, std::nullopt);
    EXPECT_EQ(again.state, store::TaskState::Recovering);
    EXPECT_TRUE(again.relaunch);
    EXPECT_FALSE(again.ended);
    EXPECT_EQ(again.message,
              "attempt 1 ran out of GPU memory (exit code 1); relaunching on idle GPUs");

    const TaskAfterAttempt last = task_after_attempt(AttemptOutcome::OutOfMemory, end,
                                                     "exit code 1", 3, 3, 3, false, std::nullopt,
                                                     std::nullopt);
    EXPECT_EQ(last.state, store::TaskState::Failed);
    EXPECT_FALSE(last.relaunch);
    EXPECT_TRUE(last.ended);
    EXPECT_EQ(last.message, "out-of-memory after 3 attempt(s): exit code 1");
}

TEST(TaskAfterAttempt, AFailureRelaunchesOnlyWhenAskedAndWhenItStarted) {
    AttemptEnd end;
    EXPECT_FALSE(task_after_attempt(AttemptOutcome::Failed, end, "exit code 2", 1, 1, 3, false,
                                    std::nullopt, std::nullopt)
                     .relaunch);
    const TaskAfterAttempt retried = task_after_attempt(AttemptOutcome::Failed, end, "exit code 2",
                                                        1, 1, 3, true, std::nullopt, std::nullopt);
    EXPECT_TRUE(retried.relaunch);
    EXPECT_EQ(retried.message, "attempt 1 failed (exit code 2); relaunching on idle GPUs");
    end.started = false;
    EXPECT_FALSE(task_after_attempt(AttemptOutcome::Failed, end, "could not start", 1, 1, 3, true,
                                    std::nullopt, std::nullopt)
                     .relaunch)
        << "a command that cannot start would only fail again";
}

TEST(TaskAfterAttempt, EndsSaySoAndATimeoutNamesItsLimit) {
    const AttemptEnd end;
    const TaskAfterAttempt ok = task_after_attempt(AttemptOutcome::Succeeded, end, "exit code 0",
                                                   1, 1, 3, true, std::nullopt, std::nullopt);
    EXPECT_EQ(ok.state, store::TaskState::Succeeded);
    EXPECT_EQ(ok.message, "succeeded");
    EXPECT_TRUE(ok.ended);
    EXPECT_EQ(task_after_attempt(AttemptOutcome::Cancelled, end, "killed by signal 15", 1, 1, 3,
                                 true, std::nullopt, std::nullopt)
                  .state,
              store::TaskState::Cancelled);
    // Who cancelled it, as Slurm's "CANCELLED by UID", not the exit code SIGTERM left.
    EXPECT_EQ(task_after_attempt(AttemptOutcome::Cancelled, end, "cancelled by bob", 2, 2, 3,
                                 true, std::nullopt, std::nullopt)
                  .message,
              "cancelled by bob while attempt 2 ran");
    const TaskAfterAttempt timeout = task_after_attempt(
        AttemptOutcome::Timeout, end, "killed by signal 15", 2, 2, 3, true, std::nullopt, 7200.0);
    EXPECT_EQ(timeout.state, store::TaskState::Timeout);
    EXPECT_EQ(timeout.how, "stopped at its time limit of 2h");
    EXPECT_EQ(timeout.message, "timeout after 2 attempt(s): stopped at its time limit of 2h");
}

TEST(TaskAfterAttempt, ALostNodeQueuesTheTaskAgainWhateverItsAttempts) {
    const TaskAfterAttempt lost = task_after_attempt(
        AttemptOutcome::Lost, AttemptEnd{}, "its supervisor vanished without an exit record", 3, 3,
        3, false, std::string("node gpu-3 (Slurm job 417 ended)"), std::nullopt);
    EXPECT_EQ(lost.state, store::TaskState::Queued);
    EXPECT_TRUE(lost.requeue);
    EXPECT_FALSE(lost.ended);
    EXPECT_EQ(lost.message, "attempt 3 lost with node gpu-3 (Slurm job 417 ended); queued again");
    EXPECT_EQ(lost.how, "lost with node gpu-3 (Slurm job 417 ended)");
    // An out-of-memory relaunch lost with its node goes back to the recovery queue: in the main
    // queue it would wait its turn and share a GPU again, which is how it crashed.
    const TaskAfterAttempt relaunch =
        task_after_attempt(AttemptOutcome::Lost, AttemptEnd{}, "", 2, 2, 3, false,
                           std::string("node gpu-3"), std::nullopt, true);
    EXPECT_EQ(relaunch.state, store::TaskState::Recovering);
    EXPECT_TRUE(relaunch.requeue);
    EXPECT_FALSE(relaunch.relaunch);
    EXPECT_FALSE(relaunch.ended);
    EXPECT_EQ(relaunch.message, "attempt 2 lost with node gpu-3; relaunching on idle GPUs");
}

// This test verifies a preemption: the stopped attempt is `preempted` and its task queued again
// whatever its attempts, even when it exits 0 on SIGTERM (it saved a checkpoint and has work
// left, as Slurm requeues); one that ended on its own before the stop reached it ended as it
// did; and a cancel during the stop (the daemon clears `preempted`) ends the task as cancelled.
TEST(TaskAfterAttempt, APreemptedAttemptQueuesTheTaskAgain) {
    const exec::ExitRecord stopped = exited(143, true);
    AttemptWatch watch;
    watch.stop_requested = true;
    watch.preempted = true;
    const AttemptEnd end = attempt_end(&stopped, watch);
    EXPECT_TRUE(end.preempted);
    ASSERT_EQ(classify_attempt(end, ""), AttemptOutcome::Preempted);
    EXPECT_EQ(to_string(AttemptOutcome::Preempted), "preempted");
    const TaskAfterAttempt after =
        task_after_attempt(AttemptOutcome::Preempted, end, "exit code 143", 3, 3, 3, false,
                           std::nullopt, std::nullopt);
    EXPECT_EQ(after.state, store::TaskState::Queued);
    EXPECT_TRUE(after.requeue);
    EXPECT_FALSE(after.relaunch);
    EXPECT_FALSE(after.ended);
    EXPECT_EQ(after.message, "attempt 3 was stopped for fair share (preempted); queued again");

    const exec::ExitRecord checkpointed = exited(0, true);
    EXPECT_EQ(classify_attempt(attempt_end(&checkpointed, watch), ""), AttemptOutcome::Preempted);
    const exec::ExitRecord done_first = exited(0, false);
    EXPECT_EQ(classify_attempt(attempt_end(&done_first, watch), ""), AttemptOutcome::Succeeded);
    const exec::ExitRecord failed_first = exited(1, false);
    EXPECT_EQ(classify_attempt(attempt_end(&failed_first, watch), ""), AttemptOutcome::Failed);
    watch.preempted = false;  // cancelled meanwhile
    EXPECT_EQ(classify_attempt(attempt_end(&stopped, watch), ""), AttemptOutcome::Cancelled);
}

}  // namespace
}  // namespace carma::daemon
