// The discrete-event simulator at scale (issue: a generated 100,000-task trace over 64 GPUs in
// under 10 s on one core), with baselines measured in the same run.
//
//   BM_Simulate/gen100k_gap40_64gpu_<policy>  sim::generate_trace(Catalog::embedded(), 100000,
//                      40 s mean gap, seed 1) on 64xA100-40GB; one iteration per repetition,
//                      3 repetitions (fixed here, whatever --benchmark_repetitions says);
//   BM_Simulate/gen1k_gap40_64gpu_<policy>    baseline: the 1,000-task trace of the same kind
//                      (same gap, GPUs and seed); 100k/1k = 100 for a cost linear in tasks;
//   BM_Simulate/gen100k_gap34_..., gen1k_gap34_...  the same at a 34 s gap (saturated);
//   BM_Simulate/t1_4gpu_<policy>              reference: what scripts/run simulates per policy
//                      (trace t1, 60 tasks, 4xA100-40GB).
// Policies: exclusive and oracle-MAGM, configured as `carma simulate` does (MPS sharing, no
// noise, explanations off, no timelines). Trace generation is outside the timed region.
//
// Load: the embedded catalog's 51 profiles, drawn uniformly, average 32.3 min of solo run time
// and 2,155 GPU-seconds per task (48 use 1 GPU, 3 use 2). With a mean gap of 40 s the offered
// load on 64 GPUs is 2155 / (40 x 64) = 0.84 of exclusive capacity: busy, with queues, but
// stable. At 34 s it is 0.99: exclusive queues most of the time. Counters say what came of it:
//   tasks_completed, oom_crashes, rejected, attempts  (from PolicyResult)
//   makespan_h         first dispatch -> last completion, simulated hours
//   busy_frac          sum over completed tasks of gpus x t_solo / (GPUs x makespan): the
//                      exclusive-equivalent utilisation (collocation can push it above the load)
//   mean_wait_s        mean queueing time of completed tasks, seconds
//   sim_x_realtime     simulated seconds per wall-clock second
//   tasks_per_s        trace tasks simulated per wall-clock second
//   events_per_s_lb    a lower bound of simulator events per wall-clock second: tasks (arrivals)
//                      + 3 x attempts (activation, ramp end, completion or crash); the simulator
//                      does not expose its true count (stale completions, OOM checks, ticks)
//
// Scale over nodes (issue 11): BM_Scale/<nodes>x4_<policy> replays, on NODESx4xA100-40GB, a
// generated trace of 400 x NODES tasks with a mean gap of 520 / NODES s and a tenth of the 1-GPU
// tasks widened to 2 or 4 GPUs (gen:N,gap=S,multi=0.1, seed 1): the same offered load per GPU
// (about 1.2 of exclusive capacity: queues, GPUs kept busy) on 1 node (the single-server
// baseline) and on 16; BM_Scale/64_<policy> runs the 16-node trace on 64 GPUs of one server
// (the single server scaled, no node constraint). Counters, beside the ones above:
//   wall_per_task_us   wall time / tasks: the simulator's cost per task, scheduler steps
//                      included (16 nodes: 16x the tasks on 16x the GPUs, each step 16x wider)
//   gpu_busy_frac      time with at least one attempt on a GPU / (GPUs x makespan): occupancy
//   colloc_frac        time with two or more attempts on a GPU / time with at least one
//   mean_jct_h         mean completion time (submit -> finish) of completed tasks

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "core/policy.h"
#include "model/catalog.h"
#include "model/gpu_type.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace {

using namespace carma;

constexpr std::uint64_t kSeed = 1;

template <typename T>
T or_throw(Result<T> r) {
    if (!r) {
        throw std::runtime_error(r.error().message);
    }
    return std::move(*r);
}

// Traces are built once per process, outside any timed region. "gen<count>@<gap>" is a generated
// trace; anything else names a built-in trace.
const sim::Trace& trace_for(const std::string& id) {
    static std::map<std::string, sim::Trace> cache;
    auto it = cache.find(id);
    if (it == cache.end()) {
        sim::Trace t;
        if (id.starts_with("gen")) {
            const std::size_t at = id.find('@');
            const auto count = static_cast<std::size_t>(std::stoul(id.substr(3, at - 3)));
            const double gap = std::stod(id.substr(at + 1));
            t = sim::generate_trace(model::Catalog::embedded(), count, gap, kSeed);
        } else {
            t = or_throw(sim::builtin_trace(id));
        }
        it = cache.emplace(id, std::move(t)).first;
    }
    return it->second;
}

