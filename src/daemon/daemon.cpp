#include "daemon/daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/server.h"
#include "core/controls.h"
#include "core/host_port.h"
#include "core/text.h"
#include "device/backend_choice.h"
#include "exec/proc_tree.h"
#include "exec/self.h"
#include "model/interference.h"

namespace carma::daemon {

namespace fs = std::filesystem;

namespace {

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

// --- construction --------------------------------------------------------------------------------

Daemon::Daemon(DaemonConfig config, std::unique_ptr<device::GpuBackend> backend,
               std::unique_ptr<store::Store> store, SchedulerConfig scheduler_config, int lock_fd)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      store_(std::move(store)),
      submit_rate_(config_.limits),
      scheduler_(std::move(scheduler_config)),
      groups_(config_.groups_refresh_s),
      preemption_budget_(config_.preemption.max_stops_per_user,
                         config_.preemption.stops_window_s),
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

    // First, and said first: whether tasks here will be fenced (across nodes, each agent's
    // machine would fence its own; not yet).
    Fences fences;
    if (config.agents.empty()) {
        auto set_up = setup_fences(config.host, config.state_dir);
        if (!set_up) {
            return tl::unexpected(set_up.error());
        }
        fences = std::move(*set_up);
        spdlog::info("fences: {}{}", fences.describe(),
                     fences.detail.empty() ? "" : " (" + fences.detail + ")");
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
        ho.limits.max_authenticated_connections = config.agent_connections;
        ho.limits.max_connections_per_identity = config.agent_connections_per_node;
        ho.limits.head_timeout_s = config.agent_head_timeout_s;
        ho.limits.request_timeout_s = config.agent_request_timeout_s;
        ho.limits.max_threads = cluster::agent_port_threads(ho.limits);
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
    sc.carma.fair_share = config.fair_share;
    sc.carma.fair_share_weight = config.priority_weight_fairshare;
    sc.carma.age_weight = config.priority_weight_age;
    sc.limits = config.limits;
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
    // It learns between rounds (attempts that end, activities bound to families): the policy
    // keeps its predictions only while its version stays.
    use_correction(sc.placement, correction);

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

    std::optional<HostResources> host;
    if (!hub) {
        auto read = read_host_resources(config.host);
        if (!read) {
            return tl::unexpected(read.error());
        }
        host = std::move(*read);
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
    d->host_ = std::move(host);
    d->fences_ = std::move(fences);
    lock_guard.keep = true;
    if (auto r = d->load_usage(); !r) {
        return tl::unexpected(r.error());
    }
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

double Daemon::now() const { return (steady_now() - started_steady_) * config_.time_scale; }

double Daemon::clock_of(double unix_time) const {
    return now() - std::max(0.0, unix_now() - unix_time) * config_.time_scale;
}

void Daemon::event(TaskId task, const std::string& kind, const std::string& message) {
    if (auto r = record_event(task, kind, message); !r) {
        spdlog::warn("cannot record event {} of task {}: {}", kind, task, r.error().message);
    }
}

Result<void> Daemon::record_event(TaskId task, const std::string& kind,
                                  const std::string& message) {
    store::EventRow e;
    e.task = task;
    e.kind = kind;
    e.message = message;
    return record_events({std::move(e)});
}

Result<void> Daemon::record_events(std::vector<store::EventRow> events) {
    const double time = unix_now();
    for (store::EventRow& e : events) {
        e.time = time;
        if (e.task != 0) {
            spdlog::info("task={} {}: {}", e.task, e.kind, e.message);
        }
        // An event says what happened; a 20 KB argument repeated in 10,000 of them says nothing
        // more and fills the disk (the task's own row keeps the whole command).
        e.message = shortened(e.message, kMaxEventBytes);
    }
    if (events.size() == 1) {
        if (auto added = store_->add_event(events.front()); !added) {
            return tl::unexpected(added.error());
        }
        return {};
    }
    return store_->add_events(events);
}

// --- the loop ---------------------------------------------------------------------------------

void Daemon::run(const std::atomic<bool>& stop, std::atomic<bool>* reload,
                 std::function<Result<DaemonConfig>()> reread) {
    const auto period = std::chrono::duration<double>(1.0 / config_.time_scale);
    {
        std::lock_guard lock(mu_);
        loop_lag_ = LoopLag(period.count());
    }
    auto next = std::chrono::steady_clock::now();
    const auto reload_asked = [&] { return reload != nullptr && reload->load(); };
    while (!stop.load()) {
        if (reload != nullptr && reload->exchange(false)) {
            reload_from(reread);  // here, between ticks: never inside the signal handler
        }
        tick();
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
        const auto now_tp = std::chrono::steady_clock::now();
        note_loop_period(std::chrono::duration<double>(now_tp - next).count());
        if (next < now_tp) {
            next = now_tp;  // fell behind: do not try to catch up with a burst of ticks
        }
        // Sleep in short slices so a stop request is honoured promptly.
        while (!stop.load() && !reload_asked() && std::chrono::steady_clock::now() < next) {
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
    for (auto& [id, live] : live_) {
        if (live.charge_changed) {
            (void)store_->set_attempt_charge(id, live.number, live.charged_gpu_s);
        }
    }
    save_usage();
    event(0, "daemon-stopped",
          fmt::format("{} attempt(s) left running under their supervisors", live_.size()));
}

void Daemon::note_loop_period(double overrun_s) {
    constexpr double kWarnEveryS = 60;
    std::lock_guard lock(mu_);
    loop_lag_.record(overrun_s);
    if (!loop_lag_.behind() || steady_now() - last_lag_warning_ < kWarnEveryS) {
        return;
    }
    last_lag_warning_ = steady_now();
    spdlog::warn(
        "the daemon falls behind its period at time scale {}: {:.0f} % of its last periods "
        "({:.3g} ms each) ended half a period or more late, the worst by {:.1f} periods; samples, "
        "scheduling rounds and warm-up checks come less often than the scaled clock assumes, so "
        "a replay loses fidelity against `carma simulate`: use a lower time scale",
        config_.time_scale, 100 * loop_lag_.recent_late_share(), loop_lag_.period_s() * 1000,
        loop_lag_.worst_late_periods());
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
        charge_usage();       // before accumulate_energy, which clears the activity it reads
        accumulate_energy();  // before collect_exits: an attempt's last interval is its own
        collect_exits();
        enforce_time_limits();
        restop_preempted();
        resolve_dependencies();
        release_throttled();
        launches = decide();
        for (const PreparedLaunch& l : launches) {
            launching_[l.task.id] = false;
        }
        // Before the new attempts start: none may find its own cores still shared.
        reshape_shared_cores();
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

}  // namespace carma::daemon
