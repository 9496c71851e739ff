#include "core/policy.h"

#include <gtest/gtest.h>

#include "builders.h"
#include "core/metric_window.h"
#include "core/risk_filter.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using testing::MakeGpu;
using testing::MakeTask;

// This test verifies that every paper name resolves to the right combination (spec §2.2).
TEST(PolicyTest, RegistryResolvesPaperNames) {
    struct Case {
        const char* name;
        const char* canonical;
        bool collocate;
        MemoryKnowledge knowledge;
        Score score;
        bool risk;
    };
    const Case cases[] = {
        {"exclusive", "exclusive", false, MemoryKnowledge::None, Score::FirstFit, false},
        {"oracle-FF", "oracle-FF", true, MemoryKnowledge::Oracle, Score::FirstFit, true},
        {"oracle-BF", "oracle-BF", true, MemoryKnowledge::Oracle, Score::BestFit, true},
        {"oracle-MAGM", "oracle-MAGM", true, MemoryKnowledge::Oracle,
         Score::MostAvailableMemory, true},
        {"oracle-LUG", "oracle-LUG", true, MemoryKnowledge::Oracle, Score::LeastUtilised, true},
        {"OR-RR", "OR-RR", true, MemoryKnowledge::None, Score::RoundRobin, false},
        {"round-robin", "OR-RR", true, MemoryKnowledge::None, Score::RoundRobin, false},
        {"OR-MAGM", "OR-MAGM", true, MemoryKnowledge::None, Score::MostAvailableMemory, true},
        {"or-lug", "OR-LUG", true, MemoryKnowledge::None, Score::LeastUtilised, true},
        {"EST-MAGM", "EST-MAGM", true, MemoryKnowledge::Estimate, Score::MostAvailableMemory,
         true},
        {"EST-LUG", "EST-LUG", true, MemoryKnowledge::Estimate, Score::LeastUtilised, true},
        {"oracle-BF-norisk", "oracle-BF-norisk", true, MemoryKnowledge::Oracle, Score::BestFit,
         false},
        {"oracle-most-available-memory", "oracle-MAGM", true, MemoryKnowledge::Oracle,
         Score::MostAvailableMemory, true},
    };
    for (const Case& c : cases) {
        auto p = find_policy(c.name);
        ASSERT_TRUE(p) << c.name << ": " << p.error().message;
        EXPECT_EQ(p->name, c.canonical) << c.name;
        EXPECT_EQ(p->collocate, c.collocate) << c.name;
        EXPECT_EQ(p->knowledge, c.knowledge) << c.name;
        EXPECT_EQ(p->score, c.score) << c.name;
        EXPECT_EQ(p->risk_filter, c.risk) << c.name;
    }
    for (const std::string& n : paper_policy_names()) {
        EXPECT_TRUE(find_policy(n)) << n;
    }
    for (const std::string& n : registered_policy_names()) {
        EXPECT_TRUE(find_policy(n)) << n;
    }
}

// This test verifies that an unknown policy is refused with the known names as a hint.
TEST(PolicyTest, UnknownPolicy) {
    auto p = find_policy("oracle-XYZ");
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().code, ErrorCode::NotFound);
    EXPECT_NE(p.error().message.find("oracle-MAGM"), std::string::npos);
}

// Four GPUs with different available memory (= free - 512) and SMACT, all shared and settled.
//   GPU0: free 30,512 -> avail 30,000, SMACT 0.60
//   GPU1: free 16,512 -> avail 16,000, SMACT 0.20
//   GPU2: free 20,512 -> avail 20,000, SMACT 0.40
//   GPU3: free  8,512 -> avail  8,000, SMACT 0.10
std::vector<GpuView> four_gpus() {
    return {MakeGpu(0).Busy().Free(30512).Smact(0.60), MakeGpu(1).Busy().Free(16512).Smact(0.20),
            MakeGpu(2).Busy().Free(20512).Smact(0.40), MakeGpu(3).Busy().Free(8512).Smact(0.10)};
}

