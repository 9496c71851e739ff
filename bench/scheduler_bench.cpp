// Scheduler::step with 8 GPUs and a long main queue (issue: p99 under 50 us at 10,000 tasks).
//
// Two situations, each with the queue held at a constant length:
//   BM_StepWaiting  every GPU is busy and refuses the head (GPUs 0-3: not enough available memory
//                   for the head; GPUs 4-7: enough memory but high collocation risk), so each
//                   step is a full decision (feasibility, exclusive path, collocation filters on
//                   all 8 GPUs, MAGM ordering) that places nothing;
//   BM_StepPlacing  every GPU is busy but has room and low risk, so the collocation path succeeds:
//                   the step places heads (oracle-MAGM, one GPU each, or two for a 2-GPU task)
//                   until the warm-up locks it just set cover every GPU, then the next head waits
//                   ("warming up"). Outside the timed region the placed tasks are reported exited
//                   (their warm-up locks go) and enqueued again at the back, so every step sees
//                   the same queue length and the same free GPUs.
// Arguments: queue = tasks queued (10,000; 10 is the baseline for the ratio), explain = whether
// the scheduler spells out the reasons (1: the daemon, which shows them to people; 0: the
// simulator's setting).
//
// BM_CarmaWaiting / BM_CarmaPlacing: the same two situations under `carma` (learned knowledge,
// shortest-first order, backfilling). Every task carries learned figures (need = its peak, a run
// time, an activity) and every GPU lists its residents with expected ends, so each step also
// plans the head's reservation and, when the head waits, examines up to 256 tasks behind it for
// backfilling (the worst case: none fits, every one is examined). The slowdown predictor is a
// stand-in with the device model's cost (a pow per task), since core does not link model/.
//
// BM_Nodes (issue 11): 4 GPUs on one server (the baseline), 64 on one server, and 16 nodes of 4,
// queue 10,000, under oracle-MAGM and carma, in the
// waiting and placing situations above (task mix and GPU states as in BM_StepWaiting /
// BM_CarmaWaiting and BM_StepPlacing / BM_CarmaPlacing), explanations off (the simulator's).
// Counter us_per_gpu = p50 / GPUs: the per-GPU cost of a step, which should not grow with nodes.
//
// Timing: each step is timed on its own with std::chrono::steady_clock (manual time), from the
// call to the moment its StepResult is consumed and destroyed; re-enqueueing is not timed. The
// benchmark's time column is the mean per step; counters p50_us, p99_us and max_us are
// nearest-rank percentiles of every timed step of the repetition (Google Benchmark itself only
// gives mean/median/stddev across repetitions, not within one).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/policy.h"
#include "core/scheduler.h"
#include "model/interference.h"

namespace {

using carma::GpuView;
using carma::MiB;
using carma::TaskId;
using carma::TaskSpec;

constexpr int kGpus = 8;
constexpr MiB kGpuTotalMiB = 40441;  // A100-40GB usable memory (model::kA100_40GB_UsableMiB)

// A deterministic mix: every fourth task asks for 2 GPUs, the rest for 1; profiled peaks spread
// over 4,000..27,999 MiB (the catalog's range is 1.9..28.6 GB).
std::vector<TaskSpec> task_mix(std::size_t count) {
    std::vector<TaskSpec> specs;
    specs.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        TaskSpec s;
        s.name = "task-" + std::to_string(i);
        s.workload = "bench";
        s.gpus = i % 4 == 3 ? 2 : 1;
        s.memory.profiled_mib = 4000 + static_cast<MiB>((i * 7919) % 24000);
        // What carma plans with (the others ignore it): the peak learned from one earlier run,
        // run times from 5 min to 5 h, activity 0.2..0.95.
        s.learned.need_mib = s.memory.profiled_mib;
        s.learned.margin_mib = 2048;
        s.learned.runs = 1;
        s.learned.duration_s = 300.0 + static_cast<double>((i * 104729) % 17700);
        s.learned.activity = 0.2 + 0.75 * static_cast<double>((i * 31) % 100) / 100.0;
        specs.push_back(std::move(s));
    }
    return specs;
}

