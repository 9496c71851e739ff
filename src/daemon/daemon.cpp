#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <signal.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "core/controls.h"
#include "core/exit_classify.h"
#include "core/host_port.h"
#include "model/interference.h"
#include "core/python_env.h"
#include "daemon/task_json.h"
#include "device/backend_choice.h"
#include "exec/as_user.h"
#include "exec/proc_tree.h"
#include "exec/self.h"

namespace carma::daemon {

namespace fs = std::filesystem;

std::string shortened(const std::string& text, std::size_t max) {
    if (text.size() <= max) {
        return text;
    }
    std::size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
        --cut;
    }
    return text.substr(0, cut) + "\u2026";
}

namespace {

// Variables a task gets besides what its submitter declared. Never the daemon's environment.
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";


// After an attempt could not be started for a reason of this machine (disk full), decisions
// pause this many periods before the task is tried again.
constexpr double kLaunchRetryPeriods = 5;
// Waiting tasks whose reason is rewritten per tick, at most (one store write each).
constexpr std::size_t kWaitingReasonsPerTick = 32;

// A GPU whose samples failed or were stale this many times in a row is unhealthy; a sample
// older than this many periods counts as missing (its free memory would mislead placement).
constexpr int kUnhealthyAfterMissing = 3;
constexpr double kStaleAfterPeriods = 3;
// Real seconds between two re-derivations of what waiting tasks know (Daemon::relearn_waiting).
constexpr double kRelearnEveryS = 1;

// The state directory's lock. A daemon killed with SIGKILL may leave a child between fork and
// exec that still shares the locked file description for a moment; when the pid recorded in
// the lock file is dead, wait a little for that child instead of refusing the restart.
bool take_state_lock(int fd, const std::string& path) {
    constexpr int kRetries = 100;  // 50 ms apart: 5 s
    for (int attempt = 0;; ++attempt) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
            return true;
        }
        pid_t holder = 0;
        std::ifstream(path) >> holder;
        const bool holder_dead = holder > 0 && ::kill(holder, 0) != 0 && errno == ESRCH;
        if (!holder_dead || attempt >= kRetries) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace

bool same_learned(const Learned& a, const Learned& b) {
    return a.need_mib == b.need_mib && a.margin_mib == b.margin_mib &&
           a.lower_bound_mib == b.lower_bound_mib && a.runs == b.runs &&
           a.duration_s == b.duration_s && a.activity == b.activity && a.basis == b.basis;
}

// --- construction and restore -----------------------------------------------------------------

Daemon::Daemon(DaemonConfig config, std::unique_ptr<device::GpuBackend> backend,
               std::unique_ptr<store::Store> store, SchedulerConfig scheduler_config, int lock_fd)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      submit_rate_(config_.limits),
      scheduler_(std::move(scheduler_config)),
      started_steady_(steady_now()),
      lock_fd_(lock_fd) {
    for (const device::GpuInfo& g : backend_->gpus()) {
        windows_.emplace_back(config_.window);
        GpuState state;
        state.excluded = device::exclusion_reason(g, config_.exclude_gpus);
        if (!state.excluded.empty()) {
            spdlog::warn("GPU {} ({}, {}) is left out: {}", g.index, g.name, g.uuid,
                         state.excluded);
        }
        gpu_state_.push_back(std::move(state));
    }
}

Daemon::~Daemon() {
    if (lock_fd_ >= 0) {
        ::close(lock_fd_);
    }
}

Result<std::unique_ptr<Daemon>> Daemon::create(const DaemonConfig& raw) {
    auto finalized = finalize(raw);
    if (!finalized) {
        return tl::unexpected(finalized.error());
    }
    DaemonConfig config = *finalized;
    std::error_code ec;
    fs::create_directories(config.state_dir, ec);
    if (ec) {
        return fail(ErrorCode::Io, fmt::format("cannot create state directory {}: {}; choose "
                                               "another with --state-dir",
                                               config.state_dir, ec.message()));
    }
    // Others may reach the socket and the MPS pipes by name (the emulated-GPU file is 0600), but
    // not list what is inside.
    ::chmod(config.state_dir.c_str(), 0711);
    // Two daemons on one state directory would launch the same queued tasks twice.
    const std::string lock_path = config.state_dir + "/daemon.lock";
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) {
        return fail(ErrorCode::Io, fmt::format("cannot open {}: {}", lock_path,
                                               std::strerror(errno)));
    }
    if (!take_state_lock(lock_fd, lock_path)) {
        std::string holder;
        std::ifstream(lock_path) >> holder;
        ::close(lock_fd);
        return fail(ErrorCode::Io,
                    fmt::format("another carma daemon{} already uses the state directory {}; stop "
                                "it or choose another --state-dir",
                                holder.empty() ? "" : " (pid " + holder + ")", config.state_dir));
    }
    if (::ftruncate(lock_fd, 0) == 0) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        (void)!::write(lock_fd, pid.data(), pid.size());
    }
    // Closed on every early return below, kept by the daemon otherwise.
    struct LockGuard {
        int fd;
        bool keep = false;
        ~LockGuard() {
            if (!keep) {
                ::close(fd);
            }
        }
    } lock_guard{lock_fd};
    fs::create_directories(fs::path(config.state_dir) / "attempts", ec);
    ::chmod((fs::path(config.state_dir) / "attempts").c_str(), 0700);
    if (config.shim_path.empty()) {
        auto exe = exec::this_executable();
        if (!exe) {
            return tl::unexpected(exe.error());
        }
        config.shim_path = (exe->parent_path() / "carma-shim").string();
    }
    if (::access(config.shim_path.c_str(), X_OK) != 0) {
        return fail(ErrorCode::NotFound,
                    fmt::format("the supervisor binary {} is missing; install carma-shim next to "
                                "carma or set shim_path",
                                config.shim_path));
    }

    auto store = store::Store::open(config.state_dir + "/carma.db");
    if (!store) {
        return tl::unexpected(store.error());
    }
    // Attempts whose supervisor still runs may hold GPU state the backend must not wipe.
    auto open_attempts = (*store)->open_attempts();
    if (!open_attempts) {
        return tl::unexpected(open_attempts.error());
    }
    int attempts_running = 0;
    for (const store::AttemptRow& a : *open_attempts) {
        if (!a.node.empty()) {
            continue;  // on a node's agent, not here
        }
        pid_t shim = a.shim_pid;
        if (shim == 0) {
            std::ifstream(a.dir + "/shim.pid") >> shim;  // launched, not yet recorded
        }
        attempts_running += exec::shim_alive(exec::LaunchHandle{shim, a.dir, ""}) ? 1 : 0;
    }
    // Cluster mode: the GPUs are the agents', and none may have reported yet.
    std::shared_ptr<cluster::Hub> hub;
    Result<std::unique_ptr<device::GpuBackend>> backend = nullptr;
    if (!config.agents.empty()) {
        auto where = parse_host_port("--agents", config.agents);
        if (!where) {
            return tl::unexpected(where.error());
        }
        cluster::HubOptions ho;
        if (config.agent_auth == "munge") {
            auto munge = cluster::auth::Munge::open(config.munge_socket);
            if (!munge) {
                return tl::unexpected(munge.error());
            }
            auto server = cluster::auth::munge_server(
                std::move(*munge), config.agent_uid ? *config.agent_uid : ::geteuid());
            if (!server) {
                return tl::unexpected(server.error());
            }
            ho.auth = std::move(*server);
        } else {
            auto token = api::read_token_file(config.agent_token_file);
            if (!token) {
                return fail(token.error().code, "--agent-token-file: " + token.error().message);
            }
            ho.token = *token;
        }
        ho.host = where->host;
        ho.port = where->port;
        ho.state_dir = config.state_dir;
        ho.node_timeout_s = config.node_timeout_s;
        ho.report_period_s = 1.0 / config.time_scale;
        auto created = cluster::Hub::create(std::move(ho));
        if (!created) {
            return tl::unexpected(created.error());
        }
        hub = std::move(*created);
        backend = std::make_unique<cluster::HubBackend>(hub);
    } else {
        backend = device::open_backend(backend_choice(config), attempts_running);
        if (!backend) {
            return tl::unexpected(backend.error());
        }
        if (auto usable = device::check_some_gpu_usable((*backend)->gpus(), config.exclude_gpus);
            !usable) {
            return tl::unexpected(usable.error());
        }
    }

    SchedulerConfig sc;
    sc.policy = *find_policy(config.policy);
    sc.placement.memory.margin_mib = config.memory_margin_mib;
    sc.placement.memory.no_info_min_free_mib = config.no_info_min_free_mib;
    sc.placement.memory.estimator = *parse_estimator(config.estimator);
    sc.placement.risk = config.risk;
    sc.warmup.settle_s = config.warmup_s;
    // The `carma` policy predicts slowdowns with the device model: MPS sharing where tasks share
    // through MPS (--mps, or emulated GPUs in mps mode), time slicing otherwise.
    const bool mps_sharing =
        config.mps || ((*backend)->name().starts_with("emulated") && config.sharing == "mps");
    sc.placement.predict_speeds = model::speed_predictor(
        mps_sharing ? model::SharingMode::Mps : model::SharingMode::Timeslice);
    // Corrected by what earlier attempts taught of its error, kept in the history.
    SpeedPredictor raw_predict = sc.placement.predict_speeds;
    auto correction = std::make_shared<SpeedCorrection>(mps_sharing ? "mps" : "timeslice");
    if (auto factors = (*store)->speed_factors(); factors) {
        for (const store::SpeedFactorRow& f : *factors) {
            correction->add(f.family, f.sharing_class, f.k);
        }
    } else {
        spdlog::warn("cannot read the learned speed factors, predicting without them: {}",
                     factors.error().message);
    }
    sc.placement.predict_speeds = corrected_predictor(std::move(sc.placement.predict_speeds),
                                                      correction);

    // One control daemon per GPU (exec/mps.h says why), each adopted if it still runs from
    // before a restart. Named by UUID: GPU indices may shift when a GPU is left out.
    std::map<int, exec::MpsDaemon> mps;
    std::string mps_off_dir;
    if (config.mps) {
        for (const device::GpuInfo& g : (*backend)->gpus()) {
            exec::MpsOptions o;
            if (!config.mps_control.empty()) {
                o.control = config.mps_control;
            }
            o.pipe_dir = fmt::format("{}/mps/{}/pipe", config.state_dir, g.uuid);
            o.log_dir = fmt::format("{}/mps/{}/log", config.state_dir, g.uuid);
            o.visible_device = g.uuid;
            auto started = exec::MpsDaemon::start(o);
            if (!started) {
                return fail(started.error().code, fmt::format("--mps: GPU {} ({}): {}", g.index,
                                                              g.uuid, started.error().message));
            }
            if (!started->warning().empty()) {
                spdlog::warn("MPS: {}", started->warning());
            }
            spdlog::info("MPS control daemon of GPU {} {} {}; pipes in {}", g.index,
                         started->control_path(),
                         started->adopted() ? "already running (adopted)" : "started",
                         started->pipe_dir());
            mps.emplace(g.index, std::move(*started));
        }
        auto off = exec::prepare_no_mps_directory(config.state_dir + "/mps/off");
        if (!off) {
            return fail(off.error().code, fmt::format("--mps: {}", off.error().message));
        }
        mps_off_dir = std::move(*off);
    }

    auto* hub_backend = dynamic_cast<cluster::HubBackend*>(backend->get());
    std::unique_ptr<Daemon> d(
        new Daemon(config, std::move(*backend), std::move(*store), std::move(sc), lock_fd));
    d->raw_predict_ = std::move(raw_predict);
    d->correction_ = std::move(correction);
    d->mps_ = std::move(mps);
    d->mps_off_dir_ = std::move(mps_off_dir);
    d->hub_ = hub;
    d->hub_backend_ = hub_backend;
    lock_guard.keep = true;
    if (auto r = d->restore(); !r) {
        return tl::unexpected(r.error());
    }
    // Only now: every attempt the store knows on a node is expected there, so none is taken for
    // a stray and stopped.
    if (hub) {
        if (auto r = hub->listen(); !r) {
            return tl::unexpected(r.error());
        }
    }
    return d;
}

