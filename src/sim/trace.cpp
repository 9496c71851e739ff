#include "sim/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "core/host.h"
#include "core/csv.h"
#include "core/gpu_share.h"
#include "data/embedded.h"
#include "model/constants.h"

namespace carma::sim {

namespace {

// Bounds that keep a trace's numbers meaningful and their conversions defined: a double beyond
// int's range cast to int is undefined behaviour, and times near 1e308 turn into infinities once
// the simulator adds durations to them.
constexpr double kMaxTraceGpus = 1024;              // as the API (daemon/task_json.cpp)
constexpr double kMaxSubmitOffsetS = 1e9;           // about 31 years
constexpr double kMaxStandaloneMinutes = 1e6;       // about two years
constexpr double kMaxMemoryGb = static_cast<double>(kMaxMemoryMib) / 1000.0;  // 16 TiB

}  // namespace

Result<Trace> parse_trace(std::string_view csv_text, std::string_view name) {
    auto table = parse_csv(csv_text, name);
    if (!table) {
        return tl::unexpected(table.error());
    }
    const int c_submit = table->column("submit_offset_s");
    const int c_task = table->column("task_name");
    if (c_submit < 0 || c_task < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("trace {}: needs columns submit_offset_s and task_name (header "
                                "was: {})",
                                name, fmt::join(table->header, ",")));
    }
    const int c_gpus = table->column("gpus");
    const int c_minutes = table->column("standalone_minutes");
    const int c_mem = table->column("memory_gb");
    const int c_class = table->column("class");
    const int c_model = table->column("model");
    const int c_batch = table->column("batch_size");
    const int c_epochs = table->column("epochs");
    const int c_user = table->column("user");
    const int c_exclusive = table->column("exclusive");
    const int c_max_slowdown = table->column("max_slowdown");
    const int c_nice = table->column("nice");
    const int c_requeue = table->column("requeue");
    const int c_checkpoint = table->column("checkpoint_s");
    const int c_cpus = table->column("cpus");
    const int c_host_mem = table->column("host_memory_gb");
    const int c_gpu_share = table->column("gpu_share");
    Trace trace;
    trace.name = std::string(name);
    for (std::size_t r = 0; r < table->rows.size(); ++r) {
        const auto& row = table->rows[r];
        TraceEntry e;
        auto submit = csv_number(*table, r, c_submit, name);
        if (!submit) {
            return tl::unexpected(submit.error());
        }
        if (*submit < 0 || *submit > kMaxSubmitOffsetS) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("trace {} line {}: submit_offset_s must be >= 0 and at most "
                                    "{:.0f} (about 31 years)",
                                    name, table->line_numbers[r], kMaxSubmitOffsetS));
        }
        e.submit_s = *submit;
        e.task_name = row[static_cast<std::size_t>(c_task)];
        if (e.task_name.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("trace {} line {}: task_name is empty", name,
                                    table->line_numbers[r]));
        }
        auto optional = [&](int col) -> Result<std::optional<double>> {
            if (col < 0 || row[static_cast<std::size_t>(col)].empty()) {
                return std::optional<double>();
            }
            auto v = csv_number(*table, r, col, name);
            if (!v) {
                return tl::unexpected(v.error());
            }
            return std::optional<double>(*v);
        };
        auto gpus = optional(c_gpus);
        auto minutes = optional(c_minutes);
        auto mem = optional(c_mem);
        auto max_slowdown = optional(c_max_slowdown);
        auto nice = optional(c_nice);
        auto checkpoint = optional(c_checkpoint);
        auto cpus = optional(c_cpus);
        auto host_mem = optional(c_host_mem);
        for (const auto* v :
             {&gpus, &minutes, &mem, &max_slowdown, &nice, &checkpoint, &cpus, &host_mem}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        if (*gpus) {
            // 0 is a CPU-only task, as `carma submit -g 0`: it needs cores and host memory only.
            if (**gpus < 0 || **gpus > kMaxTraceGpus || **gpus != std::floor(**gpus)) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: gpus must be a whole number from 0 "
                                        "(CPU only) to {:.0f}",
                                        name, table->line_numbers[r], kMaxTraceGpus));
            }
            e.gpus = static_cast<int>(**gpus);
        }
        if (*minutes) {
            if (**minutes <= 0 || **minutes > kMaxStandaloneMinutes) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: standalone_minutes must be > 0 and at "
                                        "most {:.0f} (about two years)",
                                        name, table->line_numbers[r], kMaxStandaloneMinutes));
            }
            e.standalone_s = **minutes * 60.0;
        }
        if (*cpus) {
            if (**cpus < 0 || **cpus > kMaxCpusPerTask || **cpus != std::floor(**cpus)) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: cpus must be a whole number of cores "
                                        "from 0 to {}",
                                        name, table->line_numbers[r], kMaxCpusPerTask));
            }
            e.cpus = static_cast<int>(**cpus);
        }
        if (*host_mem) {
            if (**host_mem < 0 || **host_mem > kMaxMemoryGb) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: host_memory_gb must be from 0 to "
                                        "{:.3f}",
                                        name, table->line_numbers[r], kMaxMemoryGb));
            }
            e.host_mem_mib = static_cast<MiB>(std::llround(**host_mem * 1000.0));
        }
        if (*mem) {
            // A negative need would read as "fits anywhere"; beyond 16 TiB llround has no answer.
            if (**mem < 0 || **mem > kMaxMemoryGb) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: memory_gb must be from 0 to {:.3f} "
                                        "(16 TiB per GPU)",
                                        name, table->line_numbers[r], kMaxMemoryGb));
            }
            e.memory_mib = static_cast<MiB>(std::llround(**mem * 1000.0));  // paper GB = MiB/1000
        }
        if (c_class >= 0) {
            e.task_class = row[static_cast<std::size_t>(c_class)];
        }
        if (c_user >= 0) {
            e.user = row[static_cast<std::size_t>(c_user)];
        }
        for (auto [col, column, field] : {std::tuple{c_exclusive, "exclusive", &e.exclusive},
                                          std::tuple{c_requeue, "requeue", &e.requeue}}) {
            if (col < 0) {
                continue;
            }
            const std::string& v = row[static_cast<std::size_t>(col)];
            if (v == "1" || v == "true" || v == "yes") {
                *field = true;
            } else if (!v.empty() && v != "0" && v != "false" && v != "no") {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: {} must be 1/true/yes or 0/false/no "
                                        "(or empty), not '{}'",
                                        name, table->line_numbers[r], column, v));
            }
        }
        if (*checkpoint) {
            if (!(**checkpoint > 0) || **checkpoint > kMaxStandaloneMinutes * 60.0) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: checkpoint_s must be a number of "
                                        "seconds above 0 (or empty: the task starts over)",
                                        name, table->line_numbers[r]));
            }
            e.checkpoint_s = **checkpoint;
        }
        if (c_gpu_share >= 0 && !row[static_cast<std::size_t>(c_gpu_share)].empty()) {
            auto milli = parse_gpu_share(row[static_cast<std::size_t>(c_gpu_share)]);
            if (!milli) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: {}", name, table->line_numbers[r],
                                        milli.error().message));
            }
            if (e.gpus.value_or(1) != 1 || e.exclusive) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: gpu_share is a share of one GPU; "
                                        "give it with gpus 1 (or empty) and without exclusive",
                                        name, table->line_numbers[r]));
            }
            e.gpu_milli = *milli;
        }
        if (*max_slowdown) {
            if (!(**max_slowdown >= 1) || **max_slowdown > 1e6) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: max_slowdown must be at least 1 (a "
                                        "run time over the solo one)",
                                        name, table->line_numbers[r]));
            }
            e.max_slowdown = **max_slowdown;
        }
        if (*nice) {
            if (**nice != std::floor(**nice) || std::abs(**nice) > 1e6) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("trace {} line {}: nice must be a whole number within "
                                        "+-1000000",
                                        name, table->line_numbers[r]));
            }
            e.nice = static_cast<int>(**nice);
        }
        for (auto [col, field] : {std::pair{c_model, &e.model}, std::pair{c_batch, &e.batch_size},
                                  std::pair{c_epochs, &e.epochs}}) {
            if (col >= 0) {
                *field = row[static_cast<std::size_t>(col)];
            }
        }
        trace.entries.push_back(std::move(e));
    }
    std::stable_sort(trace.entries.begin(), trace.entries.end(),
                     [](const TraceEntry& a, const TraceEntry& b) { return a.submit_s < b.submit_s; });
    return trace;
}