// This test verifies the order each score produces. Task needs 10,000 MiB profiled, so oracle
// requires avail >= 12,048: GPU3 (8,000) fails, GPUs 0, 1, 2 pass. OR requires avail >= 5,120:
// all pass.
TEST(PolicyTest, ScoresOrderCandidates) {
    struct Case {
        const char* policy;
        int gpus;
        std::vector<int> want;
    };
    const Case cases[] = {
        {"oracle-FF", 1, {0}},    // index order among 0,1,2
        {"oracle-BF", 1, {1}},    // tightest: 16,000 < 20,000 < 30,000
        {"oracle-MAGM", 1, {0}},  // most available: 30,000
        {"oracle-LUG", 1, {1}},   // lowest SMACT among passing: 0.20 (GPU3's 0.10 fails memory)
        {"OR-LUG", 1, {3}},       // no memory knowledge: GPU3 passes 5,120 and has SMACT 0.10
        {"OR-MAGM", 2, {0, 2}},   // 30,000 then 20,000
        {"oracle-BF", 2, {1, 2}}, // 16,000 then 20,000
        {"oracle-LUG", 3, {1, 2, 0}},
    };
    const auto gpus = four_gpus();
    for (const Case& c : cases) {
        PolicySpec p = *find_policy(c.policy);
        TaskSpec t = MakeTask("t").Gpus(c.gpus).Profiled(10000);
        Selection s = select_gpus(p, t, gpus, PlacementConfig{}, 0);
        EXPECT_EQ(s.gpus, c.want) << c.policy << " x" << c.gpus;
    }
}

// This test verifies that a multi-GPU task needs n distinct GPUs that each pass: with only three
// passing GPUs a 4-GPU task waits, and the reason names the failing GPU.
TEST(PolicyTest, MultiGpuNeedsEnoughPassingGpus) {
    PolicySpec p = *find_policy("oracle-MAGM");
    Selection s = select_gpus(p, MakeTask("big").Gpus(4).Profiled(10000), four_gpus(),
                              PlacementConfig{}, 0);
    EXPECT_TRUE(s.gpus.empty());
    EXPECT_NE(s.pending_reason.find("GPU 3: 8,000 MiB available < 12,048 MiB"), std::string::npos)
        << s.pending_reason;
}

// This test verifies the risk filter of spec §1.9: dropped iff SMACT >= 0.80 and
// (SMOCC >= 0.45 or DRAMA >= 0.40); thresholds are configurable.
TEST(PolicyTest, RiskFilter) {
    struct Case {
        double smact, smocc, drama;
        bool high;
    };
    const Case cases[] = {
        {0.79, 0.90, 0.90, false},  // SMs not busy enough
        {0.80, 0.45, 0.00, true},   // busy + crowded (both at the threshold)
        {0.85, 0.10, 0.40, true},   // busy + DRAM saturated
        {0.95, 0.44, 0.39, false},  // busy alone is not enough
    };
    for (const Case& c : cases) {
        GpuView g = MakeGpu(0).Smact(c.smact).Smocc(c.smocc).Drama(c.drama);
        EXPECT_EQ(is_high_risk(g.stats, RiskThresholds{}, true), c.high)
            << c.smact << " " << c.smocc << " " << c.drama;
    }
    GpuView g = MakeGpu(0).Smact(0.70).Smocc(0.50);
    EXPECT_TRUE(
        is_high_risk(g.stats, RiskThresholds{.smact = 0.65, .smocc = 0.35, .drama = 0.5}, true));

    // A high-risk GPU is skipped by risk-filtered policies but not by round robin or -norisk.
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Smact(0.9).Smocc(0.5),
                                 MakeGpu(1).Busy().Smact(0.1)};
    TaskSpec t = MakeTask().Profiled(1000);
    EXPECT_EQ(select_gpus(*find_policy("oracle-FF"), t, gpus, {}, 0).gpus, std::vector<int>{1});
    EXPECT_EQ(select_gpus(*find_policy("oracle-FF-norisk"), t, gpus, {}, 0).gpus,
              std::vector<int>{0});
    EXPECT_EQ(select_gpus(*find_policy("OR-RR"), t, gpus, {}, 0).gpus, std::vector<int>{0});
}

