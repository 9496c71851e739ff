#pragma once
// Private to src/device/: the layout of the emulator file and the one way to touch it.
//
// The file is mapped MAP_SHARED by the backend (the daemon) and by every carma-fakejob. All reads
// and writes of the state happen under a process-shared robust mutex that lives in the file, so
// a process that dies holding it (SIGKILL, OOM killer) does not wedge the others: the next locker
// gets EOWNERDEAD, marks the mutex consistent and recomputes everything derived.
//
// Two byte-range OFD locks on the file (not on the mapped state) guard what the mutex cannot:
//   byte 0: "initialising" - exclusive while the backend creates or re-initialises the file,
//           shared while a job validates the header; so nobody maps a half-written header;
//   byte 1: "attached"     - shared for as long as a process has the file mapped; a file in a
//           layout we cannot read is only re-initialised when nobody holds it.
//
// Invariants (checked by tests, kept by every writer under the mutex):
//   - a slot is free iff pid == 0; a used slot's gpu_mask is non-empty and within gpu_count;
//   - for every GPU, the sum of memory_mib of the slots on it is <= usable_mib (set_memory
//     refuses the allocation that would cross it);
//   - power_w and the slots' speed always describe the current slots (recomputed at unlock).
//
// Opening and attaching are emulator_file.cpp's, the lock and process liveness emulator_lock.cpp's,
// the format on disk emulator_layout.cpp's and the speeds, power and energy emulator_state.cpp's.

#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "device/emulated.h"
#include "model/gpu_type.h"
#include "model/interference.h"
#include "model/world.h"

namespace carma::device::emu {

inline constexpr std::uint64_t kMagic = 0x554d45414d524143ULL;  // "CARMAEMU" little-endian
// 2: the world (model/world.h) joined the header.
inline constexpr std::uint32_t kVersion = 2;
inline constexpr int kMaxGpus = 64;    // GPU sets are a bit mask
inline constexpr int kMaxSlots = 256;  // concurrent jobs on one emulator file
inline constexpr double kLockTimeoutS = 5.0;
// Jobs lock ~10 times a second each; checking every slot's process each time would cost
// O(jobs^2) /proc reads. Between checks a dead job's memory lingers at most this long.
inline constexpr double kReapIntervalS = 0.1;

enum class Reap { IfDue, Now };

enum class Phase : std::uint32_t { Starting = 0, Active = 1 };

struct GpuState {
    double energy_j;
    double power_w;    // the board power since updated_s (piecewise constant)
    double updated_s;  // CLOCK_MONOTONIC seconds of the last energy integration
};

struct Slot {
    std::int32_t pid;  // 0: free
    Phase phase;
    // Non-zero: its memory counts on its GPUs but it is left out of their process lists, as a
    // process CARMA cannot match is (started outside the task's process tree, or seen from a
    // daemon in a container). In what was padding, so the layout holds.
    std::uint32_t hidden;
    // The share of the SMs the job may use as an MPS client, in thousandths
    // (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE × 10); 0: uncapped. Counts only while the emulator
    // shares its GPUs with MPS, as the variable does. In what was padding, so the layout holds.
    std::uint32_t sm_cap_permille;
    std::uint64_t serial;       // unique per attach, so a handle notices a recycled slot
    std::uint64_t start_ticks;  // /proc/<pid>/stat starttime: tells a reused pid from the job
    std::uint64_t gpu_mask;     // bit i: emulator GPU i
    double util;                // the job's solo profile: interference demand and activity
    double smact;
    double smocc;
    double drama;
    std::int64_t memory_mib;  // held on each of its GPUs
    double progress;          // 0..1, as the job reports it
    double speed;             // derived: its progress rate now (0 while starting)
};
// sm_cap_permille sits in what was padding: every field after it keeps its offset.
static_assert(offsetof(Slot, serial) == 16 && sizeof(Slot) == 96);

struct Header {
    // Fixed prefix: identical in every version, so any build can tell what it is looking at.
    std::uint64_t magic;
    std::uint32_t version;
    std::uint32_t size;  // sizeof(State) of the writer
    // Version 1.
    pthread_mutex_t mutex;
    std::int32_t owner_pid;  // who holds (or last held) the mutex, for error messages
    std::int32_t gpu_count;
    std::uint64_t generation;  // bumped when the GPU set is re-initialised
    std::uint64_t next_serial;
    double reaped_s;        // CLOCK_MONOTONIC seconds of the last check for dead jobs
    std::uint32_t sharing;  // model::SharingMode
    std::uint32_t reserved;
    char type_name[32];
    std::int64_t usable_mib;
    double idle_power_w;
    double max_power_w;
    // Version 2: what collocated jobs really do (model/world.h); every process that derives
    // speeds reads it here.
    std::uint32_t world_kind;  // model::WorldKind
    // model::WorldCompose. In what was reserved2, which every version-2 file holds as 0 (model,
    // the compose before there was a choice), so the layout and its version hold.
    std::uint32_t world_compose;
    double world_bias;
    double world_noise;
    std::uint64_t world_seed;
};

struct State {
    Header header;
    GpuState gpus[kMaxGpus];
    Slot slots[kMaxSlots];
};

// --- pure functions of the state (no locking, no clock) -----------------------------------------

model::GpuType gpu_type_of(const Header& h);
model::SharingMode sharing_of(const Header& h);
model::WorldConfig world_of(const Header& h);
bool on_gpu(const Slot& s, int gpu);
MiB used_mib(const State& s, int gpu);
// Sum of solo utilisations of the GPU-active jobs on the GPU (U in the slowdown model).
double summed_util(const State& s, int gpu);
// What the GPU's GPU-active jobs add up to, with each job's current speed.
model::GpuActivity gpu_activity(const State& s, int gpu);
// Recomputes every job's speed (slowest of its GPUs) and every GPU's power.
void derive(State& s);
// Adds P*dt to every GPU's energy up to `now_s` with the power of the state since its last update.
void integrate_energy(State& s, double now_s);

// --- process liveness
// -----------------------------------------------------------------------------

// /proc/<pid>/stat starttime, 0 if unreadable.
std::uint64_t process_start_ticks(pid_t pid);
// False once the process is gone, a zombie (the driver has already freed its memory) or its pid
// belongs to a newer process (start time differs).
bool process_alive(pid_t pid, std::uint64_t start_ticks);

double monotonic_seconds();

// --- the mapped file
// ------------------------------------------------------------------------------

class EmulatorFile;

// Holds the mutex. Taking it integrates energy and frees dead jobs' slots; letting go recomputes
// speeds and power, so whatever the holder changed is reflected before anyone else looks.
class Locked {
  public:
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    Locked(Locked&& other) noexcept;
    Locked& operator=(Locked&&) = delete;
    ~Locked();

