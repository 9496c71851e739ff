#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "model/constants.h"

namespace carma::sim {
namespace {

SimConfig config_for(const char* policy, bool timelines = false) {
    SimConfig c;
    c.gpus = *model::parse_gpu_set("4xA100-40GB");
    c.scheduler.policy = *find_policy(policy);
    c.scheduler.placement.explain = false;
    c.record_timelines = timelines;
    return c;
}

PolicyResult run(const char* trace, const char* policy, bool timelines = false) {
    return simulate(*builtin_trace(trace), model::Catalog::embedded(), config_for(policy, timelines));
}

// Strict FIFO, one task per GPU, each job on the earliest-free GPU(s), no start-up overhead:
// the reference schedule of spec §4.3, computed independently of the simulator.
double fifo_exclusive_makespan_s(const Trace& trace, int n_gpus) {
    std::vector<double> free_at(static_cast<std::size_t>(n_gpus), 0.0);
    double first = -1, last = 0, prev_start = 0;
    for (const TraceEntry& e : trace.entries) {
        const auto p = resolve_profile(e, model::Catalog::embedded());
        std::vector<double> sorted = free_at;
        std::sort(sorted.begin(), sorted.end());
        // strict FIFO: nobody starts before the task ahead of it
        const double start = std::max({e.submit_s, sorted[static_cast<std::size_t>(p.gpus) - 1],
                                        prev_start});
        prev_start = start;
        for (int k = 0; k < p.gpus; ++k) {
            auto it = std::min_element(free_at.begin(), free_at.end());
            *it = start + p.t_solo_s;
        }
        if (first < 0) {
            first = start;
        }
        last = std::max(last, start + p.t_solo_s);
    }
    return last - first;
}

// This test verifies that under the exclusive policy the simulator reproduces the strict-FIFO
// one-task-per-GPU schedule of each paper trace within 1 %: 470.41, 580.21, 733.87 and
// 594.01 minutes.
TEST(SimulatorTest, ExclusiveMatchesFifoSchedule) {
    struct Case {
        const char* trace;
        double minutes;
    };
    const Case cases[] = {{"t1", 470.41}, {"t2", 580.21}, {"mix-90", 733.87}, {"heavy-60", 594.01}};
    for (const Case& c : cases) {
        const double reference = fifo_exclusive_makespan_s(*builtin_trace(c.trace), 4) / 60.0;
        EXPECT_NEAR(reference, c.minutes, 0.01 * c.minutes) << c.trace << " reference";
        PolicyResult r = run(c.trace, "exclusive");
        EXPECT_NEAR(r.makespan_s / 60.0, c.minutes, 0.01 * c.minutes) << c.trace;
        EXPECT_EQ(r.oom_crashes, 0) << c.trace;
    }
}

// This test verifies the simulator's invariants for every paper policy on t1: every task
// completes exactly once, attempts = tasks + crashes, energy at least idle power x makespan, and
// utilisation figures within [0, 1].
TEST(SimulatorTest, InvariantsForEveryPolicy) {
    for (const std::string& name : paper_policy_names()) {
        PolicyResult r = run("t1", name.c_str());
        EXPECT_EQ(r.tasks_completed, 60) << name;
        EXPECT_EQ(r.tasks_rejected, 0) << name;
        int finished = 0;
        for (const TaskRecord& t : r.tasks) {
            finished += t.finish_s >= 0 ? 1 : 0;
            EXPECT_EQ(t.attempts, 1 + t.oom_crashes) << name << " " << t.name;
            EXPECT_GE(t.first_start_s, t.submit_s) << name;
            EXPECT_GT(t.finish_s, t.first_start_s) << name;
        }
        EXPECT_EQ(finished, 60) << name;
        EXPECT_EQ(r.attempts, 60 + r.oom_crashes) << name;
        EXPECT_GE(r.energy_j, 4 * model::kA100IdlePowerW * r.makespan_s * (1 - 1e-9)) << name;
        for (double v : {r.mean_smact, r.mean_smocc, r.mean_memory_used_frac}) {
            EXPECT_GE(v, 0.0) << name;
            EXPECT_LE(v, 1.0) << name;
        }
    }
}

// This test verifies the paper's headline pattern: oracle policies never crash, policies without
// memory knowledge crash some tasks and recover them, and collocation shortens the makespan.
TEST(SimulatorTest, OracleNeverCrashesAndOnlyRecoveryDoes) {
    for (const char* trace : {"t1", "t2", "mix-90", "heavy-60"}) {
        const double exclusive = run(trace, "exclusive").makespan_s;
        for (const char* p : {"oracle-FF", "oracle-BF", "oracle-MAGM", "oracle-LUG"}) {
            PolicyResult r = run(trace, p);
            EXPECT_EQ(r.oom_crashes, 0) << trace << " " << p;
            EXPECT_LT(r.makespan_s, exclusive) << trace << " " << p;
        }
    }
    int crashes = 0;
    for (const char* p : {"OR-RR", "OR-MAGM", "OR-LUG"}) {
        crashes += run("mix-90", p).oom_crashes;
    }
    EXPECT_GT(crashes, 0);
}

// This test verifies from the timelines that memory never exceeds a GPU's capacity, except at
// the instant of a crash (the crashing task's ramp is cut where it crosses).
TEST(SimulatorTest, MemoryNeverAboveCapacity) {
    for (const char* p : {"OR-RR", "OR-MAGM", "oracle-BF"}) {
        PolicyResult r = run("mix-90", p, /*timelines=*/true);
        ASSERT_EQ(r.timelines.size(), 4u);
        for (const GpuTimeline& g : r.timelines) {
            for (const TimelinePoint& pt : g.points) {
                EXPECT_LE(pt.memory_used_frac, 1.0 + 1e-9) << p << " GPU " << g.gpu << " t=" << pt.t_s;
            }
        }
    }
}

// This test verifies that every attempt is recorded as a span that agrees with the task's
// counters: one span per attempt, in time order and not overlapping, each ended out of memory
// except the last, which succeeded at the task's finish, on the GPUs the task last ran on.
TEST(SimulatorTest, AttemptSpansAgreeWithCounters) {
    int oom_spans = 0;
    for (const char* p : {"OR-RR", "OR-MAGM"}) {
        PolicyResult r = run("mix-90", p);
        for (const TaskRecord& t : r.tasks) {
            ASSERT_EQ(t.spans.size(), static_cast<std::size_t>(t.attempts)) << p << " " << t.name;
            if (t.spans.empty()) {
                continue;
            }
            EXPECT_EQ(t.spans.front().start_s, t.first_start_s);
            for (std::size_t k = 0; k < t.spans.size(); ++k) {
                const AttemptSpan& s = t.spans[k];
                EXPECT_GT(s.end_s, s.start_s) << p << " " << t.name;
                EXPECT_EQ(static_cast<int>(s.gpus.size()), t.gpus) << p << " " << t.name;
                if (k + 1 < t.spans.size()) {
                    EXPECT_EQ(s.outcome, AttemptOutcome::OutOfMemory) << p << " " << t.name;
                    EXPECT_LE(s.end_s, t.spans[k + 1].start_s) << p << " " << t.name;
                    ++oom_spans;
                }
            }
            EXPECT_EQ(t.spans.back().outcome, AttemptOutcome::Succeeded) << p << " " << t.name;
            EXPECT_EQ(t.spans.back().end_s, t.finish_s);
            EXPECT_EQ(t.spans.back().gpus, t.gpu_ids);
        }
    }
    EXPECT_GT(oom_spans, 0);  // the memory-blind policies crash some tasks on mix-90
}

// This test verifies the OOM scenario end to end: two tasks of 25,000 and 20,000 MiB forced onto
// one GPU; the second-started crashes at its ramp, is recovered exclusively, and the first one
// finishes as if alone.
TEST(SimulatorTest, OomCrashIsRecovered) {
    auto trace = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,class\n"
        "0,first,1,20,25,light\n"
        "60,second,1,20,20,light\n",
        "oom.csv");
    ASSERT_TRUE(trace);
    SimConfig c = config_for("OR-RR");
    c.gpus = *model::parse_gpu_set("1xA100-40GB");
    PolicyResult r = simulate(*trace, model::Catalog::embedded(), c);
    ASSERT_EQ(r.tasks.size(), 2u);
    EXPECT_EQ(r.oom_crashes, 1);
    EXPECT_EQ(r.tasks[0].oom_crashes, 0);
    EXPECT_EQ(r.tasks[1].oom_crashes, 1);
    EXPECT_EQ(r.tasks[1].attempts, 2);
    // "first" shares the GPU only for the few seconds of "second"'s ramp (U = 0.7, a speed
    // barely below 1), so it finishes within a second of running alone: 0 + 1200 s.
    EXPECT_NEAR(r.tasks[0].finish_s, 1200.0, 1.0);
    EXPECT_GE(r.tasks[0].finish_s, 1200.0);
    // "second" restarts only once "first" is gone (recovered tasks run exclusively).
    EXPECT_GE(r.tasks[1].finish_s, 1200.0 + 1200.0);
    EXPECT_EQ(r.tasks_completed, 2);

