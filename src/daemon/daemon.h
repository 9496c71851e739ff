#pragma once
// The composition root of `carma serve`: wires the GPU backend, the store, the launcher and the
// API to the same Scheduler::step the simulator runs, on the real clock.
//
// The loop, one tick per period (tick() in daemon.cpp):
//   read the GPUs and the process table, without the lock;
//   re-learn a page of waiting tasks from new history            daemon_history.cpp
//   under the lock:
//     samples into the monitor windows, GPU health, sightings    daemon_sampling.cpp
//     activity, sharing, energy of each live attempt             daemon_history.cpp, _acct.cpp
//     exits collected and recorded, tasks retried or requeued    daemon_exits.cpp
//     time limits, dependencies                                  daemon_controls.cpp
//     the scheduler decides; each launch is written to the store daemon_launch.cpp
//     a round that left a task waiting may preempt for fair share daemon_preempt.cpp
//   attempts started without the lock, then completed under it   daemon_launch.cpp
// Beside it: restore() at start (daemon_restore.cpp); the API's answers (daemon_api.cpp maps
// them: daemon_submit, _tasks, _status, _nodes, _controls, _view, _acct.cpp); and the pure rules
// they use (gpu_health.h, task_environment.h, attempt_end.h, live_attempt.h, foreign.h,
// task_json.h, view_json.h).
//
// Threads: the API server's handler threads and the scheduler loop share one mutex around the
// daemon's mutable state (scheduler queues, metric windows, live attempts); the store has its own.
// What may be slow is done without it, so the API stays responsive: reading the GPUs and the
// process table before a tick's decisions, and starting attempts (fork/exec of the supervisor and
// the wait for the task's start) after them.
// Restart safety: every state change is written to the store before it is acted on, attempts run
// under detached supervisors (exec/launch.h), and on start the daemon re-queues waiting tasks and
// re-attaches to live attempts, recording exits that happened while it was away.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/service.h"
#include "cluster/hub.h"
#include "core/array_throttle.h"
#include "core/fair_share.h"
#include "core/fingerprint.h"
#include "core/group_memberships.h"
#include "core/histogram.h"
#include "core/knowledge.h"
#include "core/loop_lag.h"
#include "core/metric_window.h"
#include "core/preemption_budget.h"
#include "core/python_env.h"
#include "core/scheduler.h"
#include "core/speed_correction.h"
#include "core/user_limits.h"
#include "daemon/config.h"
#include "daemon/fences.h"
#include "daemon/foreign.h"
#include "daemon/host_state.h"
#include "daemon/live_attempt.h"
#include "daemon/preemption_events.h"
#include "device/gpu_backend.h"
#include "exec/clock.h"
#include "exec/launch.h"
#include "exec/mps.h"
#include "exec/proc_tree.h"
#include "store/store.h"

namespace carma::daemon {

// The wall clock (what the store records) and the steady clock (limits, back-offs).
using exec::steady_now;
using exec::unix_now;

// Events keep at most this much of their message.
inline constexpr std::size_t kMaxEventBytes = 1000;
// Why no round decides yet after a start (Daemon::decide), and a new task's reason meanwhile.
inline constexpr const char* kFillingFirstWindow = "the GPU monitor is filling its first window";
// Waiting tasks re-learned per step of a pass (Daemon::relearn_waiting).
inline constexpr std::size_t kRelearnPage = 2000;

// How the daemon weighs what it knows of tasks (core/knowledge.h): one place for submit,
// restore, recovery and POST /v1/estimate.
KnowledgeConfig knowledge_config();

// Whether two sets of learned figures plan alike (every field equal).
bool same_learned(const Learned& a, const Learned& b);

// What a reload did (Daemon::reload): each changed key as "key: old -> new", applied or needing
// a restart, and the warnings the new configuration deserves (config_check.h).
struct ReloadOutcome {
    std::vector<std::string> changed;
    std::vector<std::string> need_restart;
    std::vector<std::string> warnings;
};

class Daemon final : public api::Service {
public:
    // Opens the state directory, the store and the GPU backend, and restores what the store
    // holds. Errors name what failed and how to fix it.
    static Result<std::unique_ptr<Daemon>> create(const DaemonConfig& config);
    ~Daemon() override;

