#pragma once
// The warm-up ("validity") lock of spec §1.7: right after a launch a training task is still on
// the CPU (imports, data loading) and the monitor under-reports what it will use, so its GPUs take
// no new task until its process has been seen on them for `settle_s` seconds. Each GPU of a
// multi-GPU task settles on its own: a rank seen on GPU 0 says nothing about GPU 1.

#include <optional>
#include <vector>

#include "core/task.h"

namespace carma {

struct WarmupConfig {
    double settle_s = 30;            // lock lasts this long after the first sighting
    double unseen_timeout_s = 1000;  // give up waiting for a sighting (the paper's resolver timeout)
};

class WarmupTracker {
public:
    explicit WarmupTracker(WarmupConfig config = {}) : config_(config) {}

    void launched(TaskId task, const std::vector<int>& gpus, double now);
    // First sighting of the task's processes on one of its GPUs; later calls keep the first time.
    void seen(TaskId task, int gpu, double now);
    // The same on every GPU of the task (the simulator sees a task everywhere at once).
    void seen(TaskId task, double now);
    // The task's attempt ended: its lock goes at once.
    void exited(TaskId task);

    bool locked(int gpu, double now) const;
    // Earliest moment an active lock ends by itself (settled, or its sighting timed out);
    // nothing when no lock is active.
    std::optional<double> next_unlock(double now) const;
    bool empty() const { return locks_.empty(); }
    // Forget locks that have ended by `now`.
    void expire(double now);

    const WarmupConfig& config() const { return config_; }

private:
    struct Lock {  // one per GPU of a launched task
        TaskId task = 0;
        int gpu = 0;
        double launched_at = 0;
        std::optional<double> seen_at;
    };
    bool active(const Lock& lock, double now) const;
    double ends_at(const Lock& lock) const;

    WarmupConfig config_;
    std::vector<Lock> locks_;  // few at a time: one per recent launch
};

}  // namespace carma