Result<void> Daemon::restore() {
    std::lock_guard lock(mu_);
    auto tasks = store_->tasks(/*include_final=*/false);
    if (!tasks) {
        return tl::unexpected(tasks.error());
    }
    auto open = store_->open_attempts();
    if (!open) {
        return tl::unexpected(open.error());
    }
    std::map<TaskId, store::AttemptRow> open_by_task;
    for (const store::AttemptRow& a : *open) {
        open_by_task[a.task] = a;
    }
    int requeued = 0, reattached = 0;
    for (store::TaskRow& t : *tasks) {
        // History may have grown while it waited (or the row predates schema 3).
        if (Learned fresh = learn(t); !same_learned(fresh, t.spec.learned)) {
            t.spec.learned = std::move(fresh);
            if (auto r = store_->update_task(t); !r) {
                spdlog::warn("task={}: cannot record what was learned of it: {}", t.id,
                             r.error().message);
            }
        }
        switch (t.state) {
            case store::TaskState::Queued:
                // Waiting time counts from submission, across restarts (carma's bounded wait).
                admit_to_queue(t);
                ++requeued;
                break;
            case store::TaskState::Recovering:
                scheduler_.enqueue_recovery(t.id, queued_spec(t), clock_of(t.submitted_at));
                ++requeued;
                break;
            case store::TaskState::Running: {
                auto it = open_by_task.find(t.id);
                if (it == open_by_task.end()) {
                    // The daemon stopped between the decision and the launch: nothing ran.
                    t.state = store::TaskState::Queued;
                    t.message = "re-queued after a daemon restart (it had not started)";
                    if (auto r = store_->update_task(t); !r) {
                        return tl::unexpected(r.error());
                    }
                    scheduler_.enqueue(t.id, queued_spec(t));
                    ++requeued;
                    break;
                }
                store::AttemptRow& a = it->second;
                LiveAttempt live;
                live.task = t.id;
                live.number = a.number;
                live.gpus = a.gpus;
                live.handle = exec::LaunchHandle{a.shim_pid, a.dir, a.node};
                live.settled = true;  // it has been running for a while; no warm-up lock
                live.peak_mib = a.peak_mib;
                live.energy_j = a.energy_j;  // accounting goes on from what was stored
                live.learned = t.spec.learned;
                bind_correction(t);
                live.sharing_known = false;
                live.mps_user = mps_user_of(t, a.gpus, a.node);
                live.started_clock = clock_of(a.started_at);
                live.started_unix = a.started_at;
                live.time_limit_s = t.spec.time_limit_s;
                if (!a.node.empty()) {
                    // On a node: its agent reports whether it runs, ended, or never started.
                    live.launch_unconfirmed = a.shim_pid == 0;
                    if (hub_) {
                        hub_->expect(a.node, cluster::attempt_name_of(a.dir));
                    } else {
                        spdlog::warn("task={}: attempt {} runs on node {}, but this daemon was "
                                     "started without --agents; it is followed again once the "
                                     "daemon runs with --agents",
                                     t.id, a.number, a.node);
                    }
                    live_[t.id] = live;
                    ++reattached;
                    break;
                }
                if (live.handle.shim_pid == 0) {
                    std::ifstream pidfile(a.dir + "/shim.pid");
                    pidfile >> live.handle.shim_pid;
                }
                // Put back what has not run: recorded, but the launch never happened or was cut
                // short by the daemon's death before the task started (and now never will).
                auto requeue = [&](const char* why) -> Result<void> {
                    if (auto r = requeue_not_started(
                            t, a, fmt::format("re-queued after a daemon restart ({})", why));
                        !r) {
                        return r;
                    }
                    ++requeued;
                    return {};
                };
                if (!fs::exists(a.dir)) {
                    if (auto r = requeue("its launch had not happened"); !r) {
                        return r;
                    }
                    break;
                }
                if (live.handle.shim_pid == 0 && !exec::read_exit(a.dir)) {
                    const exec::InterruptedLaunch settled = exec::settle_interrupted_launch(a.dir);
                    if (!settled.started) {
                        if (auto r = requeue("it was being started and had not started"); !r) {
                            return r;
                        }
                        break;
                    }
                    live.handle.shim_pid = settled.shim_pid;
                }
                live_[t.id] = live;
                ++reattached;
                break;
            }
            default:
                break;
        }
    }
    event(0, "daemon-started",
          fmt::format("policy {} on {}; {} waiting task(s) re-queued, {} running attempt(s) "
                      "re-attached",
                      config_.policy, backend_->name(), requeued, reattached));
    spdlog::info("restored state: {} waiting task(s), {} running attempt(s)", requeued,
                 reattached);
    return {};
}