    // Each attempt is recorded as a span: "second" crashed out of memory on GPU 0 during its
    // ramp, then ran again to completion; "first" ran once.
    ASSERT_EQ(r.tasks[0].spans.size(), 1u);
    EXPECT_EQ(r.tasks[0].spans[0].outcome, AttemptOutcome::Succeeded);
    EXPECT_EQ(r.tasks[0].spans[0].end_s, r.tasks[0].finish_s);
    const auto& spans = r.tasks[1].spans;
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].outcome, AttemptOutcome::OutOfMemory);
    EXPECT_EQ(spans[0].gpus, std::vector<int>{0});
    EXPECT_GE(spans[0].start_s, 60.0);
    EXPECT_GT(spans[0].end_s, spans[0].start_s);
    EXPECT_LT(spans[0].end_s, 1200.0);
    EXPECT_EQ(spans[1].outcome, AttemptOutcome::Succeeded);
    EXPECT_GE(spans[1].start_s, spans[0].end_s);
    EXPECT_EQ(spans[1].end_s, r.tasks[1].finish_s);
    EXPECT_EQ(spans[0].start_s, r.tasks[1].first_start_s);
    // The wait is what lies outside the spans: before the first and between the two.
    EXPECT_NEAR(r.tasks[1].wait_s,
                (spans[0].start_s - 60.0) + (spans[1].start_s - spans[0].end_s), 1e-6);
    EXPECT_EQ(r.tasks[1].left_s, -1);
}