    // Runs the scheduler loop until `stop` becomes true. Whenever `reload` is found true (a
    // SIGHUP's handler sets it), it is cleared and, between two ticks, the configuration
    // `reread` gives is applied by reload_from().
    void run(const std::atomic<bool>& stop, std::atomic<bool>* reload = nullptr,
             std::function<Result<DaemonConfig>()> reread = {});
    // Applies what may change live of `next` (the file and flags read again; daemon_reload.cpp)
    // and names what needs a restart; a configuration with errors is refused and nothing
    // changes. Takes the locks itself: call it from the loop's thread, between ticks.
    Result<ReloadOutcome> reload(DaemonConfig next);
    // reload() of what `reread` gives, its outcome logged and recorded as an event.
    void reload_from(const std::function<Result<DaemonConfig>()>& reread);
    // One loop iteration (sampling, exits, decisions, launches); public for tests.
    void tick();
    // One period of the loop ended `overrun_s` after the next was due: counted, and logged at
    // most once a minute while the loop is behind.
    void note_loop_period(double overrun_s);

    const DaemonConfig& config() const { return config_; }
    std::string backend_name() const { return backend_->name(); }
    std::string fences_text() const { return fences_.describe(); }

    // api::Service
    api::ApiResult<nlohmann::json> submit(const api::Caller& caller,
                                          const nlohmann::json& body) override;
    api::ApiResult<std::string> list_tasks(const api::Caller& caller,
                                           const api::TaskListQuery& query) override;
    api::ApiResult<std::int64_t> array_member(const api::Caller& caller, std::int64_t array_id,
                                              int index) override;
    api::ApiResult<nlohmann::json> show_task(const api::Caller& caller, std::int64_t id) override;
    api::ApiResult<nlohmann::json> cancel_task(const api::Caller& caller, std::int64_t id) override;
    api::ApiResult<nlohmann::json> hold_task(const api::Caller& caller, std::int64_t id,
                                             bool hold) override;
    api::ApiResult<api::LogSlice> task_logs(const api::Caller& caller, std::int64_t id,
                                            bool stderr_stream, int attempt,
                                            std::uint64_t offset) override;
    api::ApiResult<nlohmann::json> gpus(const api::Caller& caller) override;
    api::ApiResult<nlohmann::json> events(const api::Caller& caller, std::int64_t after,
                                          std::int64_t task, int limit) override;
    api::ApiResult<nlohmann::json> status(const api::Caller& caller) override;
    std::string metrics() override;
    api::ApiResult<void> admit(const api::Caller& caller) override;
    api::ApiResult<nlohmann::json> estimate(const api::Caller& caller,
                                            const nlohmann::json& body) override;
    api::ApiResult<std::string> acct(const api::Caller& caller,
                                     const api::AcctQuery& query) override;
    api::ApiResult<nlohmann::json> view(const api::Caller& caller) override;
    api::ApiResult<nlohmann::json> timeline(const api::Caller& caller,
                                            const api::TimelineQuery& query) override;
    api::ApiResult<nlohmann::json> nodes(const api::Caller& caller) override;
    api::ApiResult<nlohmann::json> share(const api::Caller& caller) override;
    api::ApiResult<nlohmann::json> declare_node_lost(const api::Caller& caller,
                                                     const nlohmann::json& body) override;
    api::ApiResult<nlohmann::json> drain_nodes(const api::Caller& caller,
                                               const nlohmann::json& body) override;

private:
    Daemon(DaemonConfig config, std::unique_ptr<device::GpuBackend> backend,
           std::unique_ptr<store::Store> store, SchedulerConfig scheduler_config, int lock_fd);

    // An attempt recorded in the store and ready to start; started without the lock.
    struct PreparedLaunch {
        Placement placement;
        store::TaskRow task;
        store::AttemptRow attempt;
        LiveAttempt live;
        exec::LaunchRequest request;
    };

