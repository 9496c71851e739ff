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
                            const std::string& cls = "mps/heavy/2") {
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
    EXPECT_DOUBLE_EQ(sc.factor("resnet|1", "mps/heavy/2").k, 1.0);
    for (int i = 0; i < 9; ++i) {
        EXPECT_TRUE(sc.observe(shared_run(1.5)));
        sc.observe(shared_run(1.1, "bert|1"));
    }
    const auto own = sc.factor("resnet|1", "mps/heavy/2");
    EXPECT_EQ(own.basis, "family");
    EXPECT_NEAR(own.k, std::exp(9 * std::log(1.5) / 10), 1e-9);  // one pseudo-observation at 1
    EXPECT_EQ(sc.factor("vgg|1", "mps/heavy/2").basis, "class");
    EXPECT_EQ(sc.factor("vgg|1", "mps/heavy/4+").basis, "load");
    EXPECT_EQ(sc.factor("vgg|1", "mps/light/2").basis, "all");

    sc.bind(0.9, "resnet|1");
    sc.bind(0.8, "bert|1");
    std::vector<double> acts = {0.9, 0.8};
    std::vector<double> speeds = {0.9, 0.9};
    sc.correct(acts, speeds);
    EXPECT_NEAR(speeds[0], 0.9 / own.k, 1e-12);
    EXPECT_NEAR(speeds[1], 0.9 / sc.factor("bert|1", "mps/heavy/2").k, 1e-12);
    std::vector<double> alone = {1.0};
    sc.correct(std::vector<double>{0.9}, alone);
    EXPECT_DOUBLE_EQ(alone[0], 1.0);
}

// This test verifies that the wrapped predictor corrects the raw one and that replaying the
// entries gives the same factors (how history stores them).
TEST(SpeedCorrectionTest, WrappedPredictorAndReplay) {
    auto sc = std::make_shared<SpeedCorrection>("mps");
    for (int i = 0; i < 5; ++i) {
        sc->observe(shared_run(1.25, "a|1", "mps/medium/2"));
    }
    SpeedPredictor raw = [](std::span<const double> a, std::span<double> s) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            s[i] = 0.8;
        }
    };
    SpeedPredictor p = corrected_predictor(raw, sc);
    std::vector<double> speeds(2);
    p(std::vector<double>{0.4, 0.4}, speeds);
    const double k = sc->factor("", "mps/medium/2").k;
    EXPECT_GT(k, 1.15);
    EXPECT_NEAR(speeds[0], 0.8 / k, 1e-12);

    SpeedCorrection replay("mps");
    for (const auto& e : sc->entries()) {
        for (double f : e.k) {
            replay.add(e.family, e.sharing_class, f);
        }
    }
    EXPECT_NEAR(replay.factor("a|1", "mps/medium/2").k, sc->factor("a|1", "mps/medium/2").k, 1e-12);
}

