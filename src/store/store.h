#pragma once
// SQLite persistence of the daemon (WAL mode): tasks, attempts, events and downsampled GPU
// samples. The schema carries PRAGMA user_version; opening a database with a newer schema than
// this build knows is refused, older ones are migrated forward. Every write is one transaction,
// so a crash never leaves half a submission.

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/history.h"
#include "store/records.h"

namespace carma::store {

inline constexpr int kSchemaVersion = 10;

class Store {
public:
    // Opens (creating if needed) the database file; errors name the path. A damaged database
    // (PRAGMA quick_check) is refused with how to restore it, never served. A file of an older
    // schema is first copied to `path`.schema-N (N its version; an existing copy is kept), which
    // the carma that wrote it can still open; a newer one is refused and left as it is.
    static Result<std::unique_ptr<Store>> open(const std::string& path);

    // A consistent copy of `source` into `destination` with SQLite's online backup, safe while a
    // daemon writes to it; the copy is created 0600. Errors name both files.
    static Result<void> backup(const std::string& source, const std::string& destination);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // Assigns the id (monotonic, never reused) and stores the row; returns the id.
    Result<TaskId> insert_task(const TaskRow& task);
    // One task per index, all or none (one transaction): `--array`. Each member's spec.array
    // carries the array's id (its first member's) and its index; returns the ids in order.
    Result<std::vector<TaskId>> insert_array(const TaskRow& task, std::span<const int> indices);
    Result<void> update_task(const TaskRow& task);  // every mutable field by id
    // What was learned of tasks that still wait (queued, recovering, held), in one transaction;
    // a task that started or ended meanwhile keeps its row as it is. Only spec.learned changes,
    // so it may run beside the daemon's own writes of the same rows. Returns the rows changed.
    Result<int> set_learned_if_waiting(std::span<const std::pair<TaskId, Learned>> learned);
    Result<std::optional<TaskRow>> task(TaskId id);
    // Tasks in id order; `include_final` false leaves out succeeded/failed/cancelled/lost/rejected.
    // A page: ids above `after`, at most `limit` (0: all).
    Result<std::vector<TaskRow>> tasks(bool include_final, TaskId after = 0,
                                       std::size_t limit = 0);
    // These tasks (those that exist), in id order, without their environments.
    Result<std::vector<TaskRow>> tasks_by_id(std::span<const TaskId> ids);
    // The members of the array whose id is `array_id`, in index order; empty when there is no
    // such array (also when `array_id` is a task outside any array).
    Result<std::vector<ArrayMemberRow>> array_members(TaskId array_id);
    // The first `limit` ids of tasks in this state (0: all).
    Result<std::vector<TaskId>> ids_in_state(TaskState state, std::size_t limit);
    // How many tasks of this user wait (queued, recovering, held): the per-user limit.
    Result<std::size_t> waiting_count(uid_t uid);
    // Live tasks counted by owner and state (the live view's summary of the queue).
    Result<std::vector<StateCount>> live_counts();
    // Every task counted by state (/metrics).
    Result<std::map<TaskState, std::size_t>> state_counts();
    // The tasks that wait (queued, recovering, held) in id order, without their environments
    // (left empty: not needed to plan, and the bulk of a row); a page: ids above `after`, at
    // most `limit` (0: all).
    Result<std::vector<TaskRow>> waiting_tasks_without_env(TaskId after = 0,
                                                           std::size_t limit = 0);

    Result<void> insert_attempt(const AttemptRow& attempt);
    Result<void> update_attempt(const AttemptRow& attempt);  // by (task, number)
    // An attempt and its task in one transaction, so a daemon killed in between cannot leave a
    // task whose attempt count and attempts disagree (begin) or an ended attempt of a task still
    // running (end, which restore() would re-queue and so run twice).
    Result<void> begin_attempt(const AttemptRow& attempt, const TaskRow& task);  // insert + update
    Result<void> end_attempt(const AttemptRow& attempt, const TaskRow& task);    // update + update
    // Only the per-GPU peak memory of a running attempt (written while it grows).
    Result<void> set_attempt_peak(TaskId task, int number, const std::map<int, MiB>& peak_mib);
    // Only the energy attributed so far to a running attempt (written while it runs, so that a
    // restarted daemon goes on from it).
    Result<void> set_attempt_energy(TaskId task, int number, double energy_j);
    Result<std::vector<AttemptRow>> attempts(TaskId task);
    // Attempts without an end: what a restarted daemon must find again.
    Result<std::vector<AttemptRow>> open_attempts();
    // Per task, when its latest attempt started (tasks never started are absent): one query
    // for a whole page of a listing.
    Result<std::map<TaskId, double>> latest_attempt_starts(std::span<const TaskId> ids);

