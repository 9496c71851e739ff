// carma simulate: replays a trace through every requested policy on the simulator and compares.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common/die.h"
#include "core/policy.h"
#include "core/time_text.h"
#include "model/catalog.h"
#include "model/gpu_type.h"
#include "model/world.h"
#include "cli/commands/simulate_pack.h"
#include "cli/commands/task_flags.h"
#include "core/host.h"
#include "sim/output.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace carma::cli {

namespace {

// The warm history's default seed is this far from --seed, so that seeds 1..5 of a table never
// learn from one another's graded draws either.
constexpr std::uint64_t kHistorySeedOffset = 1000;

struct SimulateOptions {
    std::string trace = "t1";
    std::string policies = "all";
    std::string gpus = "4xA100-40GB";
    std::string sharing = "mps";
    std::string estimator = "horus";
    std::uint64_t seed = 1;
    std::optional<std::uint64_t> history_seed;
    double noise = 0;
    bool json = false;
    std::string report_dir;
    std::string tasks_file;
    std::string history = "cold";
    bool memory_limits = false;
    bool quiet = false;
    std::string world = "model";
    double world_bias = 0;
    double world_noise = 0;
    std::string world_compose = "model";
    bool no_speed_correction = false;
    std::string fair_share = "on";
    std::string fairshare_horizon = "1h";
    std::string fairshare_half_life = "7d";
    std::string preempt = "off";
    std::string preempt_min_run = "10m";
    double preempt_margin = PreemptionConfig{}.margin;
    int preempt_max_stops = PreemptionConfig{}.max_stops_per_user;
    std::string preempt_stops_window = "1h";
    int host_cpus = 0;
    std::string host_mem;
    std::string cluster;
    std::string protocol;
    double inflate = 1.3;
};

sim::Trace load_trace(const std::string& spec, std::uint64_t seed) {
    if (spec.starts_with("gen:")) {
        return sim::generate_trace(model::Catalog::embedded(),
                                   or_die(sim::parse_generator(spec, seed)));
    }
    return or_die(sim::load_trace(spec));
}

std::vector<PolicySpec> parse_policies(const std::string& list) {
    std::vector<std::string> names;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item == "all" || item == "paper") {
            for (const std::string& n : paper_policy_names()) {
                names.push_back(n);
            }
        } else if (!item.empty()) {
            names.push_back(item);
        }
    }
    if (names.empty()) {
        die("--policy needs at least one policy name, or 'all'");
    }
    std::vector<PolicySpec> out;
    for (const std::string& n : names) {
        out.push_back(or_die(find_policy(n)));
    }
    return out;
}