    Result<void> restore();
    double now() const;  // scheduler clock: seconds since start x time_scale
    double clock_of(double unix_time) const;  // a past unix time on the scheduler clock
    void apply_samples(Result<std::vector<device::GpuSample>> samples);
    void note_missing_sample(std::size_t gpu, const std::string& why);
    void notice_sightings(const std::vector<exec::ProcEntry>& table);
    // The processes on each GPU that no live attempt owns (`ours`: all their processes).
    void notice_foreign(const std::set<pid_t>& ours);
    std::vector<GpuView> gpu_views() const;
    std::string schedulable_reason(std::size_t gpu) const;  // empty when it may take tasks
    void collect_exits();
    // An attempt that was recorded but never ran (the daemon died while launching it): ended
    // `not-started`, and its task queued again (recovery queue if it was a recovery) with its
    // turn; `why` goes into the task's message.
    Result<void> requeue_not_started(store::TaskRow& task, store::AttemptRow& attempt,
                                     const std::string& why);
    // A restored remote launch its node does not know (LiveAttempt::launch_unconfirmed).
    Result<void> requeue_unreceived(const LiveAttempt& live);
    // Fails when the end could not be stored; the attempt then stays live and is tried again.
    // `stderr_tail` classifies the end (out of memory?); `node_lost`: its node's allocation is
    // gone, so it is recorded as lost and its task queued again.
    Result<void> finish_attempt(const LiveAttempt& live, const exec::ExitRecord* record,
                                const std::string& stderr_tail, bool node_lost = false);
    // Where attempts run (cluster/hub.h): here, or on a node's agent when the handle names one.
    Result<exec::LaunchHandle> start_attempt(const PreparedLaunch& launch);
    Result<void> stop_attempt(const exec::LaunchHandle& handle);
    // The task's processes now, in the pid space of the machine it runs on.
    std::set<pid_t> attempt_members(const LiveAttempt& live,
                                     const std::vector<exec::ProcEntry>& table) const;
    // Cluster mode: GPUs of nodes that registered since the last tick join the windows.
    void grow_gpus();
    std::vector<PreparedLaunch> decide();
    std::optional<PreparedLaunch> prepare_launch(const Placement& placement);
    void complete_launch(PreparedLaunch launch, Result<exec::LaunchHandle> handle);
    void postpone_launch(const Placement& placement, const std::string& why);
    void event(TaskId task, const std::string& kind, const std::string& message);
    // The same, saying whether the store kept it (event() only logs when it did not).
    Result<void> record_event(TaskId task, const std::string& kind, const std::string& message);
    // Several (task, kind and message of each), in one transaction: all kept or none.
    Result<void> record_events(std::vector<store::EventRow> events);
    // History and knowledge (store/history.h, core/knowledge.h).
    void accumulate_activity();
    // Each tick, under the lock: how long each attempt has shared its GPUs and what the raw
    // predictor said of it meanwhile, from the learned activities of the attempts beside it.
    void accumulate_sharing();
    // The correction learns which family a waiting task's learned activity is
    // (SpeedCorrection::bind); under the lock.
    void bind_correction(const store::TaskRow& task) const;
    // The predictor's error the attempt shows, into `row` and the correction (record_history).
    void learn_speed_error(const store::TaskRow& task, const TaskFingerprint& fp,
                           const LiveAttempt& live, store::HistoryRow& row);
    // The correction's figures for a family (POST /v1/estimate), under the lock.
    nlohmann::json correction_json(const std::string& family);
    // Shares each GPU's energy since its last sample among the attempts on it (accounting).
    void accumulate_energy();
    // Fair share (daemon_share.cpp): charges the live attempts for what they took of their GPUs
    // since the last tick (before accumulate_energy clears their activity), tells the scheduler
    // every user's factor and running use before a round, and loads and saves the ledger.
    void charge_usage();
    // A succeeded attempt's slowdown: 1 when it ran alone, else its run time over its command's
    // solo run time in the history (unknown without one). What --max-slowdown is held to.
    std::optional<double> observed_slowdown(const store::TaskRow& task,
                                            const store::AttemptRow& attempt,
                                            const LiveAttempt& live);
    void stand_users();
    void look_up_groups(const std::set<std::string>& users);
    // GPUs' worth each user's live attempts are charged per second now: what the last charge
    // measured, or, for an attempt with nothing measured yet (starting, or processes CARMA
    // cannot see), what it is expected to be charged.
    ChargeRates charge_rates() const;
    // GPUs' worth one attempt is charged per second now, by the same rule (placed attempts not
    // yet live included).
    double charge_rate_of(const LiveAttempt& live) const;
    // What a CPU-only attempt pays per second: its cores at host.cpu_billing_weight.
    double cpu_charge_rate(const LiveAttempt& live) const;
    // Each user's row of GET /v1/share, for everyone with usage, running attempts or tasks
    // waiting (`counts`: the store's live counts); the page and `carma top` show the same.
    std::map<std::string, nlohmann::json> share_rows(const std::vector<store::StateCount>& counts);
    // Fails when the stored usage cannot be read: started on none, the next save would erase it.
    Result<void> load_usage();
    void save_usage();
    void record_history(const store::TaskRow& task, const store::AttemptRow& attempt,
                        const LiveAttempt& live);
    // The knowledge rule over the task's history; without history when the store cannot be read.
    Learned learn(const store::TaskRow& task);
    // Fingerprints whose history grew since waiting tasks last learned (record_history adds).
    struct Lessons {
        std::set<std::string> exact;
        std::set<std::string> family;
        bool empty() const { return exact.empty() && family.empty(); }
    };
    // A pass of re-learning through the waiting tasks, a page at a time, in id order.
    struct RelearnPass {
        Lessons lessons;
        TaskId after = 0;  // the page after this id is next
    };
    // Outside the lock (reads and writes only the store): what the next page of the pass's
    // waiting tasks of those fingerprints knows now, where it changed, recorded in their rows
    // and added to `changed`, which the caller hands to the scheduler under the lock. Returns
    // where the pass goes on, or nothing once it is through. `families` gets each changed
    // task's family, in the order of `changed`, for the speed correction to bind under the lock.
    std::optional<TaskId> relearn_waiting(const RelearnPass& pass,
                                          std::vector<std::pair<TaskId, Learned>>& changed,
                                          std::vector<std::string>& families);
    api::ApiResult<store::TaskRow> load_task(std::int64_t id);
    // Scheduling controls (daemon_controls.cpp).
    // Every dependency must name an existing task or array member; the error says which does
    // not. Returns them with a plain array id made the whole array, as Slurm reads it, and
    // singleton made afterany on every unfinished task of `task`'s owner and name (refused for
    // an array, whose members would not wait for each other).
    api::ApiResult<std::vector<Dependency>> check_dependencies(std::vector<Dependency> deps,
                                                               const store::TaskRow& task,
                                                               bool is_array);
    // What the tasks a dependency names mean for it now; `never` says why when it can never
    // hold. Nothing when the store cannot be read (looked at again later).
    std::optional<DependencyJudgement> judge(const Dependency& dependency, std::string& never);
    // A queued task goes to the scheduler, or waits in blocked_ while a dependency is unmet.
    void admit_to_queue(const store::TaskRow& task);
    // A queued task free of dependencies: to the scheduler, or into throttled_ when its array
    // runs at most N members at once (--array=...%N).
    void enqueue_free(const store::TaskRow& task);
    // Lets throttled members into the scheduler as their arrays' running members end
    // (core/array_throttle.h).
    void release_throttled();
    // Forgets a throttled member (cancelled, held); true if it was one.
    bool drop_throttled(TaskId id);
    // Blocked tasks whose dependencies all hold are queued; those with one that can never hold
    // fail with the reason.
    void resolve_dependencies();
    // --mail-type (daemon_mail.cpp): refused without a local sendmail; the submitter by default.
    api::ApiResult<void> check_mail(const api::Caller& caller, TaskSpec& spec) const;
    enum class MailMoment { Began, Relaunched, Ended };
    // Mails what happened to the task now, if its --mail-type asks for it.
    void mail_about(const store::TaskRow& task, MailMoment moment);
    // Attempts past their task's time limit are asked to stop (SIGTERM, then SIGKILL).
    void enforce_time_limits();
    // Fair-share preemption (daemon_preempt.cpp, core/preemption.h): after a round that left
    // `head` waiting, stop the --requeue attempt the rule chooses, if any. `views`: the GPUs the
    // round saw; `placed`: the attempts it placed, not yet live.
    void maybe_preempt(TaskId head, const std::vector<GpuView>& views,
                       std::span<const LiveAttempt> placed);
    bool preempting_now() const;
    // Sends the stop again to a preempted attempt it has not reached (a failed send; after a
    // restart, since a node's queued stop died with the daemon).
    void restop_preempted();
    // Whether `carma` would start `head` with attempt `victim` gone (core/carma_probe.h).
    bool head_would_start_without(const TaskSpec& head, TaskId victim,
                                  std::vector<GpuView> views) const;
    // After a restart, what the events say of preemption (preemption_events.h): each user's
    // stops within the window, and the stop a waiting task already had made for it (so that it
    // stops no second one, and is charged if it is cancelled).
    void restore_preemption_budget();
    void restore_room_made(const store::TaskRow& task);
    // A waiting task ended or was held without starting (`how`: "cancelled", "held",
    // "rejected"): a stop made for it was wasted, and its owner is charged what it cost.
    void forfeit_room(TaskId head, const char* how);
    // When the task's last attempt ended preempted (unix seconds), if it did.
    std::optional<double> preempted_at(const store::TaskRow& task);
    // The submission's task, with the checks that need this server (GPUs, paths as the
    // submitter); `parsed` is task_from_submission's.
    api::ApiResult<store::TaskRow> parse_submission(const api::Caller& caller,
                                                    store::TaskRow parsed);
    nlohmann::json task_json(const store::TaskRow& task, bool with_attempts);
    // A GPU's health for the view and GET /v1/gpus (daemon_status.cpp), under mu_.
    nlohmann::json gpu_health_json(std::size_t gpu) const;
    // GET /v1/gpus's list, under mu_; the view reshapes it.
    nlohmann::json gpus_json();
    // The attempt's environment (daemon/task_environment.h), from its account, GPUs and MPS.
    EnvList attempt_environment(const store::TaskRow& task, const LiveAttempt& live,
                                const Placement& placement);
    // The task's spec as the scheduler gets it: with mps_user set where it will be an MPS
    // client (core/mps_share.h).
    TaskSpec queued_spec(const store::TaskRow& task) const;
    // The owner of an attempt on `gpus` that will be a client of a GPU's control daemon; "" else.
    std::string mps_user_of(const store::TaskRow& task, const std::vector<int>& gpus,
                            const std::string& node) const;