std::vector<std::string> builtin_trace_names() {
    return {"t1", "t2", "mix-90", "heavy-60", "demo"};
}

Result<Trace> builtin_trace(std::string_view name) {
    for (const std::string& known : builtin_trace_names()) {
        if (known == name) {
            auto text = data::embedded(name);
            if (!text) {
                return fail(ErrorCode::Internal,
                            fmt::format("trace {} was not embedded at build time", name));
            }
            return parse_trace(*text, name);
        }
    }
    return fail(ErrorCode::NotFound,
                fmt::format("no built-in trace '{}'; built-in traces: {} (or give a CSV file)",
                            name, fmt::join(builtin_trace_names(), ", ")));
}

Result<Trace> load_trace(const std::string& spec) {
    for (const std::string& name : builtin_trace_names()) {
        if (spec == name) {
            return builtin_trace(spec);
        }
    }
    std::ifstream in(spec);
    if (!in) {
        return fail(ErrorCode::NotFound,
                    fmt::format("trace '{}' is neither a built-in trace ({}) nor a readable file",
                                spec, fmt::join(builtin_trace_names(), ", ")));
    }
    std::stringstream buf;
    buf << in.rdbuf();
    return parse_trace(buf.str(), spec);
}

Trace generate_trace(const model::Catalog& catalog, std::size_t count, double mean_gap_s,
                     std::uint64_t seed) {
    return generate_trace(catalog, GeneratorConfig{count, mean_gap_s, 0, seed});
}

