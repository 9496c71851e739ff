#include "core/exit_classify.h"

#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that each marker is recognised on its own.
TEST(ExitClassifyTest, RecognisesEachMarkerAlone) {
    const std::vector<std::string> markers = {
        "torch.OutOfMemoryError",     "OutOfMemoryError",
        "CUDA out of memory",         "out of memory",
        "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation",
        "RESOURCE_EXHAUSTED",         "RESOURCE_EXHAUSTED: Out of memory",
        "OOM when allocating",
    };
    for (const auto& marker : markers) {
        EXPECT_TRUE(mentions_out_of_memory(marker)) << marker;
    }
}

// This test verifies that the last stderr lines of each framework's GPU out-of-memory failure
// are recognised, with the exact text the frameworks print.
TEST(ExitClassifyTest, RecognisesEveryFrameworksOutOfMemoryText) {
    const std::vector<std::string> samples = {
        // PyTorch >= 2.1 and older
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; "
        "79.15 GiB total capacity; 77.80 GiB already allocated)",
        "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB",
        "RuntimeError: CUDA error: out of memory",
        // cuBLAS / CUDA runtime
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cudaErrorMemoryAllocation: out of memory",
        "CUDA runtime error: cudaErrorMemoryAllocation",
        // TensorFlow
        "Resource exhausted: OOM when allocating tensor with shape[1024,1024,64]",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[256,512] and type float",
        "2024-01-01 12:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:479] "
        "RESOURCE_EXHAUSTED",
        // JAX / XLA
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
        "to allocate 17179869184 bytes.",
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
        // Other JVM / generic
        "java.lang.OutOfMemoryError: Java heap space",
    };
    for (const auto& text : samples) {
        EXPECT_TRUE(mentions_out_of_memory(text)) << text;
        // Buried in the middle of a longer tail, as it usually is.
        EXPECT_TRUE(mentions_out_of_memory("Traceback (most recent call last):\n  ...\n" + text +
                                           "\nexiting\n"))
            << text;
    }
}

// This test verifies that the markers are case-sensitive and that ordinary output, including
// text about memory that is not an out-of-memory failure, is not taken for one.
TEST(ExitClassifyTest, IgnoresOtherText) {
    const std::vector<std::string> samples = {
        "",
        "epoch 3: loss 0.123, memory 12.3 GiB",
        "CUDA OUT OF MEMORY",  // the frameworks never spell it so
        "resource_exhausted",
        "zoom factor 2",
        "ValueError: shapes (3,4) and (5,6) not aligned",
        "Segmentation fault (core dumped)",
        "CUBLAS_STATUS_EXECUTION_FAILED",
    };
    for (const auto& text : samples) {
        EXPECT_FALSE(mentions_out_of_memory(text)) << text;
    }
}

struct Case {
    const char* name;
    AttemptEnd end;
    const char* stderr_tail;
    AttemptOutcome expected;
};

AttemptEnd exited(int code, bool cancel = false) {
    AttemptEnd e;
    e.exit_code = code;
    e.cancel_requested = cancel;
    return e;
}

AttemptEnd killed(int sig, bool cancel = false) {
    AttemptEnd e;
    e.signal = sig;
    e.cancel_requested = cancel;
    return e;
}

AttemptEnd not_started() {
    AttemptEnd e;
    e.started = false;
    return e;
}

AttemptEnd timed_out(int sig) {
    AttemptEnd e = killed(sig, true);
    e.time_limit_reached = true;
    return e;
}

AttemptEnd missing() {
    AttemptEnd e;
    e.record_missing = true;
    return e;
}

// This test verifies the precedence of the outcomes: a missing record means lost, a command that
// could not start failed, a stop request explains any unsuccessful end, exit 0 is success even
// after a stop request, and an out-of-memory marker turns a failure into OutOfMemory.
TEST(ExitClassifyTest, ClassifiesEachCase) {
    const char* oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
    const std::vector<Case> cases = {
        {"exit 0", exited(0), "", AttemptOutcome::Succeeded},
        {"exit 0 with OOM text", exited(0), oom, AttemptOutcome::Succeeded},
        {"exit 0 after stop request", exited(0, true), "", AttemptOutcome::Succeeded},
        {"exit 1", exited(1), "Traceback: ValueError", AttemptOutcome::Failed},
        {"exit 3 with OOM", exited(3), oom, AttemptOutcome::OutOfMemory},
        {"SIGABRT with OOM", killed(SIGABRT), "CUBLAS_STATUS_ALLOC_FAILED",
         AttemptOutcome::OutOfMemory},
        {"SIGSEGV", killed(SIGSEGV), "", AttemptOutcome::Failed},
        {"stopped by SIGTERM", killed(SIGTERM, true), "", AttemptOutcome::Cancelled},
        {"stopped by SIGKILL", killed(SIGKILL, true), "", AttemptOutcome::Cancelled},
        {"stopped, exit 143", exited(143, true), "", AttemptOutcome::Cancelled},
        {"stopped while out of memory", killed(SIGKILL, true), oom, AttemptOutcome::Cancelled},
        {"SIGTERM from elsewhere", killed(SIGTERM), "", AttemptOutcome::Failed},
        {"not started", not_started(), "", AttemptOutcome::Failed},
        {"not started, OOM text", not_started(), oom, AttemptOutcome::Failed},
        {"record missing", missing(), "", AttemptOutcome::Lost},
        {"record missing, OOM text", missing(), oom, AttemptOutcome::Lost},
        {"neither exit code nor signal", AttemptEnd{}, "", AttemptOutcome::Failed},
        {"stopped at the time limit", timed_out(SIGTERM), "", AttemptOutcome::Timeout},
        {"killed at the time limit", timed_out(SIGKILL), oom, AttemptOutcome::Timeout},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(classify_attempt(c.end, c.stderr_tail), c.expected) << c.name;
    }
}

// This test verifies the names used in records and the API.
TEST(ExitClassifyTest, Names) {
    EXPECT_EQ(to_string(AttemptOutcome::Succeeded), "succeeded");
    EXPECT_EQ(to_string(AttemptOutcome::Failed), "failed");
    EXPECT_EQ(to_string(AttemptOutcome::Cancelled), "cancelled");
    EXPECT_EQ(to_string(AttemptOutcome::Lost), "lost");
    EXPECT_EQ(to_string(AttemptOutcome::OutOfMemory), "out-of-memory");
}

}  // namespace
}  // namespace carma