// This test verifies the cautious factor a --max-slowdown bound is checked against: the upper
// one-sided 95 % confidence bound of the mean log k (unshrunk: the prior's k = 1 is the
// optimistic side), never below the shrunk mean; equal observations give their own k; the
// cautious predictor divides by it, and only tasks that share.
TEST(SpeedCorrectionTest, CautiousFactorBoundsTheMeanFromAbove) {
    auto sc = std::make_shared<SpeedCorrection>("mps");
    const std::vector<double> ks = {1.1, 1.5, 1.3, 1.2, 1.4};
    for (double k : ks) {
        sc->observe(shared_run(k, "a|1", "mps/heavy/2"));
    }
    double sum = 0, sum_sq = 0;
    for (double k : ks) {
        sum += std::log(k);
        sum_sq += std::log(k) * std::log(k);
    }
    const double mean = sum / 5;
    const double sd = std::sqrt((sum_sq - sum * mean) / 4);
    const auto f = sc->factor("a|1", "mps/heavy/2");
    EXPECT_NEAR(f.k, std::exp(sum / 6), 1e-9);
    EXPECT_NEAR(f.cautious_k, std::exp(mean + 1.645 * sd / std::sqrt(5.0)), 1e-9);
    EXPECT_GT(f.cautious_k, std::exp(mean));

    SpeedCorrection same("mps");
    for (int i = 0; i < 4; ++i) {
        same.observe(shared_run(1.25, "b|1", "mps/heavy/2"));
    }
    EXPECT_NEAR(same.factor("b|1", "mps/heavy/2").cautious_k, 1.25, 1e-9);
    EXPECT_LT(same.factor("b|1", "mps/heavy/2").k, 1.25);
    EXPECT_NEAR(same.factor("c|1", "mps/light/2").cautious_k, 1.25, 1e-9);  // everything's

    SpeedPredictor raw = [](std::span<const double> a, std::span<double> s) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            s[i] = 0.8;
        }
    };
    sc->bind(0.9, "a|1");
    std::vector<double> speeds(2);
    cautious_predictor(raw, sc)(std::vector<double>{0.9, 0.8}, speeds);
    EXPECT_NEAR(speeds[0], 0.8 / f.cautious_k, 1e-12);
    EXPECT_LT(speeds[0], 0.8 / f.k);
    std::vector<double> alone(1);
    cautious_predictor(raw, sc)(std::vector<double>{0.9}, alone);
    EXPECT_DOUBLE_EQ(alone[0], 0.8);
}