double Daemon::now() const { return (steady_now() - started_steady_) * config_.time_scale; }

double Daemon::clock_of(double unix_time) const {
    return now() - std::max(0.0, unix_now() - unix_time) * config_.time_scale;
}

void Daemon::event(TaskId task, const std::string& kind, const std::string& message) {
    store::EventRow e;
    e.time = unix_now();
    e.task = task;
    e.kind = kind;
    // An event says what happened; a 20 KB argument repeated in 10,000 of them says nothing more
    // and fills the disk (the task's own row keeps the whole command).
    e.message = shortened(message, kMaxEventBytes);
    if (auto r = store_->add_event(e); !r) {
        spdlog::warn("cannot record event {} of task {}: {}", kind, task, r.error().message);
    }
    if (task != 0) {
        spdlog::info("task={} {}: {}", task, kind, message);
    }
}

// --- the loop ---------------------------------------------------------------------------------

void Daemon::run(const std::atomic<bool>& stop) {
    const auto period = std::chrono::duration<double>(1.0 / config_.time_scale);
    auto next = std::chrono::steady_clock::now();
    while (!stop.load()) {
        tick();
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
        const auto now_tp = std::chrono::steady_clock::now();
        if (next < now_tp) {
            next = now_tp;  // fell behind: do not try to catch up with a burst of ticks
        }
        // Sleep in short slices so a stop request is honoured promptly.
        while (!stop.load() && std::chrono::steady_clock::now() < next) {
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                next - std::chrono::steady_clock::now(), std::chrono::milliseconds(100)));
        }
    }
    std::lock_guard lock(mu_);
    // A control daemon whose clients still run stays: `quit` would take their MPS server down
    // under them. The next start adopts it; a stop with no client left quits it.
    for (auto& [gpu, control] : mps_) {
        const auto clients = std::count_if(live_.begin(), live_.end(), [&](const auto& kv) {
            return !kv.second.mps_user.empty() && kv.second.gpus == std::vector<int>{gpu};
        });
        if (clients > 0) {
            spdlog::info("MPS control daemon of GPU {} left running: {} task(s) are its clients; "
                         "the next start adopts it",
                         gpu, clients);
            continue;
        }
        if (auto r = control.stop(); !r) {
            spdlog::warn("cannot stop the MPS control daemon of GPU {}: {}", gpu,
                         r.error().message);
        }
    }
    mps_.clear();
    event(0, "daemon-stopped",
          fmt::format("{} attempt(s) left running under their supervisors", live_.size()));
}

void Daemon::tick() {
    // The slow reads happen before the lock: a GPU library call or a walk of /proc must not
    // stall the API.
    Result<std::vector<device::GpuSample>> samples = backend_->sample();
    bool any_live = false;
    std::optional<RelearnPass> pass;
    {
        std::lock_guard lock(mu_);
        any_live = !live_.empty();
        // Re-deriving reads and may rewrite waiting tasks (0.15 s for 2,000 here): a page of
        // them at most once a second, a pass through them all taking the lessons of the ends
        // before it together; lessons of ends during a pass wait for the next.
        if (steady_now() - last_relearn_ >= kRelearnEveryS) {
            if (!relearn_ && !lessons_.empty()) {
                relearn_ = RelearnPass{std::exchange(lessons_, Lessons{}), 0};
            }
            if (relearn_) {
                pass = relearn_;
                last_relearn_ = steady_now();
            }
        }
    }
    const std::vector<exec::ProcEntry> table =
        any_live ? exec::read_process_table() : std::vector<exec::ProcEntry>{};
    // Tasks that waited while the same command (or its family) ran learn what it used.
    std::vector<std::pair<TaskId, Learned>> relearned;
    std::vector<std::string> relearned_families;
    std::optional<TaskId> pass_after;  // where the pass goes on; nothing once it is through
    if (pass) {
        pass_after = relearn_waiting(*pass, relearned, relearned_families);
    }
    std::vector<PreparedLaunch> launches;
    {
        std::lock_guard lock(mu_);
        ++ticks_;
        if (hub_backend_) {
            grow_gpus();
        }
        for (std::size_t i = 0; i < relearned.size(); ++i) {
            const auto& [id, learned] = relearned[i];
            // A new learned activity is a new key of the correction's family table.
            if (correction_) {
                correction_->bind(
                    learned.activity.value_or(knowledge_config().default_activity),
                    relearned_families[i]);
            }
            scheduler_.relearn(id, learned);  // false: it started meanwhile, nothing to do
        }
        if (pass) {
            if (pass_after) {
                relearn_->after = *pass_after;
            } else {
                relearn_.reset();
            }
        }
        apply_samples(std::move(samples));
        notice_sightings(table);
        accumulate_activity();
        accumulate_sharing();
        accumulate_energy();  // before collect_exits: an attempt's last interval is its own
        collect_exits();
        enforce_time_limits();
        resolve_dependencies();
        launches = decide();
        for (const PreparedLaunch& l : launches) {
            launching_[l.task.id] = false;
        }
    }
    // Starting a supervisor and waiting for its task to start takes milliseconds to seconds:
    // without the lock. Nothing else launches, and a cancel meanwhile is noted in launching_.
    // On nodes, each launch is a round trip to its agent: all at once, not one after another.
    std::vector<std::future<Result<exec::LaunchHandle>>> started;
    started.reserve(launches.size());
    for (const PreparedLaunch& l : launches) {
        started.push_back(std::async(
            l.attempt.node.empty() ? std::launch::deferred : std::launch::async,
            [this, &l] { return start_attempt(l); }));
    }
    std::vector<Result<exec::LaunchHandle>> handles;
    handles.reserve(launches.size());
    for (auto& f : started) {
        handles.push_back(f.get());
    }
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < launches.size(); ++i) {
        complete_launch(std::move(launches[i]), std::move(handles[i]));
    }
}