void BM_Simulate(benchmark::State& state, const char* trace_id, const char* gpus,
                 const char* policy) {
    const sim::Trace& trace = trace_for(trace_id);
    const model::Catalog& catalog = model::Catalog::embedded();
    sim::SimConfig config;
    config.gpus = or_throw(model::parse_gpu_set(gpus));
    config.scheduler.policy = or_throw(find_policy(policy));
    config.scheduler.placement.explain = false;  // as `carma simulate`

    sim::PolicyResult last;
    double wall_s = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        sim::PolicyResult r = sim::simulate(trace, catalog, config);
        const auto t1 = std::chrono::steady_clock::now();
        wall_s += std::chrono::duration<double>(t1 - t0).count();
        benchmark::DoNotOptimize(r);
        last = std::move(r);
    }
    const auto iterations = static_cast<double>(state.iterations());
    const double per_run_s = wall_s / iterations;

    double solo_gpu_s = 0;
    double wait_s = 0;
    for (std::size_t i = 0; i < last.tasks.size(); ++i) {
        const sim::TaskRecord& rec = last.tasks[i];
        if (rec.finish_s < 0) {
            continue;
        }
        const model::WorkloadProfile p = sim::resolve_profile(trace.entries[i], catalog);
        solo_gpu_s += p.gpus * p.t_solo_s;
        wait_s += rec.wait_s;
    }
    const auto tasks = static_cast<double>(trace.entries.size());
    state.counters["tasks_completed"] = last.tasks_completed;
    state.counters["oom_crashes"] = last.oom_crashes;
    state.counters["rejected"] = last.tasks_rejected;
    state.counters["attempts"] = last.attempts;
    state.counters["makespan_h"] = last.makespan_s / 3600.0;
    state.counters["busy_frac"] =
        last.makespan_s > 0 ? solo_gpu_s / (config.gpus.count * last.makespan_s) : 0.0;
    state.counters["mean_wait_s"] = last.tasks_completed > 0 ? wait_s / last.tasks_completed : 0.0;
    state.counters["sim_x_realtime"] = last.makespan_s / per_run_s;
    state.counters["tasks_per_s"] = tasks / per_run_s;
    state.counters["events_per_s_lb"] = (tasks + 3.0 * last.attempts) / per_run_s;
}

// Time-weighted occupancy of the GPUs from every attempt's span: (busy, shared) GPU-seconds.
std::pair<double, double> occupancy(const sim::PolicyResult& r, int gpus) {
    std::vector<std::vector<std::pair<double, int>>> edges(static_cast<std::size_t>(gpus));
    for (const sim::TaskRecord& t : r.tasks) {
        for (const sim::AttemptSpan& span : t.spans) {
            const double end = span.end_s < 0 ? r.makespan_s : span.end_s;
            for (int g : span.gpus) {
                edges[static_cast<std::size_t>(g)].push_back({span.start_s, +1});
                edges[static_cast<std::size_t>(g)].push_back({end, -1});
            }
        }
    }
    double busy = 0, shared = 0;
    for (auto& e : edges) {
        std::sort(e.begin(), e.end());
        int level = 0;
        for (std::size_t k = 0; k + 1 < e.size(); ++k) {
            level += e[k].second;
            const double dt = e[k + 1].first - e[k].first;
            busy += level >= 1 ? dt : 0;
            shared += level >= 2 ? dt : 0;
        }
    }
    return {busy, shared};
}

// `one_server`: the same GPUs as one server ("64xA100-40GB"): no node constraint.
void BM_Scale(benchmark::State& state, int nodes, const char* policy, bool one_server = false) {
    const model::Catalog& catalog = model::Catalog::embedded();
    sim::GeneratorConfig gen;
    gen.count = 400 * static_cast<std::size_t>(nodes);
    gen.mean_gap_s = 520.0 / nodes;
    gen.multi_gpu_share = 0.1;
    gen.seed = kSeed;
    const sim::Trace trace = sim::generate_trace(catalog, gen);
    sim::SimConfig config;
    config.gpus = or_throw(model::parse_gpu_set(
        one_server ? fmt::format("{}xA100-40GB", 4 * nodes) : fmt::format("{}x4xA100-40GB", nodes)));
    config.scheduler.policy = or_throw(find_policy(policy));
    config.scheduler.placement.explain = false;

    sim::PolicyResult last;
    double wall_s = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        sim::PolicyResult r = sim::simulate(trace, catalog, config);
        const auto t1 = std::chrono::steady_clock::now();
        wall_s += std::chrono::duration<double>(t1 - t0).count();
        benchmark::DoNotOptimize(r);
        last = std::move(r);
    }
    const double per_run_s = wall_s / static_cast<double>(state.iterations());
    const auto [busy, shared] = occupancy(last, config.gpus.count);
    double jct = 0;
    for (const sim::TaskRecord& t : last.tasks) {
        jct += t.finish_s >= 0 ? t.finish_s - t.submit_s : 0;
    }
    state.counters["tasks_completed"] = last.tasks_completed;
    state.counters["rejected"] = last.tasks_rejected;
    state.counters["oom_crashes"] = last.oom_crashes;
    state.counters["makespan_h"] = last.makespan_s / 3600.0;
    state.counters["wall_per_task_us"] = 1e6 * per_run_s / static_cast<double>(gen.count);
    state.counters["gpu_busy_frac"] =
        last.makespan_s > 0 ? busy / (config.gpus.count * last.makespan_s) : 0.0;
    state.counters["colloc_frac"] = busy > 0 ? shared / busy : 0.0;
    state.counters["mean_jct_h"] =
        last.tasks_completed > 0 ? jct / last.tasks_completed / 3600.0 : 0.0;
}

