// The knowledge rule: which source wins, how the margin shrinks as history agrees, what an
// out-of-memory crash teaches, and that the oracle value is never read.

#include <gtest/gtest.h>

#include "core/knowledge.h"

namespace carma {
namespace {

RunFacts ok(MiB peak, double run_s, std::optional<double> activity = std::nullopt) {
    return RunFacts{peak, run_s, activity, true, false};
}

RunFacts oom(MiB held) { return RunFacts{held, 10, std::nullopt, false, true}; }

TEST(KnowledgeTest, NothingKnown) {
    TaskSpec t;
    const Learned l = derive_knowledge(t, {}, {}, std::nullopt, KnowledgeConfig{});
    EXPECT_FALSE(l.need_mib);
    EXPECT_FALSE(l.duration_s);
    EXPECT_EQ(l.activity, 0.6);
    EXPECT_EQ(l.runs, 0);
    EXPECT_NE(l.basis.find("memory unknown"), std::string::npos) << l.basis;
    EXPECT_NE(l.basis.find("class default"), std::string::npos) << l.basis;
}

TEST(KnowledgeTest, NeverReadsTheOracle) {
    TaskSpec t;
    t.memory.profiled_mib = 13000;
    EXPECT_FALSE(derive_knowledge(t, {}, {}, std::nullopt, KnowledgeConfig{}).need_mib);
}

TEST(KnowledgeTest, SourcesInOrder) {
    TaskSpec t;
    t.memory.horus_mib = 9000;
    t.memory.gpumemnet_mib = 11000;
    const KnowledgeConfig c;
    Learned l = derive_knowledge(t, {}, {}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 11000);  // the largest estimate
    EXPECT_NE(l.basis.find("GPUMemNet estimate"), std::string::npos) << l.basis;
    t.memory.declared_mib = 8000;
    EXPECT_EQ(derive_knowledge(t, {}, {}, std::nullopt, c).need_mib, 8000);
    l = derive_knowledge(t, {}, {ok(7000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 8000) << "the declaration outranks the family";
    t.memory.declared_mib.reset();
    l = derive_knowledge(t, {}, {ok(7000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 7000) << "the family outranks estimates";
    EXPECT_NE(l.basis.find("family history"), std::string::npos) << l.basis;
    t.memory.declared_mib = 8000;
    l = derive_knowledge(t, {ok(6000, 100)}, {ok(7000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 6000);
    EXPECT_EQ(l.runs, 1);
    EXPECT_EQ(l.margin_mib, 2048);
}

TEST(KnowledgeTest, MarginShrinksAsHistoryAgrees) {
    TaskSpec t;
    const KnowledgeConfig c;
    const Learned one = derive_knowledge(t, {ok(10000, 60)}, {}, std::nullopt, c);
    const Learned four =
        derive_knowledge(t, {ok(10000, 60), ok(10010, 61), ok(10005, 59), ok(10000, 60)}, {},
                         std::nullopt, c);
    EXPECT_EQ(one.margin_mib, 2048);
    EXPECT_EQ(four.need_mib, 10010);
    EXPECT_EQ(four.margin_mib, 10 + 2048 / 4);
    // Runs that disagree keep a wide margin.
    const Learned noisy =
        derive_knowledge(t, {ok(8000, 60), ok(12000, 60), ok(9000, 60)}, {}, std::nullopt, c);
    EXPECT_EQ(noisy.need_mib, 12000);
    EXPECT_EQ(noisy.margin_mib, 2048);
    // Twenty old runs of a command that since grew: only the newest count.
    std::vector<RunFacts> drift(30, ok(4000, 60));
    for (int i = 0; i < 20; ++i) {
        drift.push_back(ok(6000, 60));
    }
    EXPECT_EQ(derive_knowledge(t, drift, {}, std::nullopt, c).need_mib, 6000);
}

TEST(KnowledgeTest, AnOutOfMemoryCrashIsALowerBoundNeverANeed) {
    TaskSpec t;
    const KnowledgeConfig c;
    Learned l = derive_knowledge(t, {oom(15000)}, {}, std::nullopt, c);
    EXPECT_FALSE(l.need_mib) << "a crash says at least, not how much";
    EXPECT_EQ(l.lower_bound_mib, 15000);
    t.memory.declared_mib = 12000;  // the user's figure was too small
    l = derive_knowledge(t, {oom(15000)}, {}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 15000);
    EXPECT_NE(l.basis.find("raised to"), std::string::npos) << l.basis;
    // A later success is what it really needs.
    l = derive_knowledge(t, {oom(15000), ok(18000, 60)}, {}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 18000);
}

TEST(KnowledgeTest, DurationAndActivity) {
    TaskSpec t;
    const KnowledgeConfig c;
    Learned l = derive_knowledge(t, {}, {}, 3600.0, c);
    EXPECT_EQ(l.duration_s, 3600.0);
    l = derive_knowledge(t, {ok(1000, 100, 0.5), ok(1000, 300, 0.7), ok(1000, 200)}, {}, 3600.0, c);
    EXPECT_EQ(l.duration_s, 200.0);  // the median, not the limit
    EXPECT_DOUBLE_EQ(*l.activity, 0.6);
    l = derive_knowledge(t, {}, {ok(1000, 100, 0.9)}, std::nullopt, c);
    EXPECT_FALSE(l.duration_s) << "a family's run time says little about other arguments";
    EXPECT_EQ(l.activity, 0.9);
    // Failed runs teach nothing.
    l = derive_knowledge(t, {RunFacts{30000, 5, 0.1, false, false}}, {}, std::nullopt, c);
    EXPECT_FALSE(l.need_mib);
    EXPECT_FALSE(l.duration_s);
}

// This test verifies that what the user declared outranks the history of other commands of the
// family (issue 19, item 7): a batch-256 run declared at 30 GB is not planned from a batch-16
// sibling's 8 GB peak. The command's own history still outranks the declaration, and the
// family still counts where nothing was declared.
TEST(KnowledgeTest, ADeclarationOutranksFamilyHistory) {
    TaskSpec t;
    t.memory.declared_mib = 30000;
    const KnowledgeConfig c;
    Learned l = derive_knowledge(t, {}, {ok(8000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 30000) << l.basis;
    EXPECT_EQ(l.basis.find("declared"), 0u) << l.basis;
    l = derive_knowledge(t, {ok(26000, 100)}, {ok(8000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 26000) << l.basis;
    t.memory.declared_mib.reset();
    l = derive_knowledge(t, {}, {ok(8000, 100)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 8000) << l.basis;
    // A sibling's crash says nothing about a declared command's need either.
    t.memory.declared_mib = 6000;
    l = derive_knowledge(t, {}, {oom(20000)}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 6000) << l.basis;
}

// This test verifies that a run never seen on its GPUs teaches no memory need and no activity
// (issue 19, item 4), only its run time; and that the basis says so.
TEST(KnowledgeTest, AnUnobservedRunTeachesNoMemoryAndNoActivity) {
    TaskSpec t;
    const KnowledgeConfig c;
    RunFacts unseen = ok(0, 120, 0.9);
    unseen.observed = false;
    Learned l = derive_knowledge(t, {unseen}, {}, std::nullopt, c);
    EXPECT_FALSE(l.need_mib) << l.basis;
    EXPECT_EQ(l.runs, 0);
    EXPECT_EQ(l.activity, c.default_activity) << l.basis;
    EXPECT_EQ(l.duration_s, 120.0) << "the wall clock saw it run";
    EXPECT_NE(l.basis.find("1 unobserved run(s)"), std::string::npos) << l.basis;
    // With a declaration it plans with that, not 0 + margin.
    t.memory.declared_mib = 12000;
    l = derive_knowledge(t, {unseen}, {}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 12000) << l.basis;
    // Seen runs beside it count as before.
    t.memory.declared_mib.reset();
    l = derive_knowledge(t, {unseen, ok(9000, 100, 0.5)}, {unseen}, std::nullopt, c);
    EXPECT_EQ(l.need_mib, 9000) << l.basis;
    EXPECT_EQ(l.runs, 1);
    EXPECT_DOUBLE_EQ(*l.activity, 0.5);
    // A family of unseen runs teaches nothing either.
    l = derive_knowledge(t, {}, {unseen}, std::nullopt, c);
    EXPECT_FALSE(l.need_mib) << l.basis;
}

// This test verifies which attempts count as observed: one whose processes showed up with
// memory on some GPU; never seen (no entry) or seen only without memory (the driver did not
// report usedGpuMemory) is not.
TEST(KnowledgeTest, ObservationOfAnAttempt) {
    EXPECT_EQ(observation_of({}), Observation::NotSeen);
    EXPECT_EQ(observation_of({{0, 0}, {1, 0}}), Observation::NoMemory);
    EXPECT_EQ(observation_of({{0, 0}, {1, 700}}), Observation::Seen);
    EXPECT_EQ(to_string(Observation::NotSeen), "not-seen");
    EXPECT_EQ(to_string(Observation::NoMemory), "no-memory");
    EXPECT_NE(unobserved_why(Observation::NotSeen).find("PID namespace"), std::string::npos);
}

// This test verifies the rule for one sample of a task's SM activity (issue 19, item 7): its
// processes' own reading where the backend has per-process readings, whoever else runs there;
// else the GPU's reading, but only when it ran alone on the GPU; else nothing.
TEST(KnowledgeTest, ActivityIsItsOwnOrNone) {
    EXPECT_EQ(sample_activity(0.2, 0.9, false), 0.2);
    EXPECT_EQ(sample_activity(0.2, 0.9, true), 0.2);
    EXPECT_EQ(sample_activity(std::nullopt, 0.7, true), 0.7);
    EXPECT_FALSE(sample_activity(std::nullopt, 0.9, false)) << "the co-runners' share is not its";
    EXPECT_FALSE(sample_activity(std::nullopt, std::nullopt, true));
    EXPECT_EQ(sample_activity(1.4, std::nullopt, false), 1.0);
}

}  // namespace
}  // namespace carma
