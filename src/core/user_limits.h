#pragma once
// What one user may ask of a shared daemon, so that one user's flood never drowns the others
// (issue 18): how many tasks may wait, how large an array and a task may be, how fast
// submissions may come. Pure: counts and the clock are the caller's. Fair share's per-user
// limits (max GPUs, max running) belong beside these, in the same `limits:` section.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>

#include <sys/types.h>

namespace carma {

struct UserLimits {
    // Tasks one user may have waiting (queued, recovering, held) at once; 0 = no limit.
    std::size_t max_waiting_per_user = 10000;
    // Members of one array (`--array`); 0 = no limit.
    std::size_t max_array_size = 10000;
    // What one task may store: every field it gives (command line, environment, name, files,
    // dependencies; daemon/task_json.h submission_bytes), in bytes; 0 = no limit.
    std::size_t max_submit_bytes_per_task = 64 * 1024;
    // What one submission may store in all: its tasks times their bytes (an array repeats its
    // command line and environment in every member); 0 = no limit.
    std::size_t max_submit_bytes_per_request = 64 * 1024 * 1024;
    // Submissions (requests: an array is one) per second one user may keep up, and how many may
    // come at once after a quiet spell; 0 = no limit.
    double submit_rate_per_user = 20;
    double submit_burst_per_user = 100;
    // Slurm's QOS limits (issue 23): GPUs one user's running tasks may hold at once, and how many
    // of their tasks may run at once; 0 = no limit. A task that would pass one waits (the
    // scheduler passes over it, naming the limit) while the others go on.
    std::size_t max_gpus_per_user = 0;
    std::size_t max_running_per_user = 0;
};

// What one user runs now, for the running limits. `gpus` counts physical GPUs, as Slurm's
// MaxTRESPerUser=gres/gpu does: two of the user's tasks collocated on one GPU hold one GPU, a
// task on two GPUs holds two.
struct RunningUse {
    std::size_t gpus = 0;   // distinct GPUs held
    std::size_t tasks = 0;
    // The server's GPU indices held (across nodes too: the server numbers every node's GPUs).
    std::set<int> held = {};
    // A running task of the user on `indices`: GPUs not yet held count once each.
    void hold(std::span<const int> indices);
    bool operator==(const RunningUse&) const = default;
};

// Whether one more task of `task_gpus` GPUs would pass a running limit: the limit's YAML key and
// value in a sentence (e.g. "alice is at max_gpus_per_user: 2 GPU(s) in use (GPUs 0, 2), 1 asked,
// limit 2"), or nothing. Before placement a task's GPUs count as new ones: a task at the limit
// waits even where it could have shared one of the user's own GPUs, as in Slurm, where a job's
// GPUs are its own.
std::optional<std::string> running_limit(const UserLimits& limits, const std::string& user,
                                         const RunningUse& use, int task_gpus);
inline bool has_running_limits(const UserLimits& limits) {
    return limits.max_gpus_per_user > 0 || limits.max_running_per_user > 0;
}

// A refusal: the HTTP status (429 too many, 413 too large), the limit's name (its YAML key) and
// a message that names the limit and what to do.
struct LimitRefusal {
    int status = 429;
    std::string limit;
    std::string message;
    std::optional<double> retry_after_s;  // when waiting helps
};

// What a submission asks for, measured by the caller.
struct SubmissionSize {
    std::size_t tasks = 1;       // 1, or the array's members
    std::size_t task_bytes = 0;  // what one task stores, every field counted
    bool array = false;
    int gpus = 1;  // GPUs each task asks for
};

// Size limits: checked before anything else is done with a submission. A task asking for more
// GPUs than max_gpus_per_user lets one user hold is refused too (422, as Slurm's DenyOnLimit):
// queued, it could never start.
std::optional<LimitRefusal> check_submission_size(const UserLimits& limits,
                                                  const SubmissionSize& size);

// The waiting limit: `waiting` tasks of this user wait now.
std::optional<LimitRefusal> check_waiting(const UserLimits& limits, std::size_t waiting,
                                          const SubmissionSize& size);

// Per-user token buckets of submissions. One token per submission; a bucket holds at most the
// burst and refills at the rate. The clock is any monotonic seconds the caller keeps.
class SubmitRate {
public:
    explicit SubmitRate(const UserLimits& limits) : limits_(limits) {}
    // A reload: the new rate and burst apply to the buckets as they stand.
    void set_limits(const UserLimits& limits) { limits_ = limits; }
    // Takes a token for `uid` at `now`, or says how long until one is there.
    std::optional<LimitRefusal> take(uid_t uid, double now);

private:
    struct Bucket {
        double tokens = 0;
        double at = 0;
    };
    UserLimits limits_;
    std::map<uid_t, Bucket> buckets_;
};

}  // namespace carma