void Daemon::apply_samples(Result<std::vector<device::GpuSample>> samples) {
    if (!samples) {
        spdlog::warn("cannot sample GPUs: {}", samples.error().message);
        for (std::size_t i = 0; i < gpu_state_.size(); ++i) {
            note_missing_sample(i, samples.error().message);
        }
        last_samples_.clear();
        return;
    }
    last_samples_ = *samples;
    for (const device::GpuSample& s : last_samples_) {
        if (s.index < 0 || static_cast<std::size_t>(s.index) >= windows_.size()) {
            continue;
        }
        const auto idx = static_cast<std::size_t>(s.index);
        // Periods are scaled by time_scale; a backend's age is in real seconds.
        const double age_periods = s.age_s * config_.time_scale;
        if (!s.error.empty() || age_periods > kStaleAfterPeriods) {
            note_missing_sample(idx, !s.error.empty()
                                         ? s.error
                                         : fmt::format("its newest reading is {:.1f} s old",
                                                       s.age_s));
            continue;
        }
        GpuState& state = gpu_state_[idx];
        if (state.unhealthy) {
            event(0, "gpu-healthy",
                  fmt::format("GPU {} answers again; it takes tasks once its window has refilled",
                              s.index));
            spdlog::info("GPU {} answers again", s.index);
        }
        state.missing = 0;
        state.unhealthy = false;
        state.last_error.clear();
        MetricSample m;
        m.free_mib = s.free_mib;
        m.smact = s.smact;
        m.smocc = s.smocc;
        m.drama = s.drama;
        m.util = s.util;
        m.power_w = s.power_w;
        m.sources = s.sources;
        windows_[idx].push(m);
        // Which rule the risk filter applies follows from the metrics this GPU really gives;
        // say so whenever it changes (at start, and when e.g. profiling becomes unavailable).
        std::string rule = describe_rule(windows_[idx].stats(), config_.risk);
        if (rule != state.rule_text) {
            spdlog::info("GPU {}: {}; risk rule {}", s.index, device::describe_sources(s), rule);
            state.rule_text = std::move(rule);
        }
    }
    // History older than retention_days goes, once an hour (and on the first tick).
    if (config_.retention_days > 0 && ticks_ % 3600 == 1) {
        const double before = unix_now() - config_.retention_days * 86400.0;
        if (auto dropped = store_->prune_history(before); !dropped) {
            spdlog::warn("cannot drop old history: {}", dropped.error().message);
        } else if (*dropped > 0) {
            spdlog::info("dropped {} rows (GPU samples, events, finished tasks and their "
                         "attempts) older than {} days",
                         *dropped, config_.retention_days);
        }
    }
    // Downsampled history: one row per GPU every 10 samples. Unknown metrics are stored as NULL.
    if (ticks_ % 10 == 1) {
        std::vector<store::GpuSampleRow> rows;
        const double t = unix_now();
        const double nan = std::nan("");
        for (const device::GpuSample& s : last_samples_) {
            if (!s.error.empty()) {
                continue;
            }
            rows.push_back(store::GpuSampleRow{t, s.index, s.free_mib, s.used_mib,
                                               s.util.value_or(nan), s.smact.value_or(nan),
                                               s.smocc.value_or(nan), s.drama.value_or(nan),
                                               s.power_w.value_or(nan), s.energy_j.value_or(nan)});
        }
        if (auto r = store_->add_gpu_samples(rows); !r) {
            spdlog::warn("cannot store GPU samples: {}", r.error().message);
        }
    }
}

// A failed or stale read. A few in a row make the GPU unhealthy: its window is dropped (old
// free memory must not steer placement) and its running tasks are reported, not killed.
void Daemon::note_missing_sample(std::size_t gpu, const std::string& why) {
    GpuState& state = gpu_state_[gpu];
    state.missing += 1;
    state.last_error = why;
    if (state.unhealthy || state.missing < kUnhealthyAfterMissing || !state.excluded.empty()) {
        return;
    }
    state.unhealthy = true;
    windows_[gpu] = MetricWindow(config_.window);
    std::vector<TaskId> tasks;
    for (const auto& [id, live] : live_) {
        if (std::find(live.gpus.begin(), live.gpus.end(), static_cast<int>(gpu)) !=
            live.gpus.end()) {
            tasks.push_back(id);
        }
    }
    const std::string message = fmt::format(
        "GPU {} is unhealthy: {} ({} failed reads in a row); nothing is placed on it until it "
        "answers again{}",
        gpu, why, state.missing,
        tasks.empty() ? std::string()
                      : fmt::format("; task(s) {} on it are left running", fmt::join(tasks, ", ")));
    spdlog::warn("{}", message);
    event(0, "gpu-unhealthy", message);
    for (TaskId id : tasks) {
        event(id, "gpu-unhealthy", message);
    }
}

// Finds each live task's processes (its group, its session, every descendant: ranks that call
// setsid included) on its GPUs. A GPU's warm-up ends when the task is seen on that GPU; the
// memory its processes hold there is the attempt's per-GPU peak.
void Daemon::notice_sightings(const std::vector<exec::ProcEntry>& table) {
    std::set<pid_t> ours;  // every live attempt's processes: the rest on a GPU is foreign
    for (auto& [id, live] : live_) {
        live.held_now.clear();
        live.crowded_now.clear();
        const std::set<pid_t> members = attempt_members(live, table);
        ours.insert(members.begin(), members.end());
        if (members.empty()) {
            continue;
        }
        for (const device::GpuSample& s : last_samples_) {
            if (!s.error.empty() ||
                std::find(live.gpus.begin(), live.gpus.end(), s.index) == live.gpus.end()) {
                continue;
            }
            bool here = false;
            MiB held = 0;
            double activity = 0;
            bool crowded = false;
            for (const device::GpuProcess& p : s.processes) {
                if (!p.mps_server && members.contains(static_cast<pid_t>(p.pid))) {
                    here = true;
                    held += p.used_mib;
                    activity += p.activity.value_or(0);
                } else if (!p.mps_server) {
                    crowded = true;
                }
            }
            if (!here) {
                continue;
            }
            if (crowded) {
                live.crowded_now.insert(s.index);
            }
            live.activity_now[s.index] = activity;  // its share of the GPU's energy
            live.held_now[s.index] = held;
            if (live.seen_on.insert(s.index).second && !live.settled) {
                scheduler_.task_seen_on(id, s.index, now());
            }
            MiB& peak = live.peak_mib[s.index];
            if (held > peak) {
                peak = held;
                live.peak_changed = true;
            }
        }
        if (live.seen_on.size() == live.gpus.size()) {
            live.settled = true;
        }
        // The peak is written every few seconds while it grows, so a restart loses little.
        if (live.peak_changed && ticks_ % 5 == 0) {
            if (auto r = store_->set_attempt_peak(id, live.number, live.peak_mib); r) {
                live.peak_changed = false;
            }
        }
    }
    notice_foreign(ours);
}

Result<void> Daemon::requeue_not_started(store::TaskRow& task, store::AttemptRow& attempt,
                                         const std::string& why) {
    attempt.ended_at = unix_now();
    attempt.outcome = "not-started";
    task.state = attempt.recovered ? store::TaskState::Recovering : store::TaskState::Queued;
    task.message = why;
    if (auto r = store_->end_attempt(attempt, task); !r) {
        return r;
    }
    if (attempt.recovered) {
        scheduler_.enqueue_recovery(task.id, queued_spec(task));
    } else {
        scheduler_.enqueue(task.id, queued_spec(task));
    }
    return {};
}

