// Slowdown under sharing, GPU-level activity and power (interference-model.md §6.3, §6.4, §7.3).

#include "model/interference.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/constants.h"
#include "model/gpu_type.h"

namespace carma::model {
namespace {

const GpuType& a100() {
    return known_gpu_types().front();
}

// This test verifies that the GPU type used by the power tests is the calibrated A100-40GB with
// the 50 W idle floor and the 400 W board cap.
TEST(InterferenceTest, PowerTestsUseTheCalibratedA100) {
    EXPECT_EQ(a100().name, "A100-40GB");
    EXPECT_DOUBLE_EQ(a100().idle_power_w, 50.0);
    EXPECT_DOUBLE_EQ(a100().max_power_w, 400.0);
}

// This test verifies that a task alone on its GPU runs at exactly solo speed (f(u)/f(u) = 1) for
// any utilisation, in both sharing modes.
TEST(InterferenceTest, TaskAloneRunsAtExactlySoloSpeed) {
    for (SharingMode mode : {SharingMode::Timeslice, SharingMode::Mps}) {
        const SlowdownParams p = slowdown_params(mode);
        for (double u : {0.0, 0.05, 0.137, 0.36, 0.5, 0.8, 0.95, 0.991, 1.0}) {
            SCOPED_TRACE(std::string(to_string(mode)) + " u=" + std::to_string(u));
            EXPECT_EQ(task_speed(u, u, p), 1.0);
        }
    }
}

// This test verifies that the sharing modes carry the constants of the note: the Lucid fit
// C = 1.246, n = 5.27 for time slicing, and the assumed C = 1.4 (same n) for MPS.
TEST(InterferenceTest, SharingModesCarryTheirConstants) {
    EXPECT_DOUBLE_EQ(slowdown_params(SharingMode::Timeslice).capacity, 1.246);
    EXPECT_DOUBLE_EQ(slowdown_params(SharingMode::Timeslice).sharpness, 5.27);
    EXPECT_DOUBLE_EQ(slowdown_params(SharingMode::Mps).capacity, 1.4);
    EXPECT_DOUBLE_EQ(slowdown_params(SharingMode::Mps).sharpness, 5.27);
}

// This test verifies that f is a smooth max(1, x/C): f(0) = 1, f(C) = 2^(1/n), and f(x) tends to
// x/C well above the knee.
TEST(InterferenceTest, SmoothLoadIsASmoothMaxOfOneAndLoadOverCapacity) {
    const SlowdownParams p = slowdown_params(SharingMode::Timeslice);
    EXPECT_DOUBLE_EQ(smooth_load(0.0, p), 1.0);
    // f(C) = (1 + 1)^(1/5.27) = 2^0.18975 = 1.1406.
    EXPECT_NEAR(smooth_load(1.246, p), std::pow(2.0, 1.0 / 5.27), 1e-12);
    EXPECT_NEAR(smooth_load(1.246, p), 1.1406, 1e-4);
    // x = 10: x/C = 8.026; (1 + 8.026^5.27)^(1/5.27) = 8.026 * (1 + 1.7e-5)^0.19 ~ 8.026.
    EXPECT_NEAR(smooth_load(10.0, p), 10.0 / 1.246, 1e-3);
    // A negative load is treated as none.
    EXPECT_DOUBLE_EQ(smooth_load(-0.5, p), 1.0);
}

// This test verifies that a task's speed never rises as the summed load on its GPU grows, stays
// in (0, 1], and falls well below 1 once the GPU is saturated.
TEST(InterferenceTest, SpeedDecreasesMonotonicallyWithSummedLoad) {
    for (SharingMode mode : {SharingMode::Timeslice, SharingMode::Mps}) {
        const SlowdownParams p = slowdown_params(mode);
        for (double u : {0.1, 0.36, 0.8}) {
            SCOPED_TRACE(std::string(to_string(mode)) + " u=" + std::to_string(u));
            double previous = task_speed(u, u, p);
            for (double summed = u + 0.05; summed <= 6.0; summed += 0.05) {
                const double s = task_speed(u, summed, p);
                EXPECT_LE(s, previous) << "summed " << summed;
                EXPECT_GT(s, 0.0);
                EXPECT_LE(s, 1.0);
                previous = s;
            }
            // At U = 6 the GPU is saturated: speed ~ f(u) * C / 6, well under 1/3.
            EXPECT_LT(previous, 1.0 / 3.0);
        }
    }
}

// This test verifies that, for the same summed load, MPS (larger capacity) slows a task less than
// time slicing.
TEST(InterferenceTest, MpsAbsorbsMoreLoadThanTimeslice) {
    const SlowdownParams ts = slowdown_params(SharingMode::Timeslice);
    const SlowdownParams mps = slowdown_params(SharingMode::Mps);
    for (double summed : {1.0, 1.6, 2.4, 4.0}) {
        EXPECT_GT(task_speed(0.8, summed, mps), task_speed(0.8, summed, ts)) << summed;
    }
}

// This test verifies that a summed load below the task's own utilisation (an inconsistent input)
// is treated as the task being alone, speed 1.
TEST(InterferenceTest, SummedLoadBelowOwnUtilisationMeansAlone) {
    const SlowdownParams p = slowdown_params(SharingMode::Timeslice);
    EXPECT_EQ(task_speed(0.8, 0.3, p), 1.0);
}

struct IdenticalTasksCase {
    double u;
    int k;
    double slowdown;  // S = f(k u) / f(u), from the table in §6.3
    double gain;      // aggregate throughput k / S
};

// This test verifies the §6.3 table of k identical tasks sharing one GPU (time slicing): each
// task's slowdown S = f(k*u)/f(u) and the aggregate gain k/S, within 0.02.
TEST(InterferenceTest, IdenticalTasksMatchTheResearchTable) {
    // Worked example, u = 0.8, k = 2, C = 1.246, n = 5.27:
    //   f(0.8) = (1 + (0.8/1.246)^5.27)^(1/5.27) = (1 + 0.0968)^0.1898 = 1.0177
    //   f(1.6) = (1 + (1.6/1.246)^5.27)^(1/5.27) = (1 + 3.736)^0.1898  = 1.3434
    //   S = 1.3434 / 1.0177 = 1.320; gain = 2 / 1.320 = 1.515.
    const std::vector<IdenticalTasksCase> table = {
        {0.20, 2, 1.00, 2.00}, {0.20, 3, 1.00, 2.99}, {0.20, 4, 1.02, 3.93}, {0.20, 7, 1.22, 5.74},
        {0.36, 2, 1.01, 1.98}, {0.36, 3, 1.08, 2.79}, {0.36, 4, 1.24, 3.22}, {0.36, 7, 2.03, 3.45},
        {0.50, 2, 1.05, 1.90}, {0.50, 3, 1.28, 2.35}, {0.50, 4, 1.63, 2.46}, {0.50, 7, 2.81, 2.49},
        {0.80, 2, 1.32, 1.52}, {0.80, 3, 1.90, 1.58}, {0.80, 4, 2.53, 1.58}, {0.80, 7, 4.42, 1.58},
        {0.95, 2, 1.49, 1.34}, {0.95, 3, 2.20, 1.36}, {0.95, 4, 2.93, 1.37}, {0.95, 7, 5.12, 1.37},
    };
    const SlowdownParams p = slowdown_params(SharingMode::Timeslice);
    for (const IdenticalTasksCase& c : table) {
        SCOPED_TRACE("u=" + std::to_string(c.u) + " k=" + std::to_string(c.k));
        const double speed = task_speed(c.u, c.k * c.u, p);
        EXPECT_NEAR(1.0 / speed, c.slowdown, 0.02);
        EXPECT_NEAR(c.k * speed, c.gain, 0.02);
    }
}

// This test verifies that nothing on the GPU means an inactive GPU with all metrics zero.
TEST(InterferenceTest, AggregateOfNoTasksIsInactiveAndZero) {
    const GpuActivity a = aggregate_activity({});
    EXPECT_FALSE(a.active);
    EXPECT_EQ(a.smact, 0.0);
    EXPECT_EQ(a.smocc, 0.0);
    EXPECT_EQ(a.drama, 0.0);
    EXPECT_EQ(a.util, 0.0);
}

// This test verifies that one task alone shows its own solo metrics on the GPU.
TEST(InterferenceTest, AggregateOfOneTaskAtSoloSpeedIsItsOwnProfile) {
    const std::vector<Contribution> one = {{0.804, 0.711, 0.369, 0.502, 1.0}};
    const GpuActivity a = aggregate_activity(one);
    EXPECT_TRUE(a.active);
    EXPECT_DOUBLE_EQ(a.smact, 0.711);
    EXPECT_DOUBLE_EQ(a.smocc, 0.369);
    EXPECT_NEAR(a.drama, 0.502, 1e-12);  // 1 - (1 - 0.502)
    EXPECT_NEAR(a.util, 0.804, 1e-12);   // 1 - (1 - 0.804)
}

// This test verifies the §6.4 aggregation forms for two tasks: SMACT and SMOCC add their
// speed-scaled contributions, DRAMA is 1 - prod(1 - drama*speed), util is 1 - prod(1 - u)
// (not speed-scaled).
TEST(InterferenceTest, AggregateUsesAdditiveAndProductForms) {
    const std::vector<Contribution> two = {
        {0.5, 0.3, 0.10, 0.4, 1.0},
        {0.6, 0.4, 0.20, 0.5, 0.5},
    };
    const GpuActivity a = aggregate_activity(two);
    EXPECT_TRUE(a.active);
    EXPECT_NEAR(a.smact, 0.5, 1e-12);   // 0.3*1 + 0.4*0.5 = 0.3 + 0.2
    EXPECT_NEAR(a.smocc, 0.2, 1e-12);   // 0.1*1 + 0.2*0.5 = 0.1 + 0.1
    EXPECT_NEAR(a.drama, 0.55, 1e-12);  // 1 - (1 - 0.4)(1 - 0.25) = 1 - 0.6*0.75
    EXPECT_NEAR(a.util, 0.8, 1e-12);    // 1 - (1 - 0.5)(1 - 0.6) = 1 - 0.5*0.4
}

// This test verifies that additive SMACT and SMOCC are capped at 1 and the product forms stay
// below 1 however many heavy tasks share the GPU.
TEST(InterferenceTest, AggregateIsCappedAtOne) {
    const std::vector<Contribution> three(3, Contribution{0.95, 0.9, 0.6, 0.7, 0.9});
    const GpuActivity a = aggregate_activity(three);
    EXPECT_EQ(a.smact, 1.0);  // 3 * 0.9 * 0.9 = 2.43 -> 1
    EXPECT_EQ(a.smocc, 1.0);  // 3 * 0.6 * 0.9 = 1.62 -> 1
    // DRAMA: 1 - (1 - 0.63)^3 = 1 - 0.050653 = 0.949347.
    EXPECT_NEAR(a.drama, 0.949347, 1e-9);
    // util: 1 - (1 - 0.95)^3 = 1 - 0.000125 = 0.999875.
    EXPECT_NEAR(a.util, 0.999875, 1e-9);
    EXPECT_LT(a.drama, 1.0);
    EXPECT_LT(a.util, 1.0);
}

// This test verifies that an idle GPU (no GPU-active task) draws the type's idle power, whatever
// stale metrics the activity carries and whatever the scale.
TEST(InterferenceTest, PowerOfAnInactiveGpuIsIdle) {
    GpuActivity idle;
    EXPECT_DOUBLE_EQ(gpu_power_w(idle, a100()), 50.0);
    idle.smact = 0.9;  // ignored while inactive
    idle.drama = 0.9;
    EXPECT_DOUBLE_EQ(gpu_power_w(idle, a100(), 1.27), 50.0);
}

struct PowerCase {
    double smact;
    double drama;
    double scale;
    double watts;
};

// This test verifies P = min(max_power, max(idle, scale * (31.8 + 230.8 SMACT + 91.8 DRAMA)))
// on an active GPU, including the idle floor and the board cap.
TEST(InterferenceTest, PowerOfAnActiveGpuFollowsTheFittedFormula) {
    const std::vector<PowerCase> table = {
        // 31.8 + 230.8*0.5 + 91.8*0.3 = 31.8 + 115.4 + 27.54 = 174.74
        {0.5, 0.3, 1.0, 174.74},
        // resnet50 bs128 solo: 31.8 + 230.8*0.711 + 91.8*0.502 = 31.8 + 164.099 + 46.084 = 241.983
        {0.711, 0.502, 1.0, 241.9824},
        // everything busy: 31.8 + 230.8 + 91.8 = 354.4 (< 400, not capped)
        {1.0, 1.0, 1.0, 354.4},
        // trace-level factor kappa = 1.27: 1.27 * 174.74 = 221.9198
        {0.5, 0.3, 1.27, 221.9198},
        // cap: 2 * 354.4 = 708.8 -> 400
        {1.0, 1.0, 2.0, 400.0},
        // floor: 31.8 + 230.8*0.05 = 43.34 -> 50
        {0.05, 0.0, 1.0, 50.0},
        // active but no activity at all: 31.8 -> 50
        {0.0, 0.0, 1.0, 50.0},
    };
    for (const PowerCase& c : table) {
        SCOPED_TRACE("smact=" + std::to_string(c.smact) + " drama=" + std::to_string(c.drama) +
                     " scale=" + std::to_string(c.scale));
        GpuActivity a;
        a.active = true;
        a.smact = c.smact;
        a.drama = c.drama;
        EXPECT_NEAR(gpu_power_w(a, a100(), c.scale), c.watts, 1e-9);
    }
}

// This test verifies that power uses the limits of the GPU type it is given (H100: 70 W idle,
// 700 W cap).
TEST(InterferenceTest, PowerUsesTheLimitsOfTheGivenType) {
    const GpuType& h100 = known_gpu_types()[2];
    ASSERT_EQ(h100.name, "H100-80GB");
    EXPECT_DOUBLE_EQ(gpu_power_w(GpuActivity{}, h100), 70.0);
    GpuActivity busy;
    busy.active = true;
    busy.smact = 1.0;
    busy.drama = 1.0;
    EXPECT_DOUBLE_EQ(gpu_power_w(busy, h100, 2.0), 700.0);  // 708.8 capped at 700
    EXPECT_NEAR(gpu_power_w(busy, h100), 354.4, 1e-9);      // not capped
}

// This test verifies that the sharing-mode names parse, including the aliases, and round-trip.
TEST(InterferenceTest, ParseSharingModeAcceptsKnownNames) {
    struct Case {
        const char* text;
        SharingMode mode;
    };
    for (const Case& c :
         {Case{"mps", SharingMode::Mps}, Case{"timeslice", SharingMode::Timeslice},
          Case{"time-slice", SharingMode::Timeslice}, Case{"naive", SharingMode::Timeslice}}) {
        auto parsed = parse_sharing_mode(c.text);
        ASSERT_TRUE(parsed) << c.text;
        EXPECT_EQ(*parsed, c.mode) << c.text;
    }
    EXPECT_EQ(to_string(SharingMode::Mps), "mps");
    EXPECT_EQ(to_string(SharingMode::Timeslice), "timeslice");
    EXPECT_EQ(*parse_sharing_mode(to_string(SharingMode::Mps)), SharingMode::Mps);
    EXPECT_EQ(*parse_sharing_mode(to_string(SharingMode::Timeslice)), SharingMode::Timeslice);
}

// This test verifies that an unknown sharing mode is an invalid-argument error that quotes the
// text and names the accepted modes.
TEST(InterferenceTest, ParseSharingModeRejectsUnknownNames) {
    for (const char* text : {"", "exclusive", "MPS-ish", "time slice", " mps"}) {
        auto parsed = parse_sharing_mode(text);
        ASSERT_FALSE(parsed) << "'" << text << "'";
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(parsed.error().message.find(std::string("'") + text + "'"), std::string::npos)
            << parsed.error().message;
        EXPECT_NE(parsed.error().message.find("mps"), std::string::npos);
        EXPECT_NE(parsed.error().message.find("timeslice"), std::string::npos);
    }
}

// This test verifies the carma policy's predictor: SM activity maps back to the utilisation
// demand it came from (SMACT = 0.905 u^1.52), and the speeds are the model's task_speed among
// the tasks given; a task alone runs at full speed.
TEST(InterferenceTest, SpeedPredictorFollowsTheModel) {
    EXPECT_DOUBLE_EQ(demand_from_smact(0), 0);
    EXPECT_NEAR(demand_from_smact(0.905 * std::pow(0.8, 1.52)), 0.8, 1e-9);
    EXPECT_DOUBLE_EQ(demand_from_smact(1.0), 1.0);  // clamped
    const SpeedPredictor predict = speed_predictor(SharingMode::Mps);
    const SlowdownParams p = slowdown_params(SharingMode::Mps);
    std::vector<double> alone = {0.7};
    std::vector<double> speed(1);
    predict(alone, speed);
    EXPECT_DOUBLE_EQ(speed[0], 1.0);
    std::vector<double> pair = {0.7, 0.2};
    std::vector<double> speeds(2);
    predict(pair, speeds);
    const double total = demand_from_smact(0.7) + demand_from_smact(0.2);
    EXPECT_DOUBLE_EQ(speeds[0], task_speed(demand_from_smact(0.7), total, p));
    EXPECT_DOUBLE_EQ(speeds[1], task_speed(demand_from_smact(0.2), total, p));
    EXPECT_LT(speeds[0], 1.0);
}

}  // namespace
}  // namespace carma::model
