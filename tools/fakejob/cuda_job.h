#pragma once
// carma-fakejob --cuda: the emulated job's life on real NVIDIA GPUs.
//
// Same profile, same phases as on emulated GPUs: CPU-side start-up with nothing on the GPU, then
// a CUDA context on every visible GPU, device memory allocated with cuMemAlloc along the model's
// ramp to the peak, and the SMs kept busy at the profile's utilisation (a small busy kernel, then
// a sleep, so the GPU is busy that fraction of the wall time). Progress goes at the speed the
// kernel shows: its solo time over its time now, so co-runners slow it down as they would a
// training run. An allocation the driver refuses with CUDA_ERROR_OUT_OF_MEMORY prints PyTorch's
// out-of-memory error and exits 1, like the emulated job.
//
// The driver is loaded at run time (cuda_driver.h): without it, or without a GPU, the job prints
// one line saying why and exits 2.

#include "model/catalog.h"

namespace carma::fakejob {

// How the job waits, shared with the emulated mode (its signal handling).
struct JobControl {
    bool (*sleep_for)(double seconds);  // false when a stop signal came
    int (*stopped_exit_code)();         // 128 + that signal
};

// Runs the whole job; returns the process exit code (0 done, 1 out of memory or a driver error
// while running, 2 no usable GPU, 128+signal when stopped).
int run_cuda_job(const model::WorkloadProfile& profile, double time_scale,
                 const JobControl& control);

}  // namespace carma::fakejob