void Daemon::collect_exits() {
    struct Ended {
        TaskId id = 0;
        std::optional<exec::ExitRecord> record;
        std::string tail;
        bool lost = false;
    };
    std::vector<Ended> ended;
    std::vector<TaskId> never_received;  // restored launches their node does not know
    for (auto& [id, live] : live_) {
        const std::string& node = live.handle.node;
        if (node.empty()) {
            if (exec::read_exit(live.handle.attempt_dir) || !exec::shim_alive(live.handle)) {
                // Read again: the shim may have written its record between the two checks.
                ended.push_back(Ended{id, exec::read_exit(live.handle.attempt_dir),
                                      exec::read_tail(live.handle.attempt_dir + "/stderr.log",
                                                64 * 1024),
                                      false});
            }
            continue;
        }
        if (!hub_) {
            continue;
        }
        const cluster::RemoteAttempt a =
            hub_->attempt(node, cluster::attempt_name_of(live.handle.attempt_dir));
        if (a.state == cluster::RemoteAttempt::State::Running ||
            a.state == cluster::RemoteAttempt::State::Ended) {
            live.launch_unconfirmed = false;
        }
        switch (a.state) {
            case cluster::RemoteAttempt::State::Running: break;
            case cluster::RemoteAttempt::State::Ended:
                // Stopped by its agent because the allocation ends, not by anyone here: lost
                // with the node, and queued again.
                ended.push_back(Ended{id, a.exit, a.stderr_tail,
                                      hub_->ending(node) && a.exit && a.exit->cancel_requested &&
                                          !live.stop_requested});
                break;
            case cluster::RemoteAttempt::State::Vanished:
                if (live.launch_unconfirmed && !live.stop_requested) {
                    never_received.push_back(id);
                    break;
                }
                ended.push_back(Ended{id, std::nullopt, a.stderr_tail, hub_->ending(node)});
                break;
            case cluster::RemoteAttempt::State::Unknown:
                if (hub_->lost(node) && live.stop_requested) {
                    // Asked to stop, and its node is gone: it ended as asked, not lost.
                    ended.push_back(Ended{id, exec::ExitRecord{true, std::nullopt, SIGTERM, true,
                                                               unix_now(), ""},
                                          "", false});
                } else if (hub_->lost(node)) {
                    ended.push_back(Ended{id, std::nullopt, "", true});
                }
                break;
        }
    }
    for (const Ended& e : ended) {
        LiveAttempt& live = live_.at(e.id);
        if (auto done = finish_attempt(live, e.record ? &*e.record : nullptr, e.tail, e.lost);
            !done) {
            // Said once, then once a minute of ticks: a full disk must not also flood the log.
            if (live.unstored_ends++ % 60 == 0) {
                spdlog::warn("task={}: {}; tried again every tick", e.id, done.error().message);
            }
            continue;
        }
        if (!live.handle.node.empty() && hub_) {
            hub_->forget(live.handle.node, cluster::attempt_name_of(live.handle.attempt_dir));
        }
        live_.erase(e.id);
    }
    for (TaskId id : never_received) {
        if (auto done = requeue_unreceived(live_.at(id)); !done) {
            spdlog::warn("task={}: {}; tried again next tick", id, done.error().message);
            continue;
        }
        live_.erase(id);
    }
}

// The node reports and does not know the attempt, whose launch the server was waiting on when
// it died: the command never reached the agent, so nothing ran (a launch the agent did receive
// shows in its reports until the server forgets it).
Result<void> Daemon::requeue_unreceived(const LiveAttempt& live) {
    auto task = store_->task(live.task);
    if (!task) {
        return tl::unexpected(task.error());
    }
    auto attempts = store_->attempts(live.task);
    if (!attempts) {
        return tl::unexpected(attempts.error());
    }
    auto attempt = std::find_if(attempts->begin(), attempts->end(), [&](const auto& a) {
        return a.number == live.number;
    });
    if (!task->has_value() || attempt == attempts->end()) {
        return fail(ErrorCode::NotFound,
                    fmt::format("attempt {} of task {} is not in the store", live.number,
                                live.task));
    }
    const std::string why = fmt::format(
        "re-queued: node {} never received attempt {} (the server restarted while launching it)",
        live.handle.node, live.number);
    if (auto r = requeue_not_started(**task, *attempt, why); !r) {
        return r;
    }
    event(live.task, std::string(store::to_string((*task)->state)), why);
    spdlog::info("task={}: {}", live.task, why);
    hub_->forget(live.handle.node, cluster::attempt_name_of(live.handle.attempt_dir));
    return {};
}

Result<exec::LaunchHandle> Daemon::start_attempt(const PreparedLaunch& launch) {
    if (launch.attempt.node.empty()) {
        return exec::launch(launch.request, config_.shim_path);
    }
    if (!hub_) {
        return fail(ErrorCode::Io, "this daemon does not listen for agents");
    }
    return hub_->launch(launch.attempt.node, launch.request);
}

Result<void> Daemon::stop_attempt(const exec::LaunchHandle& handle) {
    if (handle.node.empty()) {
        return exec::request_stop(handle);
    }
    if (!hub_) {
        return fail(ErrorCode::Io, fmt::format("the attempt runs on node {}, and this daemon does "
                                               "not listen for agents (--agents)",
                                               handle.node));
    }
    // Queued for the node's agent; delivered when it next reports, however long it was away.
    hub_->stop(handle.node, cluster::attempt_name_of(handle.attempt_dir));
    return {};
}

std::set<pid_t> Daemon::attempt_members(const LiveAttempt& live,
                                         const std::vector<exec::ProcEntry>& table) const {
    if (!live.handle.node.empty()) {
        if (!hub_ || live.handle.attempt_dir.empty()) {
            return {};
        }
        return hub_->attempt(live.handle.node,
                             cluster::attempt_name_of(live.handle.attempt_dir))
            .members;
    }
    if (table.empty()) {
        return {};
    }
    auto pgid = exec::task_pgid(live.handle.attempt_dir);
    if (!pgid) {
        return {};
    }
    return exec::task_processes(table, *pgid);
}

void Daemon::grow_gpus() {
    hub_backend_->refresh();
    const std::vector<device::GpuInfo>& gpus = backend_->gpus();
    for (std::size_t i = windows_.size(); i < gpus.size(); ++i) {
        const device::GpuInfo& g = gpus[i];
        windows_.emplace_back(config_.window);
        GpuState state;
        state.excluded = device::exclusion_reason(g, config_.exclude_gpus);
        gpu_state_.push_back(std::move(state));
        event(0, "gpu-added",
              fmt::format("GPU {} joins: GPU {} of node {} ({})", g.index, g.node_index, g.node,
                          g.name));
    }
}

