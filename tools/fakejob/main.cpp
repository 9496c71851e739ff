// carma-fakejob: an emulated training task on emulated GPUs (or, with --cuda, on real ones).
//
//   carma-fakejob --profile NAME [--time-scale K] [--duration-s S] [--memory MIB]
//                 [--emulator FILE | --cuda] [--foreign | --invisible]
//
// Lives like a PyTorch training run as the device model describes it (interference-model.md
// §10): CPU-side start-up with nothing on the GPU, then GPU-active with the CUDA context, memory
// ramping linearly to the peak, progress at the speed the model gives it among its co-runners,
// exit 0 when the work is done. An allocation that would pass a GPU's capacity prints PyTorch's
// out-of-memory error and exits 1. Time runs K times faster than the wall clock.
// With --cuda the same life runs on the real GPUs of CUDA_VISIBLE_DEVICES (cuda_job.h).
// With --invisible its memory counts on the emulated GPUs but no process of it is listed there:
// what a task in a PID namespace of its own (a container) looks like to CARMA.
//
// Exit codes: 0 done, 1 out of memory (or the emulator became unusable), 2 bad usage or setup,
// 128+signal when stopped by SIGTERM/SIGINT.

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/units.h"
#include "device/emulated.h"
#include "device/emulated_job.h"
#include "model/catalog.h"
#include "cuda_job.h"
#include "job_common.h"
#include "torch_oom.h"

namespace {

using carma::MiB;
using carma::fakejob::now_s;
using carma::fakejob::ramp_memory;
using carma::fakejob::report_progress;

constexpr int kExitOk = 0;
constexpr int kExitOom = 1;
constexpr int kExitUsage = 2;
constexpr double kTickS = 0.1;  // wall seconds between progress updates
constexpr const char* kTimeScaleEnv = "CARMA_TIME_SCALE";

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
    g_stop_signal = sig;
}

// No SA_RESTART: a signal cuts the current sleep short so the job stops at once.
void install_signal_handlers() {
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() {
    return g_stop_signal != 0;
}

// Sleeps up to `seconds` of wall time; false if a stop signal arrived. In chunks of at most a
// tick: a signal landing between the check and nanosleep() is then noticed within a tick.
bool sleep_for(double seconds) {
    const double until = now_s() + seconds;
    for (double left = seconds; left > 0 && !stop_requested(); left = until - now_s()) {
        left = std::min(left, kTickS);
        timespec ts = {};
        ts.tv_sec = static_cast<time_t>(left);
        ts.tv_nsec = static_cast<long>((left - static_cast<double>(ts.tv_sec)) * 1e9);
        nanosleep(&ts, nullptr);
    }
    return !stop_requested();
}

struct Options {
    std::string profile;
    std::optional<double> time_scale;
    std::optional<double> duration_s;
    std::optional<std::string> memory;
    std::optional<std::string> emulator;
    std::optional<std::string> task_class;
    bool cuda = false;  // real GPUs through the CUDA driver (cuda_job.h), not the emulator
    bool foreign = false;  // a process CARMA did not start: holds its memory until stopped
    bool invisible = false;  // left out of the emulated GPUs' process lists
};

// Everything the run needs, resolved from flags, environment and the catalog.
struct Plan {
    carma::model::WorkloadProfile profile;
    double time_scale = 1;
    std::string emulator;
    std::string visible_devices;
    bool foreign = false;
    bool duration_given = false;
};

int usage_error(const std::string& message) {
    fmt::print(stderr, "carma-fakejob: {}\n", message);
    return kExitUsage;
}

std::string some_profile_names(const carma::model::Catalog& catalog) {
    std::string names;
    const auto& all = catalog.profiles();
    for (std::size_t i = 0; i < all.size() && i < 6; ++i) {
        names += (i == 0 ? "" : ", ") + all[i].name;
    }
    return fmt::format("{}{} ({} in data/workloads.csv)", names, all.size() > 6 ? ", ..." : "",
                       all.size());
}

std::optional<double> positive_number(const char* text) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v) || v <= 0) {
        return std::nullopt;
    }
    return v;
}

// The catalog's profile; for a task it does not know (trace replay), the class defaults the
// simulator uses, provided the run time and memory are given.
std::optional<carma::model::WorkloadProfile> find_profile(const Options& o) {
    const auto& catalog = carma::model::Catalog::embedded();
    if (const carma::model::WorkloadProfile* known = catalog.find(o.profile)) {
        return *known;
    }
    if (!o.duration_s || !o.memory) {
        usage_error(
            fmt::format("unknown profile '{}'; known profiles include {}; for another "
                        "task give --duration-s and --memory (and --class)",
                        o.profile, some_profile_names(catalog)));
        return std::nullopt;
    }
    const std::string task_class = o.task_class.value_or("medium");
    if (task_class != "light" && task_class != "medium" && task_class != "heavy") {
        usage_error(fmt::format("--class {}: use light, medium or heavy", task_class));
        return std::nullopt;
    }
    // The memory is taken from --memory by the caller, as for catalog profiles.
    return carma::model::profile_from_class(o.profile, task_class, 1, *o.duration_s, 0);
}