// This test verifies that tasks that cannot fit the server are rejected, not run or lost.
TEST(SimulatorTest, InfeasibleTasksRejected) {
    auto trace = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb\n"
        "0,too-wide,8,10,1\n"
        "0,too-big,1,10,50\n"
        "0,fine,1,10,1\n",
        "bad.csv");
    ASSERT_TRUE(trace);
    PolicyResult r = simulate(*trace, model::Catalog::embedded(), config_for("oracle-MAGM"));
    EXPECT_EQ(r.tasks_rejected, 2);
    EXPECT_EQ(r.tasks_completed, 1);
    EXPECT_NE(r.tasks[0].reject_reason.find("asks for 8 GPUs"), std::string::npos);
    EXPECT_TRUE(r.tasks[0].spans.empty());
    EXPECT_EQ(r.tasks[0].left_s, 0);
}

// This test verifies that a trace's cpus and host_memory_gb columns are packed against the
// nodes' cores and memory (--host-cpus, --host-mem): on 4 idle GPUs, two tasks of 6 cores each
// do not run together on 8 cores, while without the limit they do; a task asking more than a node
// has is rejected naming the cores.
TEST(SimulatorTest, HostColumnsArePackedAgainstTheNodes) {
    auto trace = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,cpus,host_memory_gb\n"
        "0,a,1,10,1,6,8\n"
        "0,b,1,10,1,6,8\n"
        "0,wide,1,10,1,64,1\n",
        "host.csv");
    ASSERT_TRUE(trace) << trace.error().message;
    EXPECT_EQ(trace->entries[0].cpus, 6);
    EXPECT_EQ(trace->entries[0].host_mem_mib, 8000);
    SimConfig limited = config_for("exclusive");
    limited.host_cpus = 8;
    PolicyResult r = simulate(*trace, model::Catalog::embedded(), limited);
    ASSERT_EQ(r.tasks_completed, 2);
    EXPECT_EQ(r.tasks_rejected, 1);
    EXPECT_NE(r.tasks[2].reject_reason.find("asks for 64 cores"), std::string::npos)
        << r.tasks[2].reject_reason;
    // One after the other: the second starts when the first ends.
    EXPECT_GE(r.tasks[1].first_start_s, r.tasks[0].finish_s - 1e-6);
    PolicyResult free = simulate(*trace, model::Catalog::embedded(), config_for("exclusive"));
    EXPECT_EQ(free.tasks_completed, 3);
    EXPECT_LT(free.tasks[1].first_start_s, free.tasks[0].finish_s);
    // Memory too: 16 GB of host memory for two tasks of 8 GB fits, 12 does not.
    SimConfig memory = config_for("exclusive");
    memory.host_mem_mib = 12000;
    PolicyResult m = simulate(*trace, model::Catalog::embedded(), memory);
    EXPECT_GE(m.tasks[1].first_start_s, m.tasks[0].finish_s - 1e-6);
    auto bad = parse_trace("submit_offset_s,task_name,cpus\n0,x,1.5\n", "bad.csv");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("line 2: cpus must be a whole number"), std::string::npos)
        << bad.error().message;
}

// This test verifies that a CPU-only task (gpus 0) never waits for a GPU and never holds one:
// it starts at once while every GPU is taken, and runs at its solo pace.
TEST(SimulatorTest, CpuOnlyTasksNeverWaitForAGpu) {
    auto trace = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,cpus,host_memory_gb\n"
        "0,big,4,30,1,1,1\n"
        "10,prep,0,5,0,2,4\n",
        "cpu.csv");
    ASSERT_TRUE(trace) << trace.error().message;
    EXPECT_EQ(trace->entries[1].gpus, 0);
    SimConfig c = config_for("exclusive");
    c.host_cpus = 4;
    PolicyResult r = simulate(*trace, model::Catalog::embedded(), c);
    ASSERT_EQ(r.tasks_completed, 2);
    const TaskRecord& prep = r.tasks[1];
    EXPECT_TRUE(prep.gpu_ids.empty());
    EXPECT_EQ(prep.attempts, 1);
    EXPECT_NEAR(prep.first_start_s, 10, 1e-6);
    EXPECT_LT(prep.finish_s, r.tasks[0].finish_s);
    EXPECT_EQ(prep.oom_crashes, 0);
}

