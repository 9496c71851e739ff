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

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "device/gpu_backend.h"
#include "model/gpu_type.h"
#include "model/interference.h"
#include "model/world.h"

namespace carma::device {

inline constexpr const char* kEmulatorFileEnv = "CARMA_EMULATOR_FILE";
// The number of an inherited read-write descriptor of the emulator file (set by carma-shim for
// the daemon's tasks): jobs use it instead of opening the file, which is 0600 to the daemon's user.
inline constexpr const char* kEmulatorFdEnv = "CARMA_EMULATOR_FD";

struct EmulatorOptions {
    model::GpuSet gpus;                               // e.g. 4xA100-40GB
    model::SharingMode sharing = model::SharingMode::Mps;
    std::string file;                                 // the emulator file; created if missing
    // Attempts the caller believes still running (the daemon counts its live supervisors). While
    // any is, a damaged file (empty, truncated, another layout, a bad header) is an error instead
    // of being re-initialised: their jobs' GPU state would be lost.
    int attempts_running = 0;
    // Told, in one line, why an existing file is re-initialised.
    std::function<void(std::string_view)> on_note = nullptr;
    model::WorldConfig world{};  // what collocated jobs really do (model/world.h)
};

// Creates (or re-attaches to, keeping live jobs) the emulator file and returns the backend. The
// file is mode 0600 (an existing one we own is set so; a symlink is never followed): tasks reach
// it through the descriptor of GpuBackend::task_files(). Re-opening with a different GPU set
// re-initialises the file only if no live job is in it.
Result<std::unique_ptr<GpuBackend>> open_emulated(const EmulatorOptions& options);

// The UUID of emulated GPU `index`: GPU-emu00000-0000-4000-8000-00000000000N, stable per index
// so CUDA_VISIBLE_DEVICES written before a daemon restart still names the same GPU.
std::string emulated_gpu_uuid(int index);

}  // namespace carma::device