carma::SeriesStats flat(double v) {
    carma::SeriesStats s;
    s.known = carma::kDefaultWindowSamples;
    s.mean = s.median = s.p95 = s.ema = s.risk = v;
    return s;
}

GpuView busy_gpu(int index, MiB available, double smact, double smocc, double drama) {
    GpuView g;
    g.index = index;
    g.total_mib = kGpuTotalMiB;
    g.has_processes = true;
    g.stats.samples = carma::kDefaultWindowSamples;
    g.stats.sources = carma::MetricSources::all(carma::MetricSource::Emulated);
    g.stats.available_mib = available;
    g.stats.last_free_mib = available + carma::kFreeMemoryReserveMiB;
    g.stats.smact = flat(smact);
    g.stats.smocc = flat(smocc);
    g.stats.drama = flat(drama);
    g.stats.util = flat(smact);
    g.stats.power_w = flat(250);
    return g;
}

// The device model's slowdown rule, f(x) = (1 + (x/C)^n)^(1/n), speed_i = f(u_i)/f(U), with
// the MPS constants (model/constants.h), inlined: core's benchmark does not link model/.
void model_like_speeds(std::span<const double> activities, std::span<double> speeds) {
    auto f = [](double x) { return std::pow(1.0 + std::pow(x / 1.4, 5.27), 1.0 / 5.27); };
    double total = 0;
    for (double a : activities) {
        total += a;
    }
    for (std::size_t i = 0; i < activities.size(); ++i) {
        speeds[i] = f(activities[i]) / f(total);
    }
}

carma::Scheduler make_scheduler(bool explain, const char* name = "oracle-MAGM") {
    carma::SchedulerConfig config;
    config.placement.predict_speeds = model_like_speeds;
    auto policy = carma::find_policy(name);
    if (!policy) {
        throw std::runtime_error(policy.error().message);
    }
    config.policy = *policy;
    config.placement.explain = explain;
    return carma::Scheduler(config);
}

struct Latencies {
    std::vector<double> ns;

    // `prefix` names the counters: "" for wall time, "cpu_" for the thread's CPU time.
    void publish(benchmark::State& state, const std::string& prefix = "") const {
        if (ns.empty()) {
            return;
        }
        std::vector<double> sorted = ns;
        std::sort(sorted.begin(), sorted.end());
        auto rank = [&](double q) {  // nearest rank
            const auto n = static_cast<double>(sorted.size());
            const auto k = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n)));
            return sorted[std::min(k, sorted.size()) - 1] / 1000.0;
        };
        state.counters[prefix + "p50_us"] = rank(0.50);
        state.counters[prefix + "p99_us"] = rank(0.99);
        state.counters[prefix + "max_us"] = sorted.back() / 1000.0;
    }
};

void BM_StepWaiting(benchmark::State& state) {
    const auto queue_len = static_cast<std::size_t>(state.range(0));
    carma::Scheduler scheduler = make_scheduler(state.range(1) != 0);
    std::vector<TaskSpec> specs = task_mix(queue_len);
    for (std::size_t i = 0; i < queue_len; ++i) {
        scheduler.enqueue(static_cast<TaskId>(i), specs[i]);
    }
    std::vector<GpuView> gpus;
    for (int g = 0; g < kGpus; ++g) {
        gpus.push_back(g < kGpus / 2 ? busy_gpu(g, 1024, 0.50, 0.20, 0.10)     // memory
                                     : busy_gpu(g, 36000, 0.95, 0.60, 0.50));  // risk
    }
    Latencies lat;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            placed += static_cast<std::int64_t>(r.placed.size());
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        now += 1;
    }
    lat.publish(state);
    state.counters["placed_per_step"] =
        benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kAvgIterations);
    state.counters["queue"] = static_cast<double>(scheduler.main_queue().size());
    if (placed != 0 || scheduler.main_queue().size() != queue_len) {
        state.SkipWithError("the waiting scenario placed a task");
    }
}