    Result<std::int64_t> add_event(const EventRow& event);  // assigns id
    Result<void> add_events(std::span<const EventRow> events);  // in one transaction
    // Events with id > after_id, oldest first, at most `limit`; task 0 = all tasks.
    Result<std::vector<EventRow>> events(std::int64_t after_id, TaskId task, int limit);
    // The newest event of `task` whose kind is one of `kinds` and whose message begins with
    // `message_prefix` ("": any), however many events the task has; none when it has none.
    Result<std::optional<EventRow>> last_event(TaskId task, std::span<const std::string> kinds,
                                               std::string_view message_prefix = "");
    // Every event of one of `kinds` at `since` (unix seconds) or later, oldest first, at most
    // `limit`.
    Result<std::vector<EventRow>> events_since(double since, std::span<const std::string> kinds,
                                               int limit);

    // Finished tasks with their attempts, for accounting (`carma acct`), in id order, a page
    // at a time (FinishedQuery::after, limit). Without environments.
    Result<std::vector<FinishedTask>> finished_tasks(const FinishedQuery& query);
    // Every task waiting or running at some moment of [since, until] (submitted by `until`, not
    // finished before `since`) with its attempts, in id order, a page at a time: the
    // timeline's tasks. Without environments.
    Result<std::vector<FinishedTask>> tasks_between(const SpanQuery& query);
    // The `limit` tasks that finished last (newest first) with their attempts.
    Result<std::vector<FinishedTask>> recently_finished(int limit);

    Result<void> add_gpu_samples(const std::vector<GpuSampleRow>& samples);
    // Drops GPU samples and events older than `before` (unix seconds), and the tasks in a final
    // state that finished before it with their attempts (accounting keeps as long as events);
    // returns how many rows. Tasks still waiting or running are kept however old, and so is the
    // history (store/history.h), which is knowledge about commands rather than a record.
    Result<std::int64_t> prune_history(double before);
    Result<std::vector<GpuSampleRow>> gpu_samples(double since, int gpu /* -1 = all */);
    // The samples of [since, until] in `buckets` equal slices per GPU, one row per GPU and
    // non-empty slice: its first sample's time and the largest of each reading.
    Result<std::vector<GpuSampleRow>> gpu_sample_buckets(double since, double until, int buckets);

    // History (store/history.h): one row per attempt that ran, kept per command.
    Result<void> add_history(const HistoryRow& row, const HistoryLimits& limits = {});
    // The newest `newest` rows of the command, oldest first.
    Result<std::vector<HistoryRow>> command_history(const std::string& fingerprint, int newest);
    // The newest `newest` rows of the family from other commands than `fingerprint`, oldest
    // first.
    Result<std::vector<HistoryRow>> family_history(const std::string& family,
                                                   const std::string& fingerprint, int newest);

    // Every speed factor the history holds (core/speed_correction.h), oldest first.
    Result<std::vector<SpeedFactorRow>> speed_factors();

    // Fair share's ledger (core/fair_share.h UsageLedger): per user, decayed GPU-seconds as of a
    // unix time. save_usage replaces every row in one transaction.
    Result<std::map<std::string, UsageRow>> usage();
    Result<void> save_usage(const std::map<std::string, UsageRow>& rows);
    // Only the charge of a running attempt (written while it runs, so a restart goes on from it).
    Result<void> set_attempt_charge(TaskId task, int number, double charged_gpu_s);

    int schema_version() const;

private:
    struct Impl;
    explicit Store(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace carma::store