// This test verifies that statistics computed without their order statistics (median, p95, EMA,
// risk all 0) are never read as a quiet GPU: the risk rule calls them high risk and says why, and
// the least-utilised score falls back on the means.
TEST(PolicyTest, StatisticsWithoutOrderStatisticsAreHighRisk) {
    MetricWindow w;
    w.push(MetricSample{.free_mib = 30000, .smact = 0.1, .smocc = 0.1, .drama = 0.1});
    const WindowStats cheap = w.stats_without_order_statistics();
    EXPECT_FALSE(cheap.order_statistics);
    EXPECT_TRUE(is_high_risk(cheap, RiskThresholds{}, true));
    EXPECT_FALSE(is_high_risk(w.stats(), RiskThresholds{}, true));
    EXPECT_NE(describe_risk(cheap, RiskThresholds{}).find("not computed"), std::string::npos);

    SchedulerConfig cfg;
    cfg.policy = *find_policy("oracle-LUG-norisk");
    EXPECT_TRUE(cfg.policy.reads_order_statistics());
    EXPECT_FALSE(find_policy("carma")->reads_order_statistics());
    EXPECT_TRUE(find_policy("carma-risk")->reads_order_statistics());
    EXPECT_FALSE(find_policy("OR-MAGM-norisk")->reads_order_statistics());
    GpuView busy = MakeGpu(0).Busy().Free(30000).Smact(0.9);
    GpuView quiet = MakeGpu(1).Busy().Free(30000).Smact(0.2);
    busy.stats.order_statistics = false;
    quiet.stats.order_statistics = false;
    busy.stats.smact.risk = 0;  // as computed without order statistics
    quiet.stats.smact.risk = 0;
    Scheduler s(cfg);
    s.enqueue(1, MakeTask("t").Profiled(1000), 0);
    StepResult r = s.step(std::vector<GpuView>{busy, quiet}, 0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});  // the lower mean
}

// This test verifies the rule the risk filter falls back to as real metrics go missing: the
// paper's rule over the terms that are real, SMACT alone when SMOCC and DRAMA are unknown, NVML's
// utilisation proxies when no SM activity is real, and "blind" (no second task on a GPU in use)
// when nothing is readable. Proxy values never count as real SM activity.
TEST(PolicyTest, RiskRuleFollowsTheRealMetrics) {
    using M = MetricSource;
    const RiskThresholds t;
    // DRAMA unknown: SMOCC alone is the second condition.
    GpuView no_drama = MakeGpu(0).Smact(0.9).Smocc(0.5).Sources(M::Dcgm, M::Dcgm, M::Unavailable);
    EXPECT_EQ(risk_rule(no_drama.stats), RiskRule::Paper);
    EXPECT_TRUE(is_high_risk(no_drama.stats, t, true));
    EXPECT_NE(describe_rule(no_drama.stats, t).find("DRAMA unknown"), std::string::npos);

    GpuView smact_only =
        MakeGpu(0).Smact(0.85).Sources(M::NvmlGpm, M::Unavailable, M::Unavailable);
    EXPECT_EQ(risk_rule(smact_only.stats), RiskRule::SmactOnly);
    EXPECT_TRUE(is_high_risk(smact_only.stats, t, true));
    smact_only.stats.smact.risk = 0.5;
    EXPECT_FALSE(is_high_risk(smact_only.stats, t, true));

    // NVML proxies: utilisation 1.0 with the memory controller below its threshold passes.
    GpuView proxy = MakeGpu(0).Smact(1.0).Drama(0.3).Sources(M::Nvml, M::Unavailable, M::Nvml);
    EXPECT_EQ(risk_rule(proxy.stats), RiskRule::Proxy);
    EXPECT_FALSE(is_high_risk(proxy.stats, t, true));
    proxy.stats.drama.risk = 0.6;
    EXPECT_TRUE(is_high_risk(proxy.stats, t, true));
    EXPECT_NE(describe_risk(proxy.stats, t).find("[proxy]"), std::string::npos);

    GpuView blind =
        MakeGpu(0).Sources(M::Unavailable, M::Unavailable, M::Unavailable);
    blind.stats.util = SeriesStats{};
    EXPECT_EQ(risk_rule(blind.stats), RiskRule::Blind);
    EXPECT_TRUE(is_high_risk(blind.stats, t, true));
    EXPECT_FALSE(is_high_risk(blind.stats, t, false));
    EXPECT_NE(describe_rule(blind.stats, t).find("blind"), std::string::npos);

    // Emulated metrics are real: the full paper rule.
    GpuView full = MakeGpu(0).Smact(0.9).Smocc(0.1).Drama(0.1);
    EXPECT_EQ(risk_rule(full.stats), RiskRule::Paper);
    EXPECT_NE(describe_rule(full.stats, t).find("SMOCC >= 0.45 or DRAMA >= 0.40"),
              std::string::npos);
}