void BM_StepPlacing(benchmark::State& state) {
    const auto queue_len = static_cast<std::size_t>(state.range(0));
    carma::Scheduler scheduler = make_scheduler(state.range(1) != 0);
    const std::vector<TaskSpec> specs = task_mix(queue_len);
    for (std::size_t i = 0; i < queue_len; ++i) {
        scheduler.enqueue(static_cast<TaskId>(i), specs[i]);
    }
    std::vector<GpuView> gpus;
    for (int g = 0; g < kGpus; ++g) {
        // Room for the largest need (27,999 + 2,048 margin) and low risk; slightly different
        // free memory so MAGM's ordering has work to do.
        gpus.push_back(busy_gpu(g, 33000 + 100 * ((g * 5) % kGpus), 0.40, 0.20, 0.10));
    }
    Latencies lat;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    std::vector<TaskId> placed_ids;
    placed_ids.reserve(kGpus);
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        placed_ids.clear();
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            for (const carma::Placement& p : r.placed) {
                placed_ids.push_back(p.task);
            }
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        // Untimed: the placed tasks exit (warm-up locks go) and queue up again at the back.
        for (TaskId id : placed_ids) {
            scheduler.task_exited(id);
            scheduler.enqueue(id, specs[static_cast<std::size_t>(id)]);
        }
        placed += static_cast<std::int64_t>(placed_ids.size());
        now += 1;
    }
    lat.publish(state);
    state.counters["placed_per_step"] =
        benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kAvgIterations);
    state.counters["queue"] = static_cast<double>(scheduler.main_queue().size());
    if (placed == 0 || scheduler.main_queue().size() != queue_len) {
        state.SkipWithError("the placing scenario did not place, or the queue length drifted");
    }
}

// `gpu` with two residents of the given learned needs (their measured use matches), ending at
// 2,000 s and 4,000 s.
GpuView with_residents(GpuView gpu, MiB first, MiB second, double activity) {
    gpu.residents.push_back(carma::ResidentView{100000 + gpu.index * 2, activity, first, 2000.0});
    gpu.residents.push_back(
        carma::ResidentView{100001 + gpu.index * 2, activity, second, 4000.0});
    return gpu;
}

void BM_CarmaWaiting(benchmark::State& state) {
    const auto queue_len = static_cast<std::size_t>(state.range(0));
    carma::Scheduler scheduler = make_scheduler(state.range(1) != 0, "carma");
    std::vector<TaskSpec> specs = task_mix(queue_len);
    for (std::size_t i = 0; i < queue_len; ++i) {
        scheduler.enqueue(static_cast<TaskId>(i), specs[i], 0.0);
    }
    // Every GPU holds 36,905 MiB in its ledger: 3,024 MiB left, too little for any task
    // (the smallest needs 4,000 + 2,048), so the head and every backfill candidate wait.
    std::vector<GpuView> gpus;
    for (int g = 0; g < kGpus; ++g) {
        gpus.push_back(with_residents(busy_gpu(g, 3024, 0.50, 0.20, 0.10), 20000, 16905, 0.5));
    }
    Latencies lat;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            placed += static_cast<std::int64_t>(r.placed.size());
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        now += 1e-3;  // stays far below the 2-h bounded wait: the order never changes
    }
    lat.publish(state);
    state.counters["placed_per_step"] =
        benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kAvgIterations);
    state.counters["queue"] = static_cast<double>(scheduler.main_queue().size());
    if (placed != 0 || scheduler.main_queue().size() != queue_len) {
        state.SkipWithError("the waiting scenario placed a task");
    }
}

void BM_CarmaPlacing(benchmark::State& state) {
    const auto queue_len = static_cast<std::size_t>(state.range(0));
    carma::Scheduler scheduler = make_scheduler(state.range(1) != 0, "carma");
    const std::vector<TaskSpec> specs = task_mix(queue_len);
    for (std::size_t i = 0; i < queue_len; ++i) {
        scheduler.enqueue(static_cast<TaskId>(i), specs[i], 0.0);
    }
    // Room for the largest need beside two light residents, as in BM_StepPlacing.
    std::vector<GpuView> gpus;
    for (int g = 0; g < kGpus; ++g) {
        gpus.push_back(with_residents(busy_gpu(g, 33000 + 100 * ((g * 5) % kGpus), 0.40, 0.20,
                                               0.10),
                                      3000, 3000, 0.2));
    }
    Latencies lat;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    std::vector<TaskId> placed_ids;
    placed_ids.reserve(kGpus);
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        placed_ids.clear();
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            for (const carma::Placement& p : r.placed) {
                placed_ids.push_back(p.task);
            }
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        for (TaskId id : placed_ids) {
            scheduler.task_exited(id);
            scheduler.enqueue(id, specs[static_cast<std::size_t>(id)], now);
        }
        placed += static_cast<std::int64_t>(placed_ids.size());
        now += 1e-3;
    }
    lat.publish(state);
    state.counters["placed_per_step"] =
        benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kAvgIterations);
    state.counters["queue"] = static_cast<double>(scheduler.main_queue().size());
    if (placed == 0 || scheduler.main_queue().size() != queue_len) {
        state.SkipWithError("the placing scenario did not place, or the queue length drifted");
    }
}