// The end is stored first and only then acted on: if the store refuses (disk full), the attempt
// stays live, the scheduler still holds the task, and the next tick tries again.
Result<void> Daemon::finish_attempt(const LiveAttempt& live, const exec::ExitRecord* record,
                                    const std::string& stderr_tail, bool node_lost) {
    auto task_r = store_->task(live.task);
    if (!task_r) {
        return fail(task_r.error().code,
                    "its attempt ended but the task cannot be read: " + task_r.error().message);
    }
    if (!*task_r) {
        spdlog::error("task={} ended but is not in the store", live.task);
        scheduler_.task_exited(live.task);
        return {};
    }
    store::TaskRow task = **task_r;
    AttemptEnd end;
    if (record) {
        end.started = record->started;
        end.exit_code = record->exit_code;
        end.signal = record->signal;
        end.cancel_requested = record->cancel_requested || live.stop_requested;
        // After a restart the flag is gone; an attempt stopped once it had run its limit was
        // stopped for it.
        end.time_limit_reached =
            live.timed_out || (record->cancel_requested && live.time_limit_s &&
                               record->ended_at - live.started_unix >= *live.time_limit_s);
    } else {
        end.record_missing = true;
    }
    if (end.record_missing && live.handle.node.empty()) {
        // The supervisor died without a record (e.g. SIGKILL); its task may still run unwatched.
        // (On a node, its agent does the same.)
        // Its group, and ranks that left it (the supervisor that would have killed them is gone);
        // only processes still marked as this attempt's, since the pgid may have been reused.
        if (auto pgid = exec::task_pgid(live.handle.attempt_dir); pgid && *pgid > 1) {
            for (pid_t p : exec::task_processes(exec::read_process_table(), *pgid)) {
                if (exec::carries_attempt(p, live.task, live.number)) {
                    ::kill(p, SIGKILL);
                }
            }
        }
    }
    const AttemptOutcome outcome =
        node_lost ? AttemptOutcome::Lost : classify_attempt(end, stderr_tail);

    auto attempts = store_->attempts(task.id);
    if (!attempts) {
        return fail(attempts.error().code,
                    "cannot read its attempts: " + attempts.error().message);
    }
    std::optional<store::AttemptRow> ended;
    for (const store::AttemptRow& a : *attempts) {
        if (a.number == live.number) {
            ended = a;
            ended->ended_at = record && record->ended_at > 0 ? record->ended_at : unix_now();
            ended->peak_mib = live.peak_mib;
            ended->energy_j = live.energy_j;
            ended->outcome = std::string(to_string(outcome));
            ended->exit_code = end.exit_code;
            ended->signal = end.signal;
        }
    }
    // Before learn() below: an out-of-memory end raises the lower bound the relaunch plans with.
    // Recording the same attempt again (a retried end) replaces its row.
    if (ended && end.started) {
        record_history(task, *ended, live);
    }

    std::string how;
    if (!end.started) {
        how = record && !record->error.empty() ? record->error : "could not start";
    } else if (end.exit_code) {
        how = fmt::format("exit code {}", *end.exit_code);
    } else if (end.signal) {
        how = fmt::format("killed by signal {}", *end.signal);
    } else {
        how = "its supervisor vanished without an exit record";
    }
    const bool retryable =
        outcome == AttemptOutcome::OutOfMemory ||
        (outcome == AttemptOutcome::Failed && config_.retry_failures && end.started);
    const bool relaunch = retryable && task.attempts < task.max_attempts;
    if (node_lost) {
        // Not the task's doing: it goes back to the queue as it came, whatever its attempts.
        how = fmt::format("lost with node {}{}", live.handle.node,
                          hub_ && !hub_->slurm_job(live.handle.node).empty()
                              ? " (Slurm job " + hub_->slurm_job(live.handle.node) + " ended)"
                              : "");
        task.state = store::TaskState::Queued;
        task.message = fmt::format("attempt {} {}; queued again", live.number, how);
    } else if (relaunch) {
        task.spec.learned = learn(task);  // an out-of-memory crash has just raised its lower bound
        task.state = store::TaskState::Recovering;
        task.message = fmt::format("attempt {} {} ({}); relaunching on idle GPUs",
                                   live.number,
                                   outcome == AttemptOutcome::OutOfMemory ? "ran out of GPU memory"
                                                                         : "failed",
                                   how);
    } else {
        switch (outcome) {
            case AttemptOutcome::Succeeded: task.state = store::TaskState::Succeeded; break;
            case AttemptOutcome::Cancelled: task.state = store::TaskState::Cancelled; break;
            case AttemptOutcome::Lost: task.state = store::TaskState::Lost; break;
            case AttemptOutcome::Timeout: task.state = store::TaskState::Timeout; break;
            default: task.state = store::TaskState::Failed; break;
        }
        task.finished_at = unix_now();
        if (outcome == AttemptOutcome::Timeout) {
            how = "stopped at its time limit of " + format_time_limit(*live.time_limit_s);
        }
        task.message = outcome == AttemptOutcome::Succeeded
                           ? "succeeded"
                           : fmt::format("{} after {} attempt(s): {}", to_string(outcome),
                                         task.attempts, how);
        dependencies_due_ = true;
    }
    // The attempt's end and the task's new state in one transaction: apart, a daemon killed
    // between them would leave a running task without an open attempt, which a restart re-queues
    // (and so runs twice).
    auto stored = ended ? store_->end_attempt(*ended, task) : store_->update_task(task);
    if (!stored) {
        return fail(stored.error().code, fmt::format("cannot record that attempt {} ended: {}",
                                                     live.number, stored.error().message));
    }
    scheduler_.task_exited(live.task);
    if (node_lost) {
        scheduler_.enqueue(task.id, queued_spec(task));
    } else if (relaunch) {
        scheduler_.enqueue_recovery(task.id, queued_spec(task));
    }
    if (outcome == AttemptOutcome::OutOfMemory) {
        ++oom_total_;
    }
    event(task.id,
          node_lost                                ? "lost"
          : outcome == AttemptOutcome::OutOfMemory ? "oom"
                                                   : "exited",
          fmt::format("attempt {}: {} ({})", live.number, to_string(outcome), how));
    return {};
}

// Under MPS each GPU of a first attempt gets need + margin as its memory limit, so a task that
// outgrows its estimate fails alone instead of taking its co-runners down. A recovered attempt
// runs alone on idle GPUs and gets no limit: the same limit would only crash it again.
std::vector<exec::MpsMemLimit> Daemon::mps_limits(const store::TaskRow& task,
                                                  const Placement& placement) const {
    std::vector<exec::MpsMemLimit> limits;
    if (placement.recovered) {
        return limits;
    }
    const PolicySpec& policy = scheduler_.config().policy;
    const MemoryKnowledge knowledge = policy.knowledge == MemoryKnowledge::None
                                          ? MemoryKnowledge::Oracle  // what the user declared
                                          : policy.knowledge;
    const std::optional<MiB> need = known_need_mib(
        task.spec, knowledge, scheduler_.config().placement.memory.estimator);
    if (!need) {
        return limits;
    }
    // By ordinal, as NVIDIA documents the variable: the i-th GPU of CUDA_VISIBLE_DEVICES.
    std::vector<MiB> per_ordinal;
    for (int g : placement.gpus) {
        const device::GpuInfo& gpu = backend_->gpus()[static_cast<std::size_t>(g)];
        const MiB margin = config_.memory_margin_mib;
        // Saturating: a limit at or above the GPU's memory limits nothing.
        per_ordinal.push_back(*need >= gpu.total_mib - margin ? gpu.total_mib : *need + margin);
    }
    return exec::ordinal_limits(per_ordinal);
}

TaskSpec Daemon::queued_spec(const store::TaskRow& task) const {
    bind_correction(task);
    TaskSpec spec = task.spec;
    spec.mps_user = !mps_.empty() && spec.gpus == 1 ? task.user : std::string();
    return spec;
}

std::string Daemon::mps_user_of(const store::TaskRow& task, const std::vector<int>& gpus,
                                const std::string& node) const {
    return node.empty() && gpus.size() == 1 && mps_.contains(gpus[0]) ? task.user
                                                                       : std::string();
}

