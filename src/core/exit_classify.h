#pragma once
// How an attempt ended, from its exit and the tail of its stderr. Pure.

#include <optional>
#include <string_view>

namespace carma {

// Preempted: CARMA stopped it to let an under-served user's task run, and queued the task again
// (core/preemption.h). HostOutOfMemory: the kernel killed it at its host-memory fence (`--mem`);
// OutOfMemory is the GPU's, which relaunches, while asking for the same host memory again would
// end the same way.
enum class AttemptOutcome {
    Succeeded,
    Failed,
    Cancelled,
    Lost,
    OutOfMemory,
    Timeout,
    Preempted,
    HostOutOfMemory
};

std::string_view to_string(AttemptOutcome o);

struct AttemptEnd {
    bool started = true;             // false: the command could not be executed
    std::optional<int> exit_code;    // set when the task exited
    std::optional<int> signal;       // set when a signal ended it
    bool cancel_requested = false;   // someone asked for it to stop
    bool time_limit_reached = false; // CARMA stopped it because its time limit ran out
    // CARMA stopped it for fair share (core/preemption.h), and the stop reached it.
    bool preempted = false;
    bool record_missing = false;     // its supervisor vanished without writing an exit record
    // The kernel killed a process of it at its memory fence (the cgroup's OOM kill counter).
    bool memory_fence_hit = false;
};

// Out-of-memory markers of the frameworks: PyTorch `torch.OutOfMemoryError` / `CUDA out of
// memory`, `CUBLAS_STATUS_ALLOC_FAILED`, `cudaErrorMemoryAllocation`, TensorFlow
// `RESOURCE_EXHAUSTED`, JAX `RESOURCE_EXHAUSTED: Out of memory`.
bool mentions_out_of_memory(std::string_view stderr_tail);

AttemptOutcome classify_attempt(const AttemptEnd& end, std::string_view stderr_tail);

}  // namespace carma