// --duration-s and --memory over the profile's t_solo and m_peak; false (printed) if invalid.
bool apply_overrides(const Options& o, carma::model::WorkloadProfile& p) {
    if (o.duration_s) {
        if (!std::isfinite(*o.duration_s) || *o.duration_s <= 0) {
            usage_error(fmt::format("--duration-s {}: must be a positive number of seconds",
                                    *o.duration_s));
            return false;
        }
        p.t_solo_s = *o.duration_s;
    }
    // Start-up never takes more than half the run (as for profiles without a measured value).
    p.t_start_s = std::min(p.t_start_s, 0.5 * p.t_solo_s);
    if (o.memory) {
        auto mib = carma::parse_memory(*o.memory);
        if (!mib || *mib < 0) {
            usage_error(fmt::format("--memory {}: {}", *o.memory,
                                    mib ? "cannot be negative" : mib.error().message));
            return false;
        }
        p.m_peak_mib = *mib;
    }
    return true;
}

// The flag, else $CARMA_TIME_SCALE, else 1; nothing (printed) if not a positive number.
std::optional<double> time_scale(const Options& o) {
    if (o.time_scale) {
        if (!std::isfinite(*o.time_scale) || *o.time_scale <= 0) {
            usage_error(fmt::format("--time-scale {}: must be a positive number (1 = real time)",
                                    *o.time_scale));
            return std::nullopt;
        }
        return *o.time_scale;
    }
    const char* env = std::getenv(kTimeScaleEnv);
    if (env == nullptr || *env == '\0') {
        return 1.0;
    }
    const auto v = positive_number(env);
    if (!v) {
        usage_error(
            fmt::format("{}='{}' must be a positive number (1 = real time)", kTimeScaleEnv, env));
    }
    return v;
}

// Where to run: the emulator file and the visible GPUs; false (printed) if either is missing.
bool find_gpus(const Options& o, Plan& plan) {
    const char* file_env = std::getenv(carma::device::kEmulatorFileEnv);
    plan.emulator = o.emulator ? *o.emulator : (file_env != nullptr ? file_env : "");
    if (plan.emulator.empty()) {
        usage_error(
            fmt::format("no emulator file: pass --emulator FILE or set {} (`carma serve` "
                        "with emulated GPUs sets it for its tasks)",
                        carma::device::kEmulatorFileEnv));
        return false;
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible == nullptr || *visible == '\0') {
        usage_error(
            "CUDA_VISIBLE_DEVICES is not set: name the emulated GPUs to run on, by index "
            "(0,1) or UUID (`carma serve` sets it for its tasks)");
        return false;
    }
    plan.visible_devices = visible;
    return true;
}

// Resolves the plan; on failure prints why and returns nothing.
std::optional<Plan> make_plan(const Options& o) {
    Plan plan;
    auto profile = find_profile(o);
    if (!profile || !apply_overrides(o, *profile)) {
        return std::nullopt;
    }
    plan.profile = std::move(*profile);
    const auto scale = time_scale(o);
    if (!scale || (!o.cuda && !find_gpus(o, plan))) {
        return std::nullopt;
    }
    plan.time_scale = *scale;
    plan.foreign = o.foreign;
    plan.duration_given = o.duration_s.has_value();
    return plan;
}

int fail_run(const carma::Error& e) {
    fmt::print(stderr, "carma-fakejob: {}\n", e.message);
    return kExitOom;
}

int stopped_exit_code() {
    return 128 + static_cast<int>(g_stop_signal);
}

// The GPU-active phase: memory ramp and progress until the work is done. Returns the exit code.
int run_active(const Plan& plan, carma::device::JobHandle& job) {
    const double k = plan.time_scale;
    const double work_s = std::max(0.0, plan.profile.t_solo_s - plan.profile.t_start_s);
    if (auto ok = job.set_active(true); !ok) {
        return fail_run(ok.error());
    }
    const double active_at = now_s();
    double last = active_at;
    double last_report = active_at;
    double done_s = 0;
    double speed = 0;
    for (;;) {
        const double now = now_s();
        done_s += speed * (now - last) * k;  // the speed that held since the last tick
        last = now;
        const MiB want = ramp_memory(plan.profile, (now - active_at) * k);
        if (want != job.memory_mib()) {
            auto a = job.set_memory(want);
            if (!a) {
                return fail_run(a.error());
            }
            if (!a->ok) {
                carma::fakejob::print_torch_oom(*a);
                return kExitOom;
            }
        }
        auto s = job.current_speed();
        if (!s) {
            return fail_run(s.error());
        }
        speed = *s;
        const double fraction = work_s > 0 ? std::min(1.0, done_s / work_s) : 1.0;
        if (auto ok = job.set_progress(fraction); !ok) {
            return fail_run(ok.error());
        }
        if (report_progress(fraction, speed, now, last_report)) {
            return kExitOk;
        }
        // Short enough not to overshoot the end by much at high time scales.
        const double left_wall = (work_s - done_s) / std::max(speed * k, 1e-9);
        if (!sleep_for(std::clamp(left_wall, 0.001, kTickS))) {
            return stopped_exit_code();
        }
    }
}