std::vector<std::pair<std::string, std::string>> Daemon::task_environment(
    const store::TaskRow& task, const LiveAttempt& live, const Placement& placement) {
    std::string devices;
    for (int g : placement.gpus) {
        devices += (devices.empty() ? "" : ",") + backend_->gpus()[static_cast<std::size_t>(g)].uuid;
    }
    std::vector<std::pair<std::string, std::string>> env;
    std::set<std::string> declared;
    for (const auto& [k, v] : task.env) {
        env.emplace_back(k, v);
        declared.insert(k);
    }
    auto add_default = [&](const std::string& k, const std::string& v) {
        if (!declared.contains(k)) {
            env.emplace_back(k, v);
        }
    };
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(task.uid, &pw, buf, sizeof buf, &found) == 0 && found) {
        add_default("HOME", found->pw_dir);
        add_default("SHELL", found->pw_shell);
    }
    add_default("PATH", kDefaultPath);
    add_default("USER", task.user);
    add_default("LOGNAME", task.user);
    env = activate_python_env(std::move(env), task.spec.conda, task.spec.venv);
    // Set by CARMA whatever the submitter declared: where the task may run.
    std::erase_if(env, [](const auto& kv) {
        return kv.first == "CUDA_VISIBLE_DEVICES" || kv.first.starts_with("CARMA_") ||
               kv.first.starts_with("CUDA_MPS_");
    });
    env.emplace_back("CUDA_VISIBLE_DEVICES", devices);
    env.emplace_back("CARMA_TASK_ID", std::to_string(task.id));
    env.emplace_back("CARMA_ATTEMPT", std::to_string(live.number));
    if (task.spec.array) {
        env.emplace_back("CARMA_ARRAY_ID", std::to_string(task.spec.array->id));
        env.emplace_back("CARMA_ARRAY_INDEX", std::to_string(task.spec.array->index));
    }
    if (config_.time_scale != 1) {
        env.emplace_back("CARMA_TIME_SCALE", fmt::format("{}", config_.time_scale));
    }
    for (const auto& kv : backend_->task_environment()) {
        env.push_back(kv);
    }
    if (!mps_.empty()) {
        const auto control = placement.gpus.size() == 1 ? mps_.find(placement.gpus[0])
                                                        : mps_.end();
        if (control != mps_.end()) {
            const std::vector<exec::MpsMemLimit> limits = mps_limits(task, placement);
            for (auto& kv : exec::mps_task_environment(control->second.pipe_dir(), limits)) {
                env.push_back(std::move(kv));
            }
        } else {
            // A process reaches one control daemon, and each serves one GPU: outside MPS.
            env.emplace_back(std::string(exec::kMpsPipeDirEnv), mps_off_dir_);
        }
    }
    return env;
}

std::string Daemon::schedulable_reason(std::size_t gpu) const {
    const GpuState& state = gpu_state_[gpu];
    if (hub_) {
        if (std::string why = hub_->unschedulable_reason(backend_->gpus()[gpu].node);
            !why.empty()) {
            return why;
        }
    }
    if (state.unhealthy) {
        return "unhealthy: " + state.last_error;
    }
    if (state.missing > 0) {
        return "its last read failed: " + state.last_error;
    }
    if (!windows_[gpu].full()) {
        return fmt::format("its monitor window is filling ({}/{} samples)", windows_[gpu].size(),
                           windows_[gpu].capacity());
    }
    return {};
}

// The GPUs the scheduler may consider: every GPU not left out, each with why it cannot take a
// task right now, if it cannot.
std::vector<GpuView> Daemon::gpu_views() const {
    std::vector<GpuView> views;
    for (const device::GpuInfo& g : backend_->gpus()) {
        const auto idx = static_cast<std::size_t>(g.index);
        if (!gpu_state_[idx].excluded.empty()) {
            continue;
        }
        GpuView v;
        v.index = g.index;
        v.node = g.node;
        v.total_mib = g.total_mib;
        v.stats = windows_[idx].stats();
        v.unschedulable_reason = schedulable_reason(idx);
        v.schedulable = v.unschedulable_reason.empty();
        for (const device::GpuSample& s : last_samples_) {
            if (s.index == g.index) {
                // MPS servers are infrastructure: with MPS on they sit on every GPU.
                v.has_processes = std::any_of(s.processes.begin(), s.processes.end(),
                                              [](const device::GpuProcess& p) {
                                                  return !p.mps_server;
                                              });
            }
        }
        // Memory and activity of processes CARMA did not start are taken (daemon/foreign.h).
        v.foreign_mib = foreign_mib(gpu_state_[idx].foreign);
        v.foreign_activity = gpu_state_[idx].foreign.empty()
                                 ? std::optional<double>(std::nullopt)
                                 : foreign_activity(gpu_state_[idx].foreign)
                                       .value_or(v.stats.smact.known > 0 ? v.stats.smact.mean
                                                                         : v.stats.util.mean);
        // A GPU running one of our attempts is never idle, even before (or without) its process
        // showing up there: the exclusive path must not stack tasks on it. Its attempts are the
        // residents `carma` plans with (their learned figures, never their measurements).
        for (const auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), g.index) != live.gpus.end()) {
                v.has_processes = true;
                ResidentView r;
                r.task = id;
                if (!live.mps_user.empty()) {
                    v.mps_user = live.mps_user;
                }
                r.activity = live.learned.activity.value_or(0.6);
                r.need_mib = live.learned.need_mib
                                 ? std::optional<MiB>(*live.learned.need_mib +
                                                      live.learned.margin_mib)
                                 : std::nullopt;
                if (live.learned.duration_s) {
                    r.expected_end = live.started_clock + *live.learned.duration_s;
                }
                v.residents.push_back(r);
            }
        }
        views.push_back(std::move(v));
    }
    return views;
}

std::vector<Daemon::PreparedLaunch> Daemon::decide() {
    std::vector<PreparedLaunch> launches;
    const std::vector<GpuView> views = gpu_views();
    // Decisions wait until the monitor has a full window somewhere, as the paper's monitor does;
    // after that each GPU takes tasks once its own window is full.
    const bool all_filling = std::all_of(views.begin(), views.end(), [&](const GpuView& v) {
        const auto idx = static_cast<std::size_t>(v.index);
        return !windows_[idx].full() && !gpu_state_[idx].unhealthy;
    });
    if (all_filling) {
        pending_reason_ = "the GPU monitor is filling its first window";
        return launches;
    }
    if (now() < launch_backoff_until_) {
        return launches;  // the last launch failed for a reason of this machine: give it a moment
    }
    StepResult step = scheduler_.step(views, now());
    pending_reason_ = step.pending_reason;
    for (const Rejection& r : step.rejected) {
        auto t = store_->task(r.task);
        if (!t || !*t) {
            continue;
        }
        store::TaskRow row = **t;
        row.state = store::TaskState::Rejected;
        row.finished_at = unix_now();
        row.message = r.reason;
        if (auto u = store_->update_task(row); !u) {
            // Still queued in the store, so queued in the scheduler: rejected again next tick.
            spdlog::warn("task={}: cannot record its rejection: {}; will retry", row.id,
                         u.error().message);
            scheduler_.return_to_front(row.id, queued_spec(row), false);
            continue;
        }
        event(row.id, "rejected", r.reason);
        dependencies_due_ = true;
    }
    for (const Placement& p : step.placed) {
        if (auto l = prepare_launch(p)) {
            launches.push_back(std::move(*l));
        }
    }
    // Every task a round looked at and left waiting carries its own reason (carma); written
    // when it changes, a bounded number per tick.
    std::size_t written = 0;
    for (const Waiting& w : step.waiting) {
        if (written >= kWaitingReasonsPerTick || (step.pending_task && w.task == *step.pending_task)) {
            continue;
        }
        std::string& last = waiting_reasons_[w.task];
        if (last == w.reason) {
            continue;
        }
        if (auto t = store_->task(w.task); t && *t && !store::is_final((*t)->state)) {
            store::TaskRow row = **t;
            row.message = w.reason;
            if (store_->update_task(row)) {
                last = w.reason;
                ++written;
            }
        }
    }
    if (waiting_reasons_.size() > 4 * kWaitingReasonsPerTick + step.waiting.size()) {
        waiting_reasons_.clear();  // forget tasks that have left the queue
    }
    if (step.pending_task) {
        auto t = store_->task(*step.pending_task);
        if (t && *t && (*t)->message != step.pending_reason) {
            store::TaskRow row = **t;
            row.message = step.pending_reason;
            if (auto u = store_->update_task(row); !u) {
                // Only the message is lost; it is written again on the next tick.
                spdlog::debug("task={}: cannot record why it waits: {}", row.id,
                              u.error().message);
            }
        }
    }
    return launches;
}