int run_simulate(const SimulateOptions& o) {
    if (!o.cluster.empty()) {
        return run_pack_simulation(PackSimulateOptions{o.cluster, o.trace, o.policies,
                                                       o.protocol.empty() ? "fgd" : o.protocol,
                                                       o.inflate, o.seed, o.json});
    }
    if (!o.protocol.empty()) {
        die("--protocol belongs to cluster packing; add --cluster NODES.csv (an openb node list)");
    }
    const sim::Trace trace = load_trace(o.trace, o.seed);
    const std::vector<PolicySpec> policies = parse_policies(o.policies);
    sim::SimConfig base;
    base.gpus = or_die(model::parse_gpu_set(o.gpus));
    base.sharing = or_die(model::parse_sharing_mode(o.sharing));
    base.seed = o.seed;
    base.metric_noise_sd = o.noise;
    base.record_timelines = !o.report_dir.empty();
    base.scheduler.placement.memory.estimator = or_die(parse_estimator(o.estimator));
    base.scheduler.placement.explain = false;
    base.memory_limits = o.memory_limits;
    base.world = or_die(model::checked(
        model::WorldConfig{or_die(model::parse_world_kind(o.world)), o.world_bias, o.world_noise,
                           o.seed, or_die(model::parse_world_compose(o.world_compose))}));
    base.speed_correction = !o.no_speed_correction;
    if (o.host_cpus < 0 || o.host_cpus > kMaxCpusPerTask) {
        die(fmt::format("--host-cpus {} must be a number of cores from 1 to {} (0: unlimited)",
                        o.host_cpus, kMaxCpusPerTask));
    }
    base.host_cpus = o.host_cpus;
    if (!o.host_mem.empty()) {
        base.host_mem_mib = or_die(parse_mem_flag(o.host_mem, "--host-mem"));
    }
    base.scheduler.carma.fair_share = o.fair_share == "on";
    base.fairshare_horizon_s = or_die(parse_duration(o.fairshare_horizon));
    if (base.fairshare_horizon_s < 0) {
        die(fmt::format("--fair-share-horizon '{}' is negative; give a span such as 1h, or 0s "
                        "for usage alone",
                        o.fairshare_horizon));
    }
    base.fairshare_half_life_s = or_die(parse_duration(o.fairshare_half_life));
    if (base.fairshare_half_life_s <= 0) {
        die(fmt::format("--fair-share-half-life '{}' is not positive; give a span such as 7d "
                        "(the daemon's fairshare_half_life)",
                        o.fairshare_half_life));
    }
    base.preemption.enabled = o.preempt == "on";
    base.preemption.min_run_s = or_die(parse_duration(o.preempt_min_run));
    base.preemption.margin = o.preempt_margin;
    if (!(o.preempt_margin >= 0) || o.preempt_margin > 1e6) {
        die(fmt::format("--preempt-margin {} must be 0 or more (GPUs' worth per share)",
                        o.preempt_margin));
    }
    base.preemption.max_stops_per_user = o.preempt_max_stops;
    base.preemption.stops_window_s = or_die(parse_duration(o.preempt_stops_window));
    if (o.preempt_max_stops < 1 || !(base.preemption.stops_window_s > 0)) {
        die(fmt::format("--preempt-max-stops {} and --preempt-stops-window '{}' must be at least "
                        "1 stop within a span above 0 (the daemon's preempt_max_stops, "
                        "preempt_stops_window)",
                        o.preempt_max_stops, o.preempt_stops_window));
    }
    if (base.preemption.min_run_s < 0) {
        die(fmt::format("--preempt-min-run '{}' is negative; give a span such as 10m",
                        o.preempt_min_run));
    }
    // Another draw than the graded run's by default: with the same one, the history would hold
    // exactly the memory peaks the graded run is about to meet.
    const std::uint64_t history_seed = o.history_seed.value_or(o.seed + kHistorySeedOffset);
    if (o.history == "warm") {
        base.history = std::make_shared<const sim::SimHistory>(
            sim::earlier_run_history(trace, model::Catalog::embedded(), base, history_seed));
    } else if (o.history != "cold") {
        die(fmt::format("--history '{}': use cold or warm", o.history));
    } else if (o.history_seed) {
        die("--history-seed is the warm history's seed; add --history warm, or leave it out");
    }

    const bool show_progress = !o.quiet && isatty(STDERR_FILENO) != 0;
    sim::Comparison comparison;
    comparison.trace = trace.name;
    comparison.gpus = base.gpus.text();
    comparison.sharing = std::string(model::to_string(base.sharing));
    comparison.history = o.history;
    comparison.world = model::describe(base.world);
    comparison.world_compose = std::string(model::to_string(base.world.compose));
    comparison.seed = o.seed;
    if (o.history == "warm") {
        comparison.history_seed = history_seed;
    }
    comparison.host_cpus = base.host_cpus;
    comparison.host_mem_mib = base.host_mem_mib;
    for (std::size_t k = 0; k < policies.size(); ++k) {
        sim::SimConfig config = base;
        config.scheduler.policy = policies[k];
        if (show_progress) {
            config.progress = [&, k](double done) {
                fmt::print(stderr, "\r[{}/{}] {:<14} {:5.1f}% of {} tasks done", k + 1,
                           policies.size(), policies[k].name, 100.0 * done, trace.entries.size());
                std::fflush(stderr);
            };
        }
        comparison.results.push_back(sim::simulate(trace, model::Catalog::embedded(), config));
    }
    if (show_progress) {
        fmt::print(stderr, "\r{:<60}\r", "");
    }
    if (o.json) {
        fmt::print("{}\n", sim::to_json(comparison).dump(2));
    } else {
        fmt::print("{}", sim::format_table(comparison));
    }
    if (!o.tasks_file.empty()) {
        std::ofstream out(o.tasks_file);
        out << sim::render_tasks_csv(comparison);
        if (!out.flush()) {
            die(fmt::format("--tasks {}: cannot write the file; check the folder exists and is "
                            "writable",
                            o.tasks_file));
        }
    }
    if (!o.report_dir.empty()) {
        std::string path = or_die(sim::write_html_report(comparison, o.report_dir));
        fmt::print(stderr, "report written to {}\n", path);
    }
    return 0;
}

}  // namespace