Trace generate_trace(const model::Catalog& catalog, const GeneratorConfig& config) {
    std::mt19937_64 rng(config.seed);
    // Its own stream: a share of 0 leaves the trace exactly as before.
    std::mt19937_64 widen_rng(config.seed ^ 0x9e3779b97f4a7c15ULL);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::exponential_distribution<double> gap(1.0 / std::max(config.mean_gap_s, 1e-9));
    const auto& profiles = catalog.profiles();
    std::uniform_int_distribution<std::size_t> pick(0, profiles.empty() ? 0 : profiles.size() - 1);
    // Users and the flood have their own streams too: without them the trace is as before.
    std::mt19937_64 user_rng(config.seed ^ 0x5bd1e995c3a5c85cULL);
    std::vector<double> zipf;
    for (std::size_t k = 1; k <= config.users; ++k) {
        zipf.push_back(1.0 / static_cast<double>(k));
    }
    std::discrete_distribution<std::size_t> user_of(zipf.begin(), zipf.end());
    Trace trace;
    trace.name = fmt::format("generated-{}", config.count);
    if (!profiles.empty()) {
        std::mt19937_64 flood_rng(config.seed ^ 0x27d4eb2f165667c5ULL);
        for (std::size_t i = 0; i < config.flood_count; ++i) {
            const model::WorkloadProfile& p = profiles[pick(flood_rng)];
            TraceEntry e;
            e.task_name = p.name;
            e.model = p.model;
            e.user = config.flood_user;
            trace.entries.push_back(std::move(e));
        }
    }
    double t = 0;
    for (std::size_t i = 0; i < config.count && !profiles.empty(); ++i) {
        TraceEntry e;
        e.submit_s = std::floor(t);
        const model::WorkloadProfile& p = profiles[pick(rng)];
        e.task_name = p.name;
        e.model = p.model;
        if (config.multi_gpu_share > 0 && p.gpus == 1 &&
            unit(widen_rng) < config.multi_gpu_share) {
            e.gpus = unit(widen_rng) < 0.5 ? 2 : 4;
        }
        if (config.users > 0) {
            e.user = fmt::format("u{}", user_of(user_rng) + 1);
        }
        trace.entries.push_back(std::move(e));
        t += gap(rng);
    }
    return trace;
}

