#pragma once
// What the daemon keeps about tasks, attempts and events. Stored in SQLite (store.h); times are
// unix seconds (UTC) as doubles.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/fingerprint.h"
#include "core/task.h"

namespace carma::store {

enum class TaskState {
    Queued,      // waiting in the main queue
    Recovering,  // waiting in the recovery queue after an out-of-memory attempt
    Running,     // an attempt is live (starting or running)
    Succeeded,
    Failed,
    Cancelled,
    Lost,        // the attempt vanished (supervisor gone, no exit record)
    Rejected,    // could never fit (kept for the record; rejected submissions get an error)
    Held,        // kept out of the queues until `carma release`
    Timeout,     // its attempt was stopped at the task's time limit
};

std::string_view to_string(TaskState s);
std::optional<TaskState> parse_task_state(std::string_view s);
bool is_final(TaskState s);
// Waiting for a GPU, in a queue or kept out of it: queued, recovering, held.
bool is_waiting(TaskState s);
// Every state in declaration order (for queries that must name all final or all live states).
std::span<const TaskState> all_task_states();

struct TaskRow {
    TaskId id = 0;
    TaskSpec spec;               // name, command, gpus, memory, workload
    uid_t uid = 0;
    gid_t gid = 0;
    std::string user;            // login name at submit time
    std::string workdir;
    // What the submitter gave: its explicit variables (TaskSpec::explicit_env) and what it
    // exported of its shell's; never the daemon's own.
    std::vector<std::pair<std::string, std::string>> env;
    TaskState state = TaskState::Queued;
    int attempts = 0;
    int max_attempts = 3;
    double submitted_at = 0;
    std::optional<double> finished_at;
    std::string message;         // last human-readable status ("waits for 1 idle GPU", exit text)
};

// The task's history keys (core/fingerprint.h): its owner, command line, GPU count and the
// variables set on purpose (by their key, so it holds for rows read without their environment).
inline TaskFingerprint fingerprint_of(const TaskRow& task) {
    return fingerprint_task(task.uid, task.spec.command, task.spec.gpus,
                            task.spec.explicit_env_key);
}


// One member of an array as dependencies and `12_3` look it up.
struct ArrayMemberRow {
    TaskId id = 0;
    int index = 0;
    TaskState state = TaskState::Queued;
};

struct AttemptRow {
    TaskId task = 0;
    int number = 0;              // 1-based
    std::vector<int> gpus;
    std::string dir;             // attempt directory (logs, exit.json)
    pid_t shim_pid = 0;
    double started_at = 0;
    std::optional<double> ended_at;
    std::string outcome;         // "", or to_string(AttemptOutcome)
    std::optional<int> exit_code;
    std::optional<int> signal;
    bool recovered = false;      // placed from the recovery queue
    // Peak GPU memory of the attempt's processes, per GPU index (driver per-process memory on
    // real GPUs, the ledger on emulated ones); empty until the task was seen on a GPU.
    std::map<int, MiB> peak_mib;
    // GPU energy attributed to the attempt, joules, summed over its GPUs (core/energy_split.h);
    // unknown when none of its GPUs reported energy while it ran, or recorded before schema 4.
    std::optional<double> energy_j;
    // The node it ran on and the Slurm job of that node's allocation (`carma agent`); empty on
    // the daemon's own GPUs.
    std::string node;
    std::string slurm_job;
    // Fair share: the GPU-seconds it was charged (core/fair_share.h), and where it shared its
    // GPUs with other tasks, the slowdown it saw; unknown for attempts recorded before schema 9.
    std::optional<double> charged_gpu_s;
    std::optional<double> slowdown;
    // The cores it held (its cpuset; empty: none fenced), and what its fence counted: CPU time
    // (sacct's TotalCPU) and the peak of its host memory (MaxRSS); unknown without a fence.
    std::vector<int> cores;
    std::optional<double> total_cpu_s;
    std::optional<MiB> max_rss_mib;
};

// A user's decayed fair-share usage: GPU-seconds charged, as of at_s (unix seconds).
struct UsageRow {
    double gpu_s = 0;
    double at_s = 0;
};

// A task in a final state and its attempts, oldest first: one row of accounting.
struct FinishedTask {
    TaskRow task;
    std::vector<AttemptRow> attempts;
};

// Which finished tasks accounting lists.
struct FinishedQuery {
    double since = 0;           // finished at or after (unix seconds); a task without an end
                                // time counts as finished when it was submitted
    std::string user;           // the submitter's login name; empty = everyone
    std::vector<TaskState> states;  // empty = every final state; others are never listed
    TaskId after = 0;           // a page: ids above this
    std::size_t limit = 0;      // at most this many (0: all)
};

// Which tasks a span of time saw (the timeline).
struct SpanQuery {
    double since = 0;
    double until = 0;
    bool ran = false;       // only tasks with an attempt in the span
    TaskId after = 0;       // a page: ids above this
    std::size_t limit = 0;  // at most this many (0: all)
};

// How many live tasks of one user are in one state.
struct StateCount {
    uid_t uid = 0;
    std::string user;
    TaskState state = TaskState::Queued;
    std::size_t count = 0;
};

struct EventRow {
    std::int64_t id = 0;
    double time = 0;
    TaskId task = 0;             // 0 for daemon-wide events
    std::string kind;            // "submitted", "placed", "started", "exited", "oom", ...
    std::string message;
};

struct GpuSampleRow {
    double time = 0;
    int gpu = 0;
    MiB free_mib = 0;
    MiB used_mib = 0;
    double util = 0, smact = 0, smocc = 0, drama = 0, power_w = 0, energy_j = 0;
};

}  // namespace carma::store