// This test verifies a trace's gpu_share column (issue 43): two half shares run together on the
// one GPU while a whole-GPU task waits for both to end; under MPS a share alone runs capped at
// its share of the SMs (a heavy task at 0.5 runs util/0.5 times as long as alone), while under
// time-slicing, where no MPS cap exists, it runs at its solo pace. Bad shares name the line.
TEST(SimulatorTest, GpuShareColumnPlacesSharesAndCapsThemUnderMps) {
    auto trace = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,class,gpu_share\n"
        "0,a,1,10,5,heavy,0.5\n"
        "0,b,1,10,5,heavy,50%\n"
        "0,whole,1,10,5,heavy,\n",
        "share.csv");
    ASSERT_TRUE(trace) << trace.error().message;
    EXPECT_EQ(trace->entries[1].gpu_milli, 500);
    SimConfig one = config_for("oracle-MAGM-norisk");
    one.gpus = *model::parse_gpu_set("1xA100-40GB");
    PolicyResult r = simulate(*trace, model::Catalog::embedded(), one);
    ASSERT_EQ(r.tasks_completed, 3);
    EXPECT_LT(r.tasks[1].first_start_s, r.tasks[0].finish_s);
    EXPECT_GE(r.tasks[2].first_start_s,
              std::max(r.tasks[0].finish_s, r.tasks[1].finish_s) - 1e-6);

    auto alone = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,class,gpu_share\n"
        "0,a,1,10,5,heavy,0.5\n",
        "alone.csv");
    ASSERT_TRUE(alone) << alone.error().message;
    const double util = resolve_profile(alone->entries[0], model::Catalog::embedded()).util;
    ASSERT_GT(util, 0.5);
    SimConfig mps = one;
    SimConfig timeslice = one;
    timeslice.sharing = model::SharingMode::Timeslice;
    const TaskRecord capped = simulate(*alone, model::Catalog::embedded(), mps).tasks[0];
    const TaskRecord free = simulate(*alone, model::Catalog::embedded(), timeslice).tasks[0];
    const double capped_run = capped.finish_s - capped.first_start_s;
    const double free_run = free.finish_s - free.first_start_s;
    EXPECT_NEAR(free_run, 600, 30);
    EXPECT_NEAR(capped_run / free_run, util / 0.5, 0.05) << capped_run << " vs " << free_run;

    for (const char* bad : {"0,x,2,10,5,heavy,0.5\n", "0,x,1,10,5,heavy,1.5\n"}) {
        auto t = parse_trace(
            std::string("submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,class,"
                        "gpu_share\n") + bad,
            "bad.csv");
        ASSERT_FALSE(t) << bad;
        EXPECT_NE(t.error().message.find("bad.csv line 2: "), std::string::npos)
            << t.error().message;
    }
}

// This test verifies determinism, and that metric noise (seeded) changes nothing structural.
TEST(SimulatorTest, DeterministicAndSeeded) {
    PolicyResult a = run("t2", "OR-MAGM");
    PolicyResult b = run("t2", "OR-MAGM");
    EXPECT_EQ(a.makespan_s, b.makespan_s);
    EXPECT_EQ(a.energy_j, b.energy_j);
    SimConfig c = config_for("OR-MAGM");
    c.metric_noise_sd = 0.05;
    c.seed = 3;
    PolicyResult n1 = simulate(*builtin_trace("t2"), model::Catalog::embedded(), c);
    PolicyResult n2 = simulate(*builtin_trace("t2"), model::Catalog::embedded(), c);
    EXPECT_EQ(n1.makespan_s, n2.makespan_s);
    EXPECT_EQ(n1.tasks_completed, 60);
}

// This test verifies that time-slicing (less absorbing than MPS) slows collocated tasks more.
TEST(SimulatorTest, TimesliceSlowerThanMps) {
    SimConfig mps = config_for("oracle-MAGM");
    SimConfig ts = config_for("oracle-MAGM");
    ts.sharing = model::SharingMode::Timeslice;
    const Trace t = *builtin_trace("heavy-60");
    EXPECT_LT(simulate(t, model::Catalog::embedded(), mps).mean_jct_s,
              simulate(t, model::Catalog::embedded(), ts).mean_jct_s);
}

}  // namespace
}  // namespace carma::sim
