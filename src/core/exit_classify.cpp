#include "core/exit_classify.h"

#include <array>

namespace carma {

namespace {

// Case-sensitive on purpose: the frameworks print these exact spellings, and a case-insensitive
// "oom" or "memory" would also match ordinary log lines ("zoom", "memory usage: ...").
constexpr std::array<std::string_view, 6> kOutOfMemoryMarkers = {
    "OutOfMemoryError",            // PyTorch torch.OutOfMemoryError / torch.cuda.OutOfMemoryError
    "out of memory",               // "CUDA out of memory", "CUDA error: out of memory"
    "CUBLAS_STATUS_ALLOC_FAILED",  // cuBLAS could not allocate its workspace
    "cudaErrorMemoryAllocation",   // CUDA runtime error name
    "RESOURCE_EXHAUSTED",          // TensorFlow / XLA / JAX status code
    "OOM when allocating",         // TensorFlow "Resource exhausted: OOM when allocating tensor"
};

bool failed(const AttemptEnd& end) {
    return end.signal.has_value() || (end.exit_code.has_value() && *end.exit_code != 0);
}

}  // namespace

std::string_view to_string(AttemptOutcome o) {
    switch (o) {
        case AttemptOutcome::Succeeded:
            return "succeeded";
        case AttemptOutcome::Failed:
            return "failed";
        case AttemptOutcome::Cancelled:
            return "cancelled";
        case AttemptOutcome::Lost:
            return "lost";
        case AttemptOutcome::OutOfMemory:
            return "out-of-memory";
        case AttemptOutcome::Timeout:
            return "timeout";
        case AttemptOutcome::Preempted:
            return "preempted";
        case AttemptOutcome::HostOutOfMemory:
            return "out-of-host-memory";
    }
    return "unknown";
}

bool mentions_out_of_memory(std::string_view stderr_tail) {
    for (std::string_view marker : kOutOfMemoryMarkers) {
        if (stderr_tail.find(marker) != std::string_view::npos) {
            return true;
        }
    }
    return false;
}

AttemptOutcome classify_attempt(const AttemptEnd& end, std::string_view stderr_tail) {
    if (end.record_missing) {
        return AttemptOutcome::Lost;
    }
    if (!end.started) {
        return AttemptOutcome::Failed;
    }
    // Stopped for fair share: queued again whatever its exit, as Slurm requeues a preempted job
    // (a task that saves a checkpoint on SIGTERM and exits 0 has work left). A cancel during that
    // stop clears `preempted` in the daemon: the user's word wins.
    if (end.preempted) {
        return AttemptOutcome::Preempted;
    }
    // A task that finished its work before the stop took effect did succeed: keep its result.
    if (!end.signal && end.exit_code == 0) {
        return AttemptOutcome::Succeeded;
    }
    // Before the GPU's markers: a framework may print "out of memory" for host memory too, and
    // the kernel's kill at the fence is what ended it whatever was printed.
    if (end.memory_fence_hit && failed(end)) {
        return AttemptOutcome::HostOutOfMemory;
    }
    if (end.time_limit_reached && failed(end)) {
        return AttemptOutcome::Timeout;
    }
    if (end.cancel_requested && failed(end)) {
        return AttemptOutcome::Cancelled;
    }
    if (failed(end) && mentions_out_of_memory(stderr_tail)) {
        return AttemptOutcome::OutOfMemory;
    }
    // Also a record with neither exit code nor signal: nothing says it worked.
    return AttemptOutcome::Failed;
}

}  // namespace carma
