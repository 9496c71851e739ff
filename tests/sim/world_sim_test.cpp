// The simulator's world is not carma's predictor: tasks run at the world's speeds and peaks,
// carma sees only samples and history, and learns how wrong its predictor is.

#include <cmath>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/simulator.h"

namespace carma::sim {
namespace {

// Two workloads whose SM activity is the A100 map of their utilisation (SMACT = 0.905 u^1.52), so
// the predictor's demand is their true demand: under the model world the predictor is exact and
// any error is the world's bias.
model::Catalog catalog() {
    auto smact = [](double u) { return 0.905 * std::pow(u, 1.52); };
    const std::string csv = fmt::format(
        "task_name,model,gpus,t_solo_s,t_start_s,m_peak_mib,gpu_util,smact,smocc,drama\n"
        "A,a,1,600,8,8000,0.8,{},0.2,0.1\n"
        "B,b,1,900,8,9000,0.9,{},0.35,0.3\n",
        smact(0.8), smact(0.9));
    return *model::Catalog::parse(csv, "test catalog");
}

// First each workload alone (solo history), then a burst that makes them share 1 GPU.
Trace trace() {
    std::string csv = "submit_offset_s,task_name\n0,A\n700,B\n";
    for (int i = 0; i < 24; ++i) {
        csv += fmt::format("{},{}\n", 2000 + 5 * i, i % 2 ? "A" : "B");
    }
    return *parse_trace(csv, "burst");
}

SimConfig config(double bias, double noise = 0) {
    SimConfig c;
    c.gpus = *model::parse_gpu_set("1xA100-40GB");
    c.scheduler.policy = *find_policy("carma");
    c.scheduler.placement.explain = false;
    c.world = model::WorldConfig{model::WorldKind::Model, bias, noise, 1};
    return c;
}

double learned_k(const SimHistory& h) {
    SpeedCorrection sc("mps");
    for (const auto& e : h.speed_corrections) {
        for (double k : e.k) {
            sc.add(e.family, e.sharing_class, k);
        }
    }
    return sc.factor("a|1", "mps/heavy").k;
}

// This test verifies that carma measures its predictor's error under a biased world: with bias
// 0.5 every shared second is 1.5 times slower than predicted, and that is what it learns (shrunk
// a little toward 1 by the prior); in the unbiased model world it learns no error.
TEST(WorldSimTest, CarmaLearnsThePredictorsErrorUnderABiasedWorld) {
    const model::Catalog cat = catalog();
    const Trace t = trace();
    SimHistory biased, exact;
    const SimConfig cb = config(0.5);
    const PolicyResult rb = simulate(t, cat, cb, &biased);
    EXPECT_EQ(rb.tasks_completed, 26);
    ASSERT_FALSE(biased.speed_corrections.empty()) << "no shared attempt was observed";
    std::size_t samples = 0;
    for (const auto& e : biased.speed_corrections) {
        for (double k : e.k) {
            EXPECT_NEAR(k, 1.5, 0.02) << e.family << " " << e.sharing_class;
            ++samples;
        }
    }
    EXPECT_GE(samples, 3u);
    EXPECT_GT(learned_k(biased), 1.3);

    const SimConfig ce = config(0.0);
    simulate(t, cat, ce, &exact);
    for (const auto& e : exact.speed_corrections) {
        for (double k : e.k) {
            EXPECT_NEAR(k, 1.0, 0.02) << e.family << " " << e.sharing_class;
        }
    }
}

// This test verifies that the world, not the model, decides run times: the same decisions take
// longer under a bias, and a task alone is not slowed.
TEST(WorldSimTest, BiasSlowsOnlySharedTasks) {
    const model::Catalog cat = catalog();
    const Trace t = trace();
    SimConfig plain = config(0.0);
    plain.speed_correction = false;
    SimConfig biased = config(0.5);
    biased.speed_correction = false;
    const PolicyResult a = simulate(t, cat, plain);
    const PolicyResult b = simulate(t, cat, biased);
    EXPECT_DOUBLE_EQ(a.tasks[0].slowdown, b.tasks[0].slowdown);  // the first A ran alone
    EXPECT_GT(b.makespan_s, a.makespan_s);
}

// This test verifies that memory peaks in the world vary around the profile and that history
// learns the peaks the world produced, never the profile.
TEST(WorldSimTest, HistoryLearnsTheWorldsPeaks) {
    const model::Catalog cat = catalog();
    SimHistory h;
    const SimConfig c = config(0.0, 0.1);
    simulate(trace(), cat, c, &h);
    int off_profile = 0, runs = 0;
    for (const auto& [key, facts] : h.exact) {
        const MiB profile = key.starts_with("A|") ? 8000 : 9000;
        for (const RunFacts& f : facts) {
            if (f.succeeded) {
                ++runs;
                off_profile += f.peak_mib != profile ? 1 : 0;
            }
        }
    }
    EXPECT_GT(runs, 20);
    EXPECT_GT(off_profile, runs / 2);
}

}  // namespace
}  // namespace carma::sim
