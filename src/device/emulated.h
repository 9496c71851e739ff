#pragma once
// Emulated GPUs: real processes, real scheduling, the device model in place of silicon.
//
// The GPUs' state lives in a mapped file (the "emulator file", e.g. <state dir>/emulated-gpus)
// guarded by a process-shared robust mutex, so a process that dies holding the lock does not
// wedge the others. carma-fakejob processes attach to the GPUs named in CUDA_VISIBLE_DEVICES,
// allocate memory with the model's ramp, make progress at the speed the model gives them among
// their co-runners, and print PyTorch's `CUDA out of memory` error and exit non-zero when an
// allocation would pass the GPU's capacity. The backend samples memory, utilisation, SMACT,
// SMOCC, DRAMA, power and energy from that state, and frees the memory of processes that died
// (as the driver does).

#include <memory>
#include <string>

#include "device/gpu_backend.h"
#include "model/gpu_type.h"
#include "model/interference.h"

namespace carma::device {

inline constexpr const char* kEmulatorFileEnv = "CARMA_EMULATOR_FILE";

struct EmulatorOptions {
    model::GpuSet gpus;                               // e.g. 4xA100-40GB
    model::SharingMode sharing = model::SharingMode::Mps;
    std::string file;                                 // the emulator file; created if missing
};

// Creates (or re-attaches to, keeping live jobs) the emulator file and returns the backend.
// Re-opening with a different GPU set re-initialises the file only if no live job is in it.
Result<std::unique_ptr<GpuBackend>> open_emulated(const EmulatorOptions& options);

// The UUID of emulated GPU `index`: GPU-emu00000-0000-4000-8000-00000000000N, stable per index
// so CUDA_VISIBLE_DEVICES written before a daemon restart still names the same GPU.
std::string emulated_gpu_uuid(int index);

}  // namespace carma::device