Result<GeneratorConfig> parse_generator(std::string_view spec, std::uint64_t seed) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("trace '{}': {}; write gen:N[,gap=S][,multi=F][,users=K]"
                                "[,flood=U:M], e.g. gen:3000,gap=8,multi=0.1,users=4 (N tasks, "
                                "mean gap S seconds, share F of 2- and 4-GPU tasks, K users with "
                                "Zipf odds, user U submitting M more at time 0)",
                                spec, why));
    };
    if (!spec.starts_with("gen:")) {
        return bad("a generated trace starts with gen:");
    }
    GeneratorConfig config;
    config.seed = seed;
    std::vector<std::string_view> parts;
    std::string_view rest = spec.substr(4);
    while (true) {
        const std::size_t comma = rest.find(',');
        parts.push_back(rest.substr(0, comma));
        if (comma == std::string_view::npos) {
            break;
        }
        rest = rest.substr(comma + 1);
    }
    auto number = [](std::string_view text, double& out) {
        const std::string s(text);
        char* end = nullptr;
        out = std::strtod(s.c_str(), &end);
        return !s.empty() && end == s.c_str() + s.size() && std::isfinite(out);
    };
    double n = 0;
    if (!number(parts[0], n) || n < 1 || n > 1e7 || n != std::floor(n)) {
        return bad(fmt::format("the number of tasks '{}' must be a whole number 1..10000000",
                               parts[0]));
    }
    config.count = static_cast<std::size_t>(n);
    for (std::size_t k = 1; k < parts.size(); ++k) {
        const std::string_view part = parts[k];
        double value = 0;
        if (part.starts_with("gap=") && number(part.substr(4), value) && value > 0 &&
            value <= kMaxSubmitOffsetS) {
            config.mean_gap_s = value;
        } else if (part.starts_with("multi=") && number(part.substr(6), value) && value >= 0 &&
                   value <= 1) {
            config.multi_gpu_share = value;
        } else if (part.starts_with("users=") && number(part.substr(6), value) && value >= 1 &&
                   value <= 10000 && value == std::floor(value)) {
            config.users = static_cast<std::size_t>(value);
        } else if (const std::size_t colon = part.find(':');
                   part.starts_with("flood=") && colon != std::string_view::npos && colon > 6 &&
                   number(part.substr(colon + 1), value) && value >= 1 && value <= 1e7 &&
                   value == std::floor(value)) {
            config.flood_user = std::string(part.substr(6, colon - 6));
            config.flood_count = static_cast<std::size_t>(value);
        } else {
            return bad(fmt::format("'{}' is not gap=S (S > 0), multi=F (F in 0..1), users=K (K "
                                   "in 1..10000) or flood=U:M (user U, M tasks at time 0)",
                                   part));
        }
    }
    return config;
}

model::WorkloadProfile resolve_profile(const TraceEntry& entry, const model::Catalog& catalog) {
    model::WorkloadProfile p;
    if (const model::WorkloadProfile* known = catalog.find(entry.task_name)) {
        // The catalog's measured MiB beats the trace's rounded GB.
        p = *known;
    } else {
        p = model::profile_from_class(entry.task_name, entry.task_class, entry.gpus.value_or(1),
                                      entry.standalone_s.value_or(600.0),
                                      entry.memory_mib.value_or(0));
    }
    if (entry.gpus) {
        p.gpus = *entry.gpus;
    }
    if (entry.standalone_s) {
        p.t_solo_s = *entry.standalone_s;
        p.t_start_s = std::min(p.t_start_s, 0.5 * p.t_solo_s);
    }
    return p;
}

}  // namespace carma::sim