// This test verifies that a GPU that is not schedulable (unhealthy, window filling) is never
// chosen, by the collocation path or the exclusive path, and the reason names why.
TEST(PolicyTest, UnschedulableGpuIsNeverChosen) {
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Unschedulable("unhealthy: reads fail"),
                                 MakeGpu(1).Busy()};
    TaskSpec t = MakeTask().Profiled(1000);
    EXPECT_EQ(select_gpus(*find_policy("oracle-FF"), t, gpus, {}, 0).gpus, std::vector<int>{1});
    gpus[1].schedulable = false;
    Selection none = select_gpus(*find_policy("oracle-FF"), t, gpus, {}, 0);
    EXPECT_TRUE(none.gpus.empty());
    EXPECT_NE(none.pending_reason.find("GPU 0: unhealthy: reads fail"), std::string::npos)
        << none.pending_reason;

    SchedulerConfig config;
    config.policy = *find_policy("oracle-FF");
    Scheduler s(config);
    s.enqueue(1, MakeTask().Profiled(1000));
    std::vector<GpuView> idle = {MakeGpu(0).Unschedulable("unhealthy"), MakeGpu(1)};
    StepResult r = s.step(idle, 0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].gpus, std::vector<int>{1});
    EXPECT_TRUE(r.placed[0].exclusive);
}

// This test verifies round robin: the cursor moves across decisions, skips locked GPUs, ignores
// memory when nothing is known, and makes at most one pass.
TEST(PolicyTest, RoundRobinCursor) {
    PolicySpec rr = *find_policy("OR-RR");
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(600), MakeGpu(1).Busy(), MakeGpu(2).Busy()};
    TaskSpec t = MakeTask().Profiled(30000);
    Selection a = select_gpus(rr, t, gpus, {}, 0);
    EXPECT_EQ(a.gpus, std::vector<int>{0});  // memory is not screened: 600 MiB free is fine
    EXPECT_EQ(a.rr_cursor, 1u);
    Selection b = select_gpus(rr, t, gpus, {}, a.rr_cursor);
    EXPECT_EQ(b.gpus, std::vector<int>{1});
    gpus[2].locked = true;
    Selection c = select_gpus(rr, t, gpus, {}, b.rr_cursor);  // 2 locked -> wraps to 0
    EXPECT_EQ(c.gpus, std::vector<int>{0});
    EXPECT_EQ(c.rr_cursor, 1u);
    for (GpuView& g : gpus) {
        g.locked = true;
    }
    Selection d = select_gpus(rr, t, gpus, {}, 0);
    EXPECT_TRUE(d.gpus.empty());
    EXPECT_NE(d.pending_reason.find("warming up"), std::string::npos);
    // oracle-RR does screen memory.
    gpus = {MakeGpu(0).Busy().Free(600), MakeGpu(1).Busy()};
    EXPECT_EQ(select_gpus(*find_policy("oracle-RR"), t, gpus, {}, 0).gpus, std::vector<int>{1});
}

// This test verifies that ties keep GPU index order (stable sorts).
TEST(PolicyTest, TiesKeepIndexOrder) {
    std::vector<GpuView> gpus = {MakeGpu(0).Busy().Free(20000), MakeGpu(1).Busy().Free(20000),
                                 MakeGpu(2).Busy().Free(20000)};
    TaskSpec t = MakeTask().Gpus(2).Profiled(1000);
    for (const char* name : {"oracle-FF", "oracle-BF", "oracle-MAGM", "oracle-LUG"}) {
        EXPECT_EQ(select_gpus(*find_policy(name), t, gpus, {}, 0).gpus, (std::vector<int>{0, 1}))
            << name;
    }
}

}  // namespace
}  // namespace carma