// Args: nodes (groups of 4 GPUs), carma (0: oracle-MAGM), placing (0: the waiting situation),
// named (1: each group is a node, "node-1".., so a task's GPUs must be on one; 0: all GPUs on one
// server, nodes "", the code path of before nodes existed).
void BM_Nodes(benchmark::State& state) {
    const auto nodes = static_cast<int>(state.range(0));
    const bool carma = state.range(1) != 0;
    const bool placing = state.range(2) != 0;
    const bool named = state.range(3) != 0;
    const int count = 4 * nodes;
    constexpr std::size_t kQueue = 10'000;
    carma::Scheduler scheduler = make_scheduler(false, carma ? "carma" : "oracle-MAGM");
    const std::vector<TaskSpec> specs = task_mix(kQueue);
    for (std::size_t i = 0; i < kQueue; ++i) {
        scheduler.enqueue(static_cast<TaskId>(i), specs[i], 0.0);
    }
    std::vector<GpuView> gpus;
    for (int g = 0; g < count; ++g) {
        GpuView v;
        if (placing) {
            v = busy_gpu(g, 33000 + 100 * ((g * 5) % count), 0.40, 0.20, 0.10);
            v = carma ? with_residents(v, 3000, 3000, 0.2) : v;
        } else if (carma) {
            v = with_residents(busy_gpu(g, 3024, 0.50, 0.20, 0.10), 20000, 16905, 0.5);
        } else {
            v = g % 2 == 0 ? busy_gpu(g, 1024, 0.50, 0.20, 0.10)
                           : busy_gpu(g, 36000, 0.95, 0.60, 0.50);
        }
        v.node = named ? "node-" + std::to_string(g / 4 + 1) : std::string();
        gpus.push_back(std::move(v));
    }
    Latencies lat;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    std::vector<TaskId> placed_ids;
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        placed_ids.clear();
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            for (const carma::Placement& p : r.placed) {
                placed_ids.push_back(p.task);
            }
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        for (TaskId id : placed_ids) {
            scheduler.task_exited(id);
            scheduler.enqueue(id, specs[static_cast<std::size_t>(id)], now);
        }
        placed += static_cast<std::int64_t>(placed_ids.size());
        now += 1e-3;
    }
    lat.publish(state);
    state.counters["placed_per_step"] =
        benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kAvgIterations);
    std::vector<double> sorted = lat.ns;
    std::sort(sorted.begin(), sorted.end());
    state.counters["us_per_gpu"] =
        sorted.empty() ? 0.0 : sorted[sorted.size() / 2] / 1000.0 / count;
    if ((placed != 0) != placing || scheduler.main_queue().size() != kQueue) {
        state.SkipWithError("the scenario placed when it should not, or the reverse");
    }
}

