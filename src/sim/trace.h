#pragma once
// Traces: when each task is submitted and what it is. The CSV format is the one of data/traces/:
//   submit_offset_s,task_name,model,batch_size,gpus,standalone_minutes,memory_gb,epochs,class
// Only submit_offset_s and task_name are required; the other columns describe tasks the workload
// catalog does not know. Optional columns for fair share (issue 23): `user` (who submitted it;
// empty: the one anonymous user), `exclusive` (1/true/yes: `--exclusive`), `max_slowdown`
// (`--max-slowdown X`, X >= 1; empty: none) and `nice` (an integer, `--nice N`). For fair-share
// preemption (core/preemption.h): `requeue` (1/true/yes: `--requeue`, the task may be stopped and
// queued again) and `checkpoint_s` (it saves its progress this often, in seconds of solo work; a
// stopped attempt loses what it did since; empty: it starts over).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"
#include "model/catalog.h"

namespace carma::sim {

struct TraceEntry {
    double submit_s = 0;
    std::string task_name;
    std::optional<int> gpus;
    std::optional<double> standalone_s;
    std::optional<MiB> memory_mib;
    std::string task_class;
    // With the task name these stand for the command line (the fingerprint history keys on);
    // the model alone stands for the program and script (the looser family). Empty if absent.
    std::string model;
    std::string batch_size;
    std::string epochs;
    // Fair share and what the task asks of its co-runners (TaskSpec's fields of the same names).
    std::string user = {};
    bool exclusive = false;
    std::optional<double> max_slowdown = {};
    int nice = 0;
    bool requeue = false;
    std::optional<double> checkpoint_s = {};
    // Host resources (core/host.h): the columns `cpus` and `host_memory_gb` (GB = 1,000 MiB, as
    // memory_gb); 0 where absent: the task asks for none.
    int cpus = 0;
    MiB host_mem_mib = 0;
    // The column `gpu_share` (core/gpu_share.h), in thousandths: a share of one GPU; 0: whole GPUs.
    int gpu_milli = 0;
};

struct Trace {
    std::string name;
    std::vector<TraceEntry> entries;  // sorted by submit time (stable)
};

Result<Trace> parse_trace(std::string_view csv_text, std::string_view name);

// The traces shipped in data/traces/: the paper's t1, t2, mix-90, heavy-60, and `demo`, the
// short trace `carma demo` replays.
std::vector<std::string> builtin_trace_names();
Result<Trace> builtin_trace(std::string_view name);

// A built-in trace by name, else the CSV file at that path; the error lists the built-in names.
Result<Trace> load_trace(const std::string& spec);

// A synthetic trace of `count` tasks drawn uniformly from the catalog with exponential
// inter-arrival gaps of the given mean; deterministic for a seed. For benchmarks and scale tests.
Trace generate_trace(const model::Catalog& catalog, std::size_t count, double mean_gap_s,
                     std::uint64_t seed);

// The same with more GPUs per task: each 1-GPU task drawn becomes, with probability
// `multi_gpu_share`, a 2- or a 4-GPU task (even odds; same run time and memory per GPU, as data
// parallelism over a larger batch). With a share of 0 the trace is generate_trace's.
// `users` > 0: each task's user is drawn from u1..uK with Zipf odds (u_k with weight 1/k), from
// its own stream, so the tasks are those of the same trace without users. `flood_user` with
// `flood_count` > 0: that user also submits that many tasks drawn from the catalog at time 0
// (before the others, in the trace's order).
struct GeneratorConfig {
    std::size_t count = 0;
    double mean_gap_s = 120;
    double multi_gpu_share = 0;
    std::uint64_t seed = 1;
    std::size_t users = 0;
    std::string flood_user = {};
    std::size_t flood_count = 0;
};
Trace generate_trace(const model::Catalog& catalog, const GeneratorConfig& config);

// "gen:N[,gap=S][,multi=F][,users=K][,flood=U:M]" (N tasks 1..10,000,000, mean gap S > 0
// seconds, default 120, share F in 0..1, default 0, K users 1..10,000 with Zipf odds, user U
// submitting M more tasks at time 0), as `carma simulate --trace` takes it; `seed` seeds the draw.
Result<GeneratorConfig> parse_generator(std::string_view spec, std::uint64_t seed);

// The workload profile the simulator runs for an entry: the catalog's, with the entry's duration,
// GPU count and memory where the trace gives them; a class default when the catalog has none.
model::WorkloadProfile resolve_profile(const TraceEntry& entry, const model::Catalog& catalog);

}  // namespace carma::sim