// --foreign: someone else's process on the GPUs, not a task. It takes its peak memory at once,
// is as busy as its profile, and holds both until stopped (or for --duration-s), so tests can
// show that CARMA counts it as taken and never plans into it.
int run_foreign(const Plan& plan, carma::device::JobHandle& job) {
    if (auto ok = job.set_active(true); !ok) {
        return fail_run(ok.error());
    }
    auto a = job.set_memory(plan.profile.m_peak_mib);
    if (!a) {
        return fail_run(a.error());
    }
    if (!a->ok) {
        carma::fakejob::print_torch_oom(*a);
        return kExitOom;
    }
    fmt::print("carma-fakejob: foreign process {} on emulated GPU(s) {} holding {} (no task)\n",
               ::getpid(), plan.visible_devices, carma::format_mib(plan.profile.m_peak_mib));
    std::fflush(stdout);
    const double wall_s = plan.duration_given ? plan.profile.t_solo_s / plan.time_scale : 1e12;
    const bool done = sleep_for(wall_s);
    job.detach();
    return done ? kExitOk : stopped_exit_code();
}

int run(const Plan& plan, bool invisible) {
    carma::device::JobProfile activity{plan.profile.util, plan.profile.smact, plan.profile.smocc,
                                       plan.profile.drama};
    auto job = carma::device::JobHandle::attach(plan.emulator, plan.visible_devices, activity);
    if (!job) {
        return usage_error(job.error().message);
    }
    if (plan.foreign) {
        return run_foreign(plan, *job);
    }
    if (invisible) {
        if (auto ok = job->set_hidden(true); !ok) {
            return fail_run(ok.error());
        }
    }
    fmt::print(
        "carma-fakejob: {} on emulated GPU(s) {}: t_solo {:.1f} s, start-up {:.1f} s, "
        "peak {}, time scale {}\n",
        plan.profile.name, plan.visible_devices, plan.profile.t_solo_s, plan.profile.t_start_s,
        carma::format_mib(plan.profile.m_peak_mib), plan.time_scale);
    std::fflush(stdout);
    // CPU-side start-up: data loading, model construction; nothing on the GPU yet.
    int code = sleep_for(plan.profile.t_start_s / plan.time_scale) ? run_active(plan, *job)
                                                                   : stopped_exit_code();
    job->detach();  // the CUDA context goes away with the process: so does its memory
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    install_signal_handlers();
    Options o;
    CLI::App app{"carma-fakejob: an emulated training task on emulated GPUs"};
    app.add_option("--profile", o.profile, "workload profile (data/workloads.csv task_name)")
        ->required();
    app.add_option("--time-scale", o.time_scale,
                   "model seconds per wall second (default: $CARMA_TIME_SCALE or 1)");
    app.add_option("--duration-s", o.duration_s, "standalone run time, overrides the profile");
    app.add_option("--memory", o.memory, "peak memory per GPU (MiB, or 12GiB), overrides it");
    auto* emulator = app.add_option("--emulator", o.emulator,
                                    "emulator file (default: $CARMA_EMULATOR_FILE)");
    app.add_flag("--cuda", o.cuda,
                 "run on the real GPUs of CUDA_VISIBLE_DEVICES through libcuda.so.1 "
                 "($CARMA_CUDA_LIBRARY overrides it)")
        ->excludes(emulator);
    app.add_flag("--foreign", o.foreign,
                 "be a process CARMA did not start: take --memory (or the profile's peak) at "
                 "once and hold it until stopped, or for --duration-s")
        ->excludes("--cuda");
    app.add_flag("--invisible", o.invisible,
                 "hold memory on the emulated GPUs without being listed among their processes "
                 "(as a task in another PID namespace looks to CARMA)");
    app.add_option("--class", o.task_class,
                   "light, medium or heavy: activity of a task not in the catalog (default "
                   "medium)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? kExitOk : kExitUsage;
    }
    const auto plan = make_plan(o);
    if (!plan) {
        return kExitUsage;
    }
    if (o.cuda) {
        return carma::fakejob::run_cuda_job(plan->profile, plan->time_scale,
                                            {sleep_for, stopped_exit_code});
    }
    return run(*plan, o.invisible);
}