// This test verifies that the version changes whenever correct() may answer the same input
// differently, and only then for a binding: an activity bound to a family that has no figure of
// its own is corrected as before.
TEST(SpeedCorrectionTest, VersionChangesWhenAnswersMay) {
    SpeedCorrection sc("mps");
    const auto v0 = sc.version();
    sc.bind(0.5, "a|1");
    EXPECT_EQ(sc.version(), v0);  // no figure of its own: corrected as any unbound activity
    sc.add("a|1", "mps/heavy/2", 1.5);
    const auto v1 = sc.version();
    EXPECT_NE(v1, v0);
    for (int i = 0; i < 3; ++i) {
        sc.add("a|1", "mps/heavy/2", 1.5);
        sc.add("b|1", "mps/heavy/2", 1.1);
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
    // With classes stored before the count was part of them ("mps/heavy").
    const std::vector<std::string> classes = {"mps/light/2",  "mps/medium/3", "mps/heavy/2",
                                              "mps/heavy/4+", "mps/heavy",    "timeslice/heavy/2",
                                              "mps/medium/2"};
    const std::vector<double> activities = {0.15, 0.35, 0.55, 0.75};
    std::map<double, std::string> family_of;  // the binding as the definition reads it
    auto check = [&] {
        // Partners of summed activity 0.1 / 0.5 / 0.9 put the task in the light / medium /
        // heavy class; one partner makes two tasks, two three, four five.
        const std::vector<std::pair<std::vector<double>, std::string>> partners = {
            {{0.1}, "mps/light/2"},
            {{0.5}, "mps/medium/2"},
            {{0.9}, "mps/heavy/2"},
            {{0.25, 0.25}, "mps/medium/3"},
            {{0.45, 0.45}, "mps/heavy/3"},
            {{0.05, 0.05, 0.05, 0.05}, "mps/light/4+"},
            {{0.3, 0.3, 0.3, 0.3}, "mps/heavy/4+"}};
        for (double a : activities) {
            for (const auto& [others, cls] : partners) {
                std::vector<double> acts = {a};
                acts.insert(acts.end(), others.begin(), others.end());
                std::vector<double> speeds(acts.size(), 0.5);
                sc.correct(acts, speeds);
                const auto f = family_of.find(a);
                const double k = sc.factor(f == family_of.end() ? "" : f->second, cls).k;
                EXPECT_EQ(speeds[0], std::min(1.0, 0.5 / k)) << a << " " << cls;
            }
        }
    };
    for (int step = 0; step < 90; ++step) {
        const std::string& family = families[static_cast<std::size_t>(step * 7 % 3)];
        sc.add(family, classes[static_cast<std::size_t>(step * 5 % classes.size())],
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

// This test verifies the sharing class: the co-runners' summed activity and the number of tasks
// on the GPU (itself included), 4 and more counted as one.
TEST(SpeedCorrectionTest, SharingClassCountsTasks) {
    EXPECT_EQ(sharing_class("mps", 0.1, 2), "mps/light/2");
    EXPECT_EQ(sharing_class("mps", 0.5, 2), "mps/medium/2");
    EXPECT_EQ(sharing_class("mps", 0.9, 3), "mps/heavy/3");
    EXPECT_EQ(sharing_class("timeslice", 2.4, 5), "timeslice/heavy/4+");
    // A time-weighted mean count: 2.4 was mostly a pair, 2.6 mostly three.
    EXPECT_EQ(sharing_class("mps", 0.9, 2.4), "mps/heavy/2");
    EXPECT_EQ(sharing_class("mps", 0.9, 2.6), "mps/heavy/3");
    EXPECT_EQ(sharing_class("mps", 0.9, 3.5), "mps/heavy/4+");
    EXPECT_EQ(sharing_load("mps/heavy/4+"), "mps/heavy");
    EXPECT_EQ(sharing_load("mps/heavy"), "mps/heavy");  // stored before counts
}

// This test verifies that five-way packing learns its own, larger, factor than pairs of the same
// summed-activity class, and that correct() applies each by the number of tasks on the GPU.
TEST(SpeedCorrectionTest, CrowdedGpusLearnTheirOwnFactor) {
    SpeedCorrection sc("mps");
    for (int i = 0; i < 6; ++i) {
        sc.observe(shared_run(1.1, "pair|1", "mps/heavy/2"));
        sc.observe(shared_run(2.0, "crowd|1", "mps/heavy/4+"));
    }
    const double pair = sc.factor("other|1", "mps/heavy/2").k;
    const double crowd = sc.factor("other|1", "mps/heavy/4+").k;
    EXPECT_EQ(sc.factor("other|1", "mps/heavy/4+").basis, "class");
    EXPECT_NEAR(pair, std::exp(6 * std::log(1.1) / 7), 1e-9);
    EXPECT_NEAR(crowd, std::exp(6 * std::log(2.0) / 7), 1e-9);
    // Three tasks: no figure of its own yet, so the heavy load's over every count.
    const auto three = sc.factor("other|1", "mps/heavy/3");
    EXPECT_EQ(three.basis, "load");
    EXPECT_EQ(three.samples, 12u);

    std::vector<double> two = {0.5, 0.9};
    std::vector<double> two_speeds = {0.6, 0.6};
    sc.correct(two, two_speeds);
    EXPECT_NEAR(two_speeds[0], 0.6 / pair, 1e-12);
    std::vector<double> five = {0.5, 0.3, 0.3, 0.3, 0.3};
    std::vector<double> five_speeds(5, 0.3);
    sc.correct(five, five_speeds);
    EXPECT_NEAR(five_speeds[0], 0.3 / crowd, 1e-12);
}

// This test verifies that classes stored before the count was part of them still load and teach:
// they count for their load and for everything, and a family's own figure of the old name is
// read back under that name.
TEST(SpeedCorrectionTest, ClassesWithoutCountStillLoad) {
    SpeedCorrection sc("mps");
    for (int i = 0; i < 4; ++i) {
        sc.add("old|1", "mps/heavy", 1.4);
    }
    EXPECT_EQ(sc.factor("old|1", "mps/heavy").basis, "family");
    const auto f = sc.factor("new|1", "mps/heavy/4+");
    EXPECT_EQ(f.basis, "load");
    EXPECT_NEAR(f.k, std::exp(4 * std::log(1.4) / 5), 1e-9);
    EXPECT_EQ(sc.factor("new|1", "mps/light/2").basis, "all");
    std::vector<double> speeds = {0.6, 0.6, 0.6};
    sc.correct(std::vector<double>{0.5, 0.5, 0.5}, speeds);
    EXPECT_NEAR(speeds[0], 0.6 / f.k, 1e-12);
}

}  // namespace
}  // namespace carma