// The 100k runs take seconds each: one iteration per repetition, three repetitions.
void big(benchmark::internal::Benchmark* b) {
    b->Iterations(1)->Repetitions(3)->UseRealTime()->Unit(benchmark::kSecond);
}
// Baselines: Google Benchmark picks the iterations; repetitions from the command line.
void small(benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// The case: 100,000 tasks, mean gap 40 s (load 0.84), and its 1,000-task baseline.
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap40_64gpu_exclusive, "gen100000@40", "64xA100-40GB",
                  "exclusive")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap40_64gpu_oracle_MAGM, "gen100000@40", "64xA100-40GB",
                  "oracle-MAGM")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap40_64gpu_exclusive, "gen1000@40", "64xA100-40GB",
                  "exclusive")
    ->Apply(small);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap40_64gpu_oracle_MAGM, "gen1000@40", "64xA100-40GB",
                  "oracle-MAGM")
    ->Apply(small);
// Saturated: mean gap 34 s (load 0.99), where exclusive keeps a queue most of the time and the
// simulator runs the scheduler nearly every simulated second.
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap34_64gpu_exclusive, "gen100000@34", "64xA100-40GB",
                  "exclusive")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap34_64gpu_oracle_MAGM, "gen100000@34", "64xA100-40GB",
                  "oracle-MAGM")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap34_64gpu_exclusive, "gen1000@34", "64xA100-40GB",
                  "exclusive")
    ->Apply(small);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap34_64gpu_oracle_MAGM, "gen1000@34", "64xA100-40GB",
                  "oracle-MAGM")
    ->Apply(small);
// carma (issue 8: under 10 s at 100,000 tasks), from an empty history ("cold", as `carma
// simulate` by default): it learns as tasks finish, re-derives waiting tasks' knowledge, plans
// reservations and backfills.
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap40_64gpu_carma, "gen100000@40", "64xA100-40GB", "carma")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap40_64gpu_carma, "gen1000@40", "64xA100-40GB", "carma")
    ->Apply(small);
BENCHMARK_CAPTURE(BM_Simulate, gen100k_gap34_64gpu_carma, "gen100000@34", "64xA100-40GB", "carma")
    ->Apply(big);
BENCHMARK_CAPTURE(BM_Simulate, gen1k_gap34_64gpu_carma, "gen1000@34", "64xA100-40GB", "carma")
    ->Apply(small);
// Scale over nodes: 1 node of 4 GPUs (baseline) against 16 nodes, same load per GPU.
void scale(benchmark::internal::Benchmark* b) {
    b->Iterations(1)->Repetitions(5)->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_Scale, 1x4_exclusive, 1, "exclusive")->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 16x4_exclusive, 16, "exclusive")->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 1x4_oracle_MAGM, 1, "oracle-MAGM")->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 16x4_oracle_MAGM, 16, "oracle-MAGM")->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 1x4_carma, 1, "carma")->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 16x4_carma, 16, "carma")->Apply(scale);
// The single server scaled: the 16-node trace on 64 GPUs of one server (no node constraint).
BENCHMARK_CAPTURE(BM_Scale, 64_exclusive, 16, "exclusive", true)->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 64_oracle_MAGM, 16, "oracle-MAGM", true)->Apply(scale);
BENCHMARK_CAPTURE(BM_Scale, 64_carma, 16, "carma", true)->Apply(scale);
// Reference: what scripts/run simulates per policy (trace t1, 60 tasks, 4 GPUs).
BENCHMARK_CAPTURE(BM_Simulate, t1_4gpu_exclusive, "t1", "4xA100-40GB", "exclusive")->Apply(small);
BENCHMARK_CAPTURE(BM_Simulate, t1_4gpu_oracle_MAGM, "t1", "4xA100-40GB", "oracle-MAGM")
    ->Apply(small);
BENCHMARK_CAPTURE(BM_Simulate, t1_4gpu_carma, "t1", "4xA100-40GB", "carma")->Apply(small);

}  // namespace