// Issue 19: a daemon's round with 10,000 queued where every task behind the head reaches the
// predictor. The daemon's settings (explanations on) and the device model's own predictor
// (model::speed_predictor, MPS); 8 GPUs, each with two residents of activity 0.95 that leave
// 12,000 MiB, so a third of the tasks fit somewhere; min_gain 0.5 turns each one down after its
// prediction (sharing a saturated GPU gains about 0.14), so nothing is placed and every step is
// the same full round. `kinds`: 0 = every task has an activity of its own (the worst case:
// nothing to share), else that many activities (tasks of a few commands, the usual case).
// `kept`: 0 = predictions for one step only (as if the correction learned before every step),
// 1 = a predictor version that stays, so predictions serve the next steps (the daemon between
// two attempts that end).
void BM_CarmaDaemon(benchmark::State& state) {
    const auto queue_len = static_cast<std::size_t>(state.range(0));
    const auto kinds = static_cast<std::size_t>(state.range(1));
    const bool kept = state.range(2) != 0;
    carma::SchedulerConfig config;
    config.policy = *carma::find_policy("carma");
    config.placement.explain = true;
    config.placement.predict_speeds = carma::model::speed_predictor(carma::model::SharingMode::Mps);
    if (kept) {
        // The daemon's predictor says when its answers change (the speed correction learned);
        // between two such moments the predictions of one step serve the next.
        config.placement.predictor_version = [] { return std::uint64_t{1}; };
    }
    config.carma.min_gain = 0.5;
    carma::Scheduler scheduler(config);
    std::vector<TaskSpec> specs = task_mix(queue_len);
    for (std::size_t i = 0; i < queue_len; ++i) {
        specs[i].learned.activity =
            kinds == 0 ? 0.2 + 0.7 * static_cast<double>(i) / static_cast<double>(queue_len)
                       : 0.2 + 0.7 * static_cast<double>(i % kinds) / static_cast<double>(kinds);
        scheduler.enqueue(static_cast<TaskId>(i), specs[i], 0.0);
    }
    std::vector<GpuView> gpus;
    for (int g = 0; g < kGpus; ++g) {
        gpus.push_back(with_residents(busy_gpu(g, 12000, 0.95, 0.40, 0.30), 14000, 14448, 0.95));
    }
    Latencies lat;
    // The step's own CPU time too: on a shared machine the wall-clock p99 of a ~50 us step is
    // the operating system's time slice (another process ran in between), not the step.
    Latencies cpu;
    lat.ns.reserve(static_cast<std::size_t>(
        std::min<benchmark::IterationCount>(state.max_iterations, 50'000'000)));
    cpu.ns.reserve(lat.ns.capacity());
    auto thread_cpu_ns = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
    };
    double now = 1000;
    std::int64_t placed = 0;
    for (auto _ : state) {
        const double c0 = thread_cpu_ns();
        const auto t0 = std::chrono::steady_clock::now();
        {
            carma::StepResult r = scheduler.step(gpus, now);
            benchmark::DoNotOptimize(r);
            placed += static_cast<std::int64_t>(r.placed.size());
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double c1 = thread_cpu_ns();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        state.SetIterationTime(ns * 1e-9);
        lat.ns.push_back(ns);
        cpu.ns.push_back(c1 - c0);
        now += 1e-3;
    }
    lat.publish(state);
    cpu.publish(state, "cpu_");
    state.counters["queue"] = static_cast<double>(scheduler.main_queue().size());
    if (placed != 0 || scheduler.main_queue().size() != queue_len) {
        state.SkipWithError("the daemon scenario placed a task");
    }
}

void step_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"queue", "explain"});
    b->Args({10'000, 1});
    b->Args({10'000, 0});
    b->Args({10, 1});  // baseline: a short queue, same decision
    b->UseManualTime();
    b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_StepWaiting)->Apply(step_args);
BENCHMARK(BM_StepPlacing)->Apply(step_args);
BENCHMARK(BM_CarmaWaiting)->Apply(step_args);
BENCHMARK(BM_CarmaPlacing)->Apply(step_args);
BENCHMARK(BM_CarmaDaemon)
    ->ArgNames({"queue", "kinds", "kept"})
    ->Args({10000, 0, 0})
    ->Args({10000, 50, 0})
    ->Args({10000, 0, 1})
    ->Args({10000, 50, 1})
    ->UseManualTime();
void nodes_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"nodes", "carma", "placing", "named"});
    for (int carma : {0, 1}) {
        for (int placing : {0, 1}) {
            b->Args({1, carma, placing, 0});   // baseline: one server of 4 GPUs
            b->Args({16, carma, placing, 0});  // 64 GPUs on one server
            b->Args({16, carma, placing, 1});  // 16 nodes of 4
        }
    }
    b->UseManualTime();
    b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Nodes)->Apply(nodes_args);

}  // namespace