    State& state() { return *state_; }
    // True when the previous holder died holding the mutex (the state was repaired).
    bool recovered() const { return recovered_; }

  private:
    friend class EmulatorFile;
    Locked(State* state, bool recovered) : state_(state), recovered_(recovered) {}
    State* state_;
    bool recovered_;
};

class EmulatorFile {
  public:
    // The backend's open: creates the file (0600), re-attaches to a compatible one (keeping its
    // live jobs; a different sharing mode is taken over), or re-initialises an incompatible one if
    // no live job is in it and, for a damaged one, no attempt is believed running.
    static Result<std::unique_ptr<EmulatorFile>> open_for_backend(const EmulatorOptions& options);
    // A job's open: through the descriptor in $CARMA_EMULATOR_FD when it is this file (tasks of
    // another user than the daemon's cannot open it by name), else by path; the file must exist
    // and be initialised.
    static Result<std::unique_ptr<EmulatorFile>> open_for_job(const std::string& path);

    EmulatorFile(const EmulatorFile&) = delete;
    EmulatorFile& operator=(const EmulatorFile&) = delete;
    ~EmulatorFile();

    // Waits up to kLockTimeoutS; fails if the file was re-initialised since it was opened.
    // Dead jobs are freed first: always with Reap::Now, else every kReapIntervalS.
    Result<Locked> lock(Reap reap = Reap::IfDue);

    const std::string& path() const { return path_; }
    // The header fields that never change for this mapping's generation (read at open).
    int gpu_count() const { return gpu_count_; }
    const model::GpuType& gpu_type() const { return type_; }

  private:
    EmulatorFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
    Result<void> map();
    Result<void> initialise(const EmulatorOptions& options);
    Result<void> reopen(const EmulatorOptions& options);
    Result<void> adopt_header();
    static void reap_dead(State& s, double now_s);

    std::string path_;
    int fd_ = -1;
    State* state_ = nullptr;
    std::uint64_t generation_ = 0;
    int gpu_count_ = 0;
    model::GpuType type_;
};

}  // namespace carma::device::emu