Action add_simulate_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    CLI::App* cmd = app.add_subcommand(
        "simulate", "Replay a trace on simulated GPUs under each policy and compare them");
    cmd->add_option("--trace", opts->trace,
                    "t1, t2, mix-90, heavy-60 (built in), a CSV file, or gen:N[,gap=S][,multi=F] "
                    "(N random tasks, mean gap S s (120), share F of 2-/4-GPU tasks (0))")
        ->capture_default_str();
    cmd->add_option("--policy", opts->policies,
                    "Comma-separated policies (carma, exclusive, oracle-MAGM, OR-RR, EST-LUG, ...); "
                    "all = the paper's ten")
        ->capture_default_str();
    cmd->add_option("--history", opts->history,
                    "What carma knows at the start: cold (nothing; it learns as tasks finish) or "
                    "warm (the history of one earlier run of the trace)")
        ->capture_default_str();
    cmd->add_option("--history-seed", opts->history_seed,
                    "Seed of the earlier run behind --history warm: its memory peaks and metric "
                    "noise are drawn anew in the same world (default: --seed + 1000)");
    cmd->add_flag("--memory-limits", opts->memory_limits,
                  "Per-task memory limits protect co-runners (MPS limits): carma may then place "
                  "tasks of unknown memory need beside others");
    cmd->add_option("--tasks", opts->tasks_file,
                    "Write one CSV line per task and policy (wait, start, end, GPUs, attempts, "
                    "slowdown) to FILE");
    cmd->add_option("--gpus", opts->gpus,
                    "GPUs as COUNTxTYPE (one server, e.g. 4xA100-40GB) or NODESxGPUSxTYPE "
                    "(e.g. 16x4xA100-40GB: a task's GPUs are all on one node)")
        ->capture_default_str();
    cmd->add_option("--host-cpus", opts->host_cpus,
                    "Cores each node has for tasks; a trace's `cpus` column is packed against "
                    "them (0: unlimited)");
    cmd->add_option("--host-mem", opts->host_mem,
                    "Host memory each node has for tasks, e.g. 512GiB; a trace's "
                    "`host_memory_gb` column is packed against it (default: unlimited)");
    cmd->add_option("--sharing", opts->sharing, "How collocated tasks share a GPU: mps|timeslice")
        ->capture_default_str();
    cmd->add_option("--estimator", opts->estimator,
                    "Memory estimator of the EST policies: horus|faketensor|gpumemnet")
        ->capture_default_str();
    cmd->add_option("--seed", opts->seed, "Seed for metric noise and generated traces")
        ->capture_default_str();
    cmd->add_option("--noise", opts->noise,
                    "Standard deviation of noise on sampled SMACT/SMOCC/DRAMA (0 = none)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    cmd->add_option("--world", opts->world,
                    "What collocated tasks really do: model (the device model the carma policy "
                    "predicts with) or measured (measured pair speeds, the model with the measured "
                    "spread where a pair is unknown)")
        ->capture_default_str();
    cmd->add_option("--world-compose", opts->world_compose,
                    "How the world slows what no measured pair covers (three or more co-runners, "
                    "unmeasured pairs): model (the predictor's formula), pairwise (products of "
                    "measured pair speeds or draws from their measured spread) or bottleneck (the "
                    "most contended of SM activity, occupancy and DRAM bandwidth sets the pace)")
        ->capture_default_str();
    cmd->add_option("--world-bias", opts->world_bias,
                    "Every collocation slower than the world says by the factor 1+F on its "
                    "slowdown (speed / (1+F)); 0 = none")
        ->check(CLI::Range(0.0, 10.0))
        ->capture_default_str();
    cmd->add_option("--world-noise", opts->world_noise,
                    "Relative sd of each attempt's memory peak around its profile (0 = none); may "
                    "crash tasks planned from the profile")
        ->check(CLI::Range(0.0, 0.5))
        ->capture_default_str();
    cmd->add_flag("--no-speed-correction", opts->no_speed_correction,
                  "carma plans with the raw device model instead of correcting it by the error "
                  "it observed");
    cmd->add_option("--fair-share", opts->fair_share,
                    "carma orders users by their fair-share factor (on) or not (off); the "
                    "paper's policies keep arrival order")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    cmd->add_option("--fair-share-horizon", opts->fairshare_horizon,
                    "The fair-share factor counts what each user's running tasks will be "
                    "charged over this span ahead (0s: usage alone, Slurm's classic)")
        ->capture_default_str();
    cmd->add_option("--fair-share-half-life", opts->fairshare_half_life,
                    "Charged usage loses half its weight over this span (the daemon's "
                    "fairshare_half_life)")
        ->capture_default_str();
    cmd->add_option("--preempt", opts->preempt,
                    "carma with fair share stops an over-served user's task that opted in "
                    "(the trace's requeue column) for an under-served user's waiting one, and "
                    "queues it again (on) or never (off)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    cmd->add_option("--preempt-min-run", opts->preempt_min_run,
                    "An attempt runs at least this long before it may be preempted")
        ->capture_default_str();
    cmd->add_option("--preempt-margin", opts->preempt_margin,
                    "A preemption must leave the waiting user at least this much (GPUs' worth "
                    "per share) below the stopped task's user")
        ->capture_default_str();
    cmd->add_option("--preempt-max-stops", opts->preempt_max_stops,
                    "At most this many stops for one user's waiting tasks within "
                    "--preempt-stops-window (the daemon's preempt_max_stops)")
        ->capture_default_str();
    cmd->add_option("--preempt-stops-window", opts->preempt_stops_window,
                    "The span --preempt-max-stops counts over (the daemon's "
                    "preempt_stops_window)")
        ->capture_default_str();
    cmd->add_option("--cluster", opts->cluster,
                    "Pack a pod list onto this cluster instead (an openb node list CSV: sn,"
                    "cpu_milli,memory_mib,gpu,model); --trace is then an openb pod list and "
                    "--policy takes random, dotprod, clustering, packing, bestfit, fgd");
    cmd->add_option("--protocol", opts->protocol,
                    "With --cluster: fgd (pods arrive in shuffled order, inflated to --inflate "
                    "x the GPUs, and never leave; the KPI is the GPU allocation ratio) or timed "
                    "(pods replayed on their own times, against a whole GPU per pod)");
    cmd->add_option("--inflate", opts->inflate,
                    "With --cluster: draw more pods until the GPU request reaches this multiple "
                    "of the GPU capacity")
        ->capture_default_str();
    cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
    cmd->add_option("--report", opts->report_dir, "Write an HTML report with plots into DIR");
    cmd->add_flag("--quiet", opts->quiet, "No progress line");
    return [opts] { return run_simulate(*opts); };
}

}  // namespace carma::cli
