#include "core/speed_correction.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

SpeedObservation shared_run(double k, const std::string& family = "resnet|1",
                            const std::string& cls = "mps/heavy") {
    // 400 s alone, then 800 s shared, in which the predictor said 0.75 * 800 = 600 s of progress
    // and the world gave 600 / k: alone the whole job takes 400 + 600 / k.
    SpeedObservation o;
    o.family = family;
    o.sharing_class = cls;
    o.shared_s = 800;
    o.run_s = 400 + 800;
    o.predicted_shared_progress_s = 600;
    o.solo_s = 400 + 600.0 / k;
    return o;
}

// This test verifies the observed factor: predicted progress while shared over observed.
TEST(SpeedCorrectionTest, ObservedFactorIsPredictedOverObservedProgress) {
    const SpeedCorrectionConfig c;
    EXPECT_NEAR(*observed_factor(shared_run(1.0), c), 1.0, 1e-12);
    EXPECT_NEAR(*observed_factor(shared_run(1.3), c), 1.3, 1e-12);
    SpeedObservation barely = shared_run(1.3);
    barely.shared_s = 0.05 * barely.run_s;
    EXPECT_FALSE(observed_factor(barely, c));
    SpeedObservation odd = shared_run(1.3);
    odd.solo_s = 100;  // less work than its alone time: another input
    EXPECT_FALSE(observed_factor(odd, c));
}

// This test verifies that the correction applies per family first, then per class, and only to
// tasks that share: a lone task keeps the predictor's speed.
TEST(SpeedCorrectionTest, CorrectsPerFamilyThenClass) {
    SpeedCorrection sc("mps");
    EXPECT_DOUBLE_EQ(sc.factor("resnet|1", "mps/heavy").k, 1.0);
    for (int i = 0; i < 9; ++i) {
        EXPECT_TRUE(sc.observe(shared_run(1.5)));
        sc.observe(shared_run(1.1, "bert|1"));
    }
    const auto own = sc.factor("resnet|1", "mps/heavy");
    EXPECT_EQ(own.basis, "family");
    EXPECT_NEAR(own.k, std::exp(9 * std::log(1.5) / 10), 1e-9);  // one pseudo-observation at 1
    EXPECT_EQ(sc.factor("vgg|1", "mps/heavy").basis, "class");
    EXPECT_EQ(sc.factor("vgg|1", "mps/light").basis, "all");

    sc.bind(0.9, "resnet|1");
    sc.bind(0.8, "bert|1");
    std::vector<double> acts = {0.9, 0.8};
    std::vector<double> speeds = {0.9, 0.9};
    sc.correct(acts, speeds);
    EXPECT_NEAR(speeds[0], 0.9 / own.k, 1e-12);
    EXPECT_NEAR(speeds[1], 0.9 / sc.factor("bert|1", "mps/heavy").k, 1e-12);
    std::vector<double> alone = {1.0};
    sc.correct(std::vector<double>{0.9}, alone);
    EXPECT_DOUBLE_EQ(alone[0], 1.0);
}

// This test verifies that the wrapped predictor corrects the raw one and that replaying the
// entries gives the same factors (how history stores them).
TEST(SpeedCorrectionTest, WrappedPredictorAndReplay) {
    auto sc = std::make_shared<SpeedCorrection>("mps");
    for (int i = 0; i < 5; ++i) {
        sc->observe(shared_run(1.25, "a|1", "mps/medium"));
    }
    SpeedPredictor raw = [](std::span<const double> a, std::span<double> s) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            s[i] = 0.8;
        }
    };
    SpeedPredictor p = corrected_predictor(raw, sc);
    std::vector<double> speeds(2);
    p(std::vector<double>{0.4, 0.4}, speeds);
    const double k = sc->factor("", "mps/medium").k;
    EXPECT_GT(k, 1.15);
    EXPECT_NEAR(speeds[0], 0.8 / k, 1e-12);

    SpeedCorrection replay("mps");
    for (const auto& e : sc->entries()) {
        for (double f : e.k) {
            replay.add(e.family, e.sharing_class, f);
        }
    }
    EXPECT_NEAR(replay.factor("a|1", "mps/medium").k, sc->factor("a|1", "mps/medium").k, 1e-12);
}

// This test verifies that the version changes whenever correct() may answer the same input
// differently, and only then for a binding: an activity bound to a family that has no figure of
// its own is corrected as before.
TEST(SpeedCorrectionTest, VersionChangesWhenAnswersMay) {
    SpeedCorrection sc("mps");
    const auto v0 = sc.version();
    sc.bind(0.5, "a|1");
    EXPECT_EQ(sc.version(), v0);  // no figure of its own: corrected as any unbound activity
    sc.add("a|1", "mps/heavy", 1.5);
    const auto v1 = sc.version();
    EXPECT_NE(v1, v0);
    for (int i = 0; i < 3; ++i) {
        sc.add("a|1", "mps/heavy", 1.5);
        sc.add("b|1", "mps/heavy", 1.1);
    }
    const auto v2 = sc.version();
    EXPECT_NE(v2, v1);
    sc.bind(0.7, "c|1");
    EXPECT_EQ(sc.version(), v2);  // c has no own figure
    sc.bind(0.9, "a|1");
    const auto v3 = sc.version();
    EXPECT_NE(v3, v2);  // a's own heavy figure differs from the class's
    sc.bind(0.9, "a|1");
    EXPECT_EQ(sc.version(), v3);
    sc.bind(0.9, "b|1");  // two families of one activity: the class figure again
    EXPECT_NE(sc.version(), v3);
}

// This test verifies that the factors correct() applies, kept up to date as the correction
// learns, are bit for bit those factor() defines: the family's own figure where it has one, else
// the class's, everything's or 1, and the class figure for an activity of several families.
TEST(SpeedCorrectionTest, KeptFactorsMatchTheDefinition) {
    SpeedCorrection sc("mps");
    const std::vector<std::string> families = {"a|1", "b|1", "c|2"};
    const std::vector<std::string> classes = {"mps/light", "mps/medium", "mps/heavy",
                                              "timeslice/heavy"};
    const std::vector<double> activities = {0.15, 0.35, 0.55, 0.75};
    std::map<double, std::string> family_of;  // the binding as the definition reads it
    auto check = [&] {
        // A partner of activity 0.1 / 0.5 / 0.9 puts the task in the light / medium / heavy class.
        const std::vector<std::pair<double, std::string>> loads = {
            {0.1, "mps/light"}, {0.5, "mps/medium"}, {0.9, "mps/heavy"}};
        for (double a : activities) {
            for (const auto& [partner, cls] : loads) {
                std::vector<double> speeds = {0.5, 0.5};
                sc.correct(std::vector<double>{a, partner}, speeds);
                const auto f = family_of.find(a);
                const double k = sc.factor(f == family_of.end() ? "" : f->second, cls).k;
                EXPECT_EQ(speeds[0], std::min(1.0, 0.5 / k)) << a << " " << cls;
            }
        }
    };
    for (int step = 0; step < 60; ++step) {
        const std::string& family = families[static_cast<std::size_t>(step * 7 % 3)];
        sc.add(family, classes[static_cast<std::size_t>(step * 5 % 4)],
               0.6 + 0.05 * static_cast<double>(step % 11));
        if (step % 4 == 0) {
            const double a = activities[static_cast<std::size_t>(step / 4 % 4)];
            sc.bind(a, family);
            auto [it, added] = family_of.try_emplace(a, family);
            if (!added && it->second != family) {
                it->second = "";
            }
        }
        check();
    }
}

}  // namespace
}  // namespace carma
