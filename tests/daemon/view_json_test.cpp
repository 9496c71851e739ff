// The pure parts of GET /v1/view and GET /v1/timeline (daemon/view_json.h).

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "daemon/view_json.h"

namespace carma::daemon {
namespace {

store::GpuSampleRow sample(double t, int gpu, MiB used, double smact) {
    store::GpuSampleRow s;
    s.time = t;
    s.gpu = gpu;
    s.used_mib = used;
    s.smact = smact;
    s.smocc = std::numeric_limits<double>::quiet_NaN();  // what the store gives for NULL
    s.drama = 0.1;
    s.power_w = 100;
    return s;
}

// This test verifies the timeline's buckets: at most `points`, each the largest value of its
// samples (a spike survives), stamped with its first sample's time; other GPUs and samples
// outside the span left out; an unknown metric stays null.
TEST(ViewJsonTest, TimelineSamplesKeepEachBucketsLargestValue) {
    std::vector<store::GpuSampleRow> rows;
    for (int i = 0; i < 100; ++i) {
        rows.push_back(sample(1000 + i * 10, 0, 1000 + i, i == 42 ? 0.99 : 0.2));
        rows.push_back(sample(1000 + i * 10, 1, 5, 0.5));
    }
    rows.push_back(sample(500, 0, 99999, 1.0));  // before the span
    const nlohmann::json out = timeline_samples_json(rows, 0, 1000, 2000, 10);
    ASSERT_EQ(out.size(), 10u);
    EXPECT_EQ(out[0]["t"], 1000.0);
    EXPECT_EQ(out[0]["used_mib"], 1009);
    EXPECT_EQ(out[4]["smact"], 0.99) << out[4].dump();  // sample 42 is in the fifth bucket
    EXPECT_EQ(out[5]["smact"], 0.2);
    EXPECT_TRUE(out[3]["smocc"].is_null());
    for (const auto& b : out) {
        EXPECT_LT(b["used_mib"].get<MiB>(), 99999);
    }
    EXPECT_EQ(timeline_samples_json(rows, 7, 1000, 2000, 10).size(), 0u);
    // Asked for more buckets than samples: one per sample.
    EXPECT_EQ(timeline_samples_json(rows, 1, 1000, 2000, 5000).size(), 100u);
}

store::FinishedTask oom_then_running() {
    store::FinishedTask t;
    t.task.id = 7;
    t.task.user = "alice";
    t.task.spec.name = "maskrcnn";
    t.task.spec.gpus = 1;
    t.task.state = store::TaskState::Running;
    t.task.attempts = 2;
    t.task.submitted_at = 100;
    t.task.env = {{"SECRET", "hunter2"}};
    store::AttemptRow first;
    first.task = 7;
    first.number = 1;
    first.gpus = {1};
    first.started_at = 110;
    first.ended_at = 150;
    first.outcome = "out-of-memory";
    store::AttemptRow second = first;
    second.number = 2;
    second.gpus = {0};
    second.started_at = 160;
    second.ended_at.reset();
    second.outcome.clear();
    t.attempts = {first, second};
    return t;
}

// This test verifies a timeline task: its attempts with their GPUs and outcomes, a live one as
// "running", the first start as the task's start, and nothing of its environment.
TEST(ViewJsonTest, TimelineTaskHasItsAttempts) {
    const nlohmann::json j = timeline_task_json(oom_then_running());
    EXPECT_EQ(j["id"], 7);
    EXPECT_EQ(j["user"], "alice");
    EXPECT_EQ(j["state"], "running");
    EXPECT_EQ(j["started_at"], 110.0);
    EXPECT_TRUE(j["finished_at"].is_null());
    ASSERT_EQ(j["attempts"].size(), 2u);
    EXPECT_EQ(j["attempts"][0]["outcome"], "out-of-memory");
    EXPECT_EQ(j["attempts"][0]["gpus"], nlohmann::json::array({1}));
    EXPECT_EQ(j["attempts"][1]["outcome"], "running");
    EXPECT_TRUE(j["attempts"][1]["ended_at"].is_null());
    EXPECT_EQ(j.dump().find("hunter2"), std::string::npos);
}

// This test verifies a recently finished task counts its out-of-memory crashes.
TEST(ViewJsonTest, RecentTaskCountsOutOfMemoryCrashes) {
    store::FinishedTask t = oom_then_running();
    t.task.state = store::TaskState::Succeeded;
    t.task.finished_at = 400;
    t.attempts[1].ended_at = 400;
    t.attempts[1].outcome = "succeeded";
    const nlohmann::json j = recent_task_json(t);
    EXPECT_EQ(j["ooms"], 1);
    EXPECT_EQ(j["attempts"], 2);
    EXPECT_EQ(j["state"], "succeeded");
    EXPECT_EQ(j["wait_s"], 10.0);
    EXPECT_EQ(j["run_s"], 280.0);
    EXPECT_EQ(j.dump().find("hunter2"), std::string::npos);
}

// This test verifies the memory a waiting task is planned with: learned need plus margin before
// the declared need; unknown when neither is.
TEST(ViewJsonTest, PlannedNeedPrefersWhatWasLearned) {
    TaskSpec spec;
    EXPECT_FALSE(planned_need_mib(spec));
    spec.memory.declared_mib = 8000;
    EXPECT_EQ(planned_need_mib(spec), 8000);
    spec.learned.need_mib = 10000;
    spec.learned.margin_mib = 2048;
    EXPECT_EQ(planned_need_mib(spec), 12048);
}

}  // namespace
}  // namespace carma::daemon