    DaemonConfig config_;
    std::unique_ptr<device::GpuBackend> backend_;
    std::unique_ptr<store::Store> store_;
    // Per-user submission rates (config_.limits), under their own lock: checked before anything
    // else a submission costs, without the daemon's lock.
    std::mutex limits_mu_;
    SubmitRate submit_rate_;
    // Tasks whose attempt runs on a node that is unreachable (outside Slurm, silent past the
    // node timeout), with that node: what they do is not known.
    std::map<TaskId, std::string> tasks_on_unreachable_nodes();
    void mark_unknown(nlohmann::json& task, const std::map<TaskId, std::string>& unknown) const;

    std::mutex mu_;  // guards everything below
    // The slowdown predictor as the device model gives it, and the correction the `carma`
    // policy's predictor applies to it, learned from attempts' ends (record_history) and loaded
    // from the history at start.
    SpeedPredictor raw_predict_;
    std::shared_ptr<SpeedCorrection> correction_;
    Scheduler scheduler_;
    std::vector<MetricWindow> windows_;
    std::vector<GpuState> gpu_state_;  // by GPU index, like windows_
    std::vector<device::GpuSample> last_samples_;
    // By GPU index: its energy counter at its last good sample (accumulate_energy).
    std::vector<std::optional<double>> energy_seen_;
    std::map<TaskId, LiveAttempt> live_;
    // Fair share (daemon_share.cpp): the usage ledger on the scheduler clock, loaded from the
    // store at start and written back every few ticks; each user's Unix groups (for "@group"
    // shares), looked up again once groups_refresh old on the real clock (steady_now).
    UsageLedger ledger_;
    GroupMemberships groups_;
    // Attempts being started right now, outside the lock; true once a stop was requested.
    std::map<TaskId, bool> launching_;
    std::string pending_reason_;
    std::map<TaskId, std::string> waiting_reasons_;  // last reason written per waiting task
    // Queued tasks kept from the scheduler until their dependencies succeed (--after).
    std::set<TaskId> blocked_;
    // Fair-share preemption priced by user (core/preemption_budget.h), on the scheduler clock:
    // each user's stops within the window, and the waiting tasks an attempt was stopped for
    // (one each, until they start), with what the stop cost.
    PreemptionBudget preemption_budget_;
    // Waiting tasks told that their user's stops are spent (one event each).
    std::set<TaskId> told_budget_spent_;
    Lessons lessons_;  // history recorded since the pass under way began
    std::optional<RelearnPass> relearn_;  // the pass under way
    double last_relearn_ = -1e18;  // steady_now() of the last relearn_waiting
    bool dependencies_due_ = false;  // a task ended since blocked_ was last looked at
    // Queued members of throttled arrays kept from the scheduler, by array id; throttle_due_: a
    // task ended or was held since they were last looked at.
    struct Throttled {
        int max_running = 0;
        std::vector<HeldMember> held;
    };
    std::map<TaskId, Throttled> throttled_;
    bool throttle_due_ = false;
    std::uint64_t ticks_ = 0;
    // How far the loop falls behind its period (1 / time_scale s), for the log and /v1/status.
    LoopLag loop_lag_{1.0};
    double last_lag_warning_ = -1e18;  // steady_now() of the last "falls behind" line
    // Since the daemon started, for /metrics: attempts started, out-of-memory ends (all and per
    // GPU index), each task's wait from submission to its first attempt, each attempt's run.
    std::uint64_t oom_total_ = 0;
    std::map<int, std::uint64_t> oom_by_gpu_;
    std::uint64_t attempts_total_ = 0;
    Histogram wait_seconds_{duration_buckets_s()};
    Histogram run_seconds_{duration_buckets_s()};
    double started_steady_ = 0;
    int lock_fd_ = -1;  // holds the state directory's lock for the daemon's lifetime
    // --mps: each GPU's MPS control daemon, by GPU index; and a pipe directory where none runs,
    // for tasks on several GPUs (a process reaches one control daemon: they run outside MPS).
    std::map<int, exec::MpsDaemon> mps_;
    std::string mps_off_dir_;
    // Cluster mode (--agents): the nodes' agents report here; backend_ is hub_backend_.
    std::shared_ptr<cluster::Hub> hub_;
    // This server's cores and host memory for tasks (none in cluster mode: the agents' nodes
    // are not counted yet), and what attempts being launched hold of them (not yet in live_).
    std::optional<HostResources> host_;
    Fences fences_;  // the cgroups attempts on this server run in (none: `fences: off`)
    std::map<TaskId, HeldHost> launching_host_;
    // What every live or launching attempt holds, and the server as the scheduler sees it.
    std::vector<HeldHost> held_host() const;
    std::vector<HostView> host_views() const;
    // Attempts on the shared cores follow them as tasks take and give back cores of their own.
    void reshape_shared_cores();
    // GET /v1/status's and /v1/gpus's "host": the fences and what tasks hold; under mu_.
    nlohmann::json host_json() const;
    cluster::HubBackend* hub_backend_ = nullptr;
    double launch_backoff_until_ = 0;     // scheduler clock; see postpone_launch()
};

}  // namespace carma::daemon