// A placed task whose attempt could not be prepared or started for a reason of this machine
// (disk full, no fork, the shim missing) keeps its place at the front of its queue and is tried
// again; only a request that can never start (InvalidArgument) fails the task.
void Daemon::postpone_launch(const Placement& p, const std::string& why) {
    auto t = store_->task(p.task);
    TaskSpec spec;
    if (t && *t) {
        spec = queued_spec(**t);
        store::TaskRow row = **t;
        row.state = p.recovered ? store::TaskState::Recovering : store::TaskState::Queued;
        row.message = fmt::format("could not start an attempt ({}); it keeps its place and is "
                                  "tried again",
                                  why);
        if (auto r = store_->update_task(row); !r) {
            spdlog::warn("task={}: {}", p.task, r.error().message);
        }
    } else {
        // Cannot even read it: the store still says it waits, so a restart queues it again.
        spdlog::error("task={} was placed but cannot be read from the store: {}", p.task,
                      t ? "no such task" : t.error().message);
        scheduler_.task_exited(p.task);
        return;
    }
    scheduler_.return_to_front(p.task, std::move(spec), p.recovered);
    spdlog::warn("task={}: could not start an attempt: {}; will retry", p.task, why);
    launch_backoff_until_ = now() + kLaunchRetryPeriods;
}

// Records the attempt before anything starts: a restart then knows an attempt may exist (see
// restore()). Without that record nothing may start.
std::optional<Daemon::PreparedLaunch> Daemon::prepare_launch(const Placement& p) {
    auto t = store_->task(p.task);
    if (!t || !*t) {
        postpone_launch(p, t ? "not in the store" : t.error().message);
        return std::nullopt;
    }
    PreparedLaunch l;
    l.placement = p;
    l.task = **t;
    store::TaskRow& task = l.task;
    task.attempts += 1;
    LiveAttempt& live = l.live;
    live.task = task.id;
    live.number = task.attempts;
    live.gpus = p.gpus;
    live.learned = task.spec.learned;
    live.mps_user = mps_user_of(task, p.gpus, std::string());
    live.started_clock = now();
    live.time_limit_s = task.spec.time_limit_s;
    // All of a placement's GPUs are on one node (core/policy.h); on a node its agent makes the
    // attempt directory, named like this, under its own state directory.
    const std::string node = backend_->gpus()[static_cast<std::size_t>(p.gpus.front())].node;
    const std::string dir =
        node.empty() ? fmt::format("{}/attempts/{}/{}", config_.state_dir, task.id, live.number)
                     : cluster::attempt_name(task.id, live.number);
    std::error_code ec;
    if (node.empty()) {
        fs::create_directories(fs::path(dir).parent_path(), ec);
    }

    store::AttemptRow& attempt = l.attempt;
    attempt.node = node;
    attempt.slurm_job = hub_ && !node.empty() ? hub_->slurm_job(node) : "";
    attempt.task = task.id;
    attempt.number = live.number;
    attempt.gpus = p.gpus;
    attempt.dir = dir;
    attempt.started_at = unix_now();
    live.started_unix = attempt.started_at;
    attempt.recovered = p.recovered;
    task.state = store::TaskState::Running;
    task.message = fmt::format("running on GPU {}{}{}", fmt::join(p.gpus, ","),
                               node.empty() ? "" : " of node " + node,
                               p.exclusive ? "" : " (shared)");
    if (auto r = store_->begin_attempt(attempt, task); !r) {
        postpone_launch(p, r.error().message);
        return std::nullopt;
    }

    exec::LaunchRequest& req = l.request;
    req.argv = task.spec.command;
    req.workdir = task.workdir;
    req.env = task_environment(task, live, p);
    req.uid = task.uid;
    req.gid = task.gid;
    req.switch_user = ::geteuid() == 0 && task.uid != 0;
    if (req.switch_user) {
        req.groups = exec::supplementary_groups(task.user, task.gid);
    }
    req.attempt_dir = dir;
    req.kill_grace_s = config_.kill_grace_s;
    for (const device::TaskFile& f : backend_->task_files()) {
        req.files.push_back(exec::TaskFile{f.path, f.env});
    }
    return l;
}

void Daemon::complete_launch(PreparedLaunch l, Result<exec::LaunchHandle> handle) {
    const bool stop_requested = launching_[l.task.id];
    launching_.erase(l.task.id);
    const Placement& p = l.placement;
    store::TaskRow& task = l.task;
    store::AttemptRow& attempt = l.attempt;
    LiveAttempt& live = l.live;
    if (!handle) {
        attempt.ended_at = unix_now();
        attempt.outcome = "not-started";
        if (auto u = store_->update_attempt(attempt); !u) {
            spdlog::warn("task={}: {}", task.id, u.error().message);
        }
        if (stop_requested) {
            // Cancelled while it was being started, and it never started: nothing to retry.
            task.state = store::TaskState::Cancelled;
            task.finished_at = unix_now();
            task.message = "cancelled while it was being started; it did not start";
        } else if (handle.error().code != ErrorCode::InvalidArgument) {
            // Half-written attempt directories must not stand in the way of the next attempt.
            std::error_code ec;
            if (attempt.node.empty()) {
                fs::remove_all(attempt.dir, ec);
            }
            postpone_launch(p, handle.error().message);
            return;
        } else {
            task.state = store::TaskState::Failed;
            task.finished_at = unix_now();
            task.message = "could not launch: " + handle.error().message;
        }
        if (auto r = store_->update_task(task); !r) {
            spdlog::warn("task={}: {}", task.id, r.error().message);
        }
        scheduler_.task_exited(task.id);
        dependencies_due_ = true;
        event(task.id, std::string(store::to_string(task.state)), task.message);
        return;
    }
    live.handle = *handle;
    attempt.shim_pid = handle->shim_pid;
    attempt.dir = handle->attempt_dir;  // on a node: where its agent put it
    if (auto u = store_->update_attempt(attempt); !u) {
        // shim.pid in the attempt directory says the same; restore() reads it from there.
        spdlog::warn("task={}: cannot record its supervisor's pid: {}", task.id,
                     u.error().message);
    }
    if (stop_requested) {
        if (auto r = stop_attempt(live.handle); !r) {
            spdlog::warn("task={}: cannot stop it: {}", task.id, r.error().message);
        }
        live.stop_requested = true;
    }
    live_[task.id] = live;
    ++attempts_total_;
    event(task.id, "placed",
          fmt::format("attempt {} on GPU {}{}{}{}", live.number, fmt::join(p.gpus, ","),
                      attempt.node.empty() ? "" : " of node " + attempt.node,
                      p.exclusive ? " (idle)" : " (collocated)",
                      p.recovered ? ", recovered from out-of-memory" : ""));
}

}  // namespace carma::daemon
