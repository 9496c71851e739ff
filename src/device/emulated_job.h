#pragma once
// The job side of the emulated GPUs: what carma-fakejob (and tests) use to be a process on them.
//
// A job attaches to the GPUs named in CUDA_VISIBLE_DEVICES with its solo profile, says when it
// becomes GPU-active, asks for memory as it ramps up (refused when the GPU would pass its
// capacity: the allocation that crosses fails, the others go on), and reads the speed the device
// model gives it among its co-runners. Its memory is freed when it detaches, and by the backend
// when the process dies without detaching (as the driver does).
//
// A job whose environment has CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (an MPS client with a memory
// limit, see core/mps_limit.h) is also refused an allocation that would take it past its limit on a GPU,
// however much the GPU has free; only its own allocations are limited. An ordinal in the variable
// is a position in the job's CUDA_VISIBLE_DEVICES; a UUID must be one of the GPUs listed there.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"

namespace carma::device {

namespace emu {
class EmulatorFile;
}

// The job's solo activity (fractions 0..1): the model's interference demand and GPU metrics.
struct JobProfile {
    double util = 0;
    double smact = 0;
    double smocc = 0;
    double drama = 0;
};

// What set_memory did. On refusal nothing changed; the numbers are those PyTorch reports.
struct Allocation {
    bool ok = true;
    int device = 0;         // the CUDA ordinal (position in CUDA_VISIBLE_DEVICES) that ran out
    MiB requested_mib = 0;  // what the request would have added there
    MiB total_mib = 0;      // that GPU's capacity
    MiB free_mib = 0;       // free on it before the request
    MiB held_mib = 0;       // what this job holds on it
    MiB limit_mib = 0;      // the job's MPS memory limit there that refused it; 0: capacity did
};

// Emulator GPU indices in CUDA ordinal order, from a CUDA_VISIBLE_DEVICES value: comma-separated
// indices ("0,2") or emulated UUIDs ("GPU-emu00000-0000-4000-8000-000000000002").
Result<std::vector<int>> parse_visible_devices(std::string_view text, int gpu_count);

// One attached job. Move-only; detaches when destroyed (only in the process that attached, so a
// forked child does not take its parent's slot with it).
class JobHandle {
  public:
    // The memory limit is read from $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, and the share of the SMs
    // from $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; a malformed one, or a limit naming a GPU the job
    // cannot see, is an error (InvalidArgument) that says what is wrong.
    static Result<JobHandle> attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile);
    // The same with the limit's value given (nullopt: no limit) and no SM cap, for tests and
    // embedders.
    static Result<JobHandle> attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile,
                                    std::optional<std::string_view> pinned_mem_limit);
    // The same with both values given. Under MPS a job capped below its solo utilisation runs
    // at cap/util of its solo speed, alone too (model::World); under time-slicing, where no MPS
    // server reads the variable, the cap does nothing.
    static Result<JobHandle> attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile,
                                    std::optional<std::string_view> pinned_mem_limit,
                                    std::optional<std::string_view> active_thread_percentage);

    JobHandle(JobHandle&& other) noexcept;
    JobHandle& operator=(JobHandle&& other) noexcept;
    JobHandle(const JobHandle&) = delete;
    JobHandle& operator=(const JobHandle&) = delete;
    ~JobHandle();

    // Sets the memory held on each of its GPUs. Refused (ok == false) when any of them would
    // pass its capacity or the job's MPS limit there; errors only when the emulator file cannot
    // be used.
    Result<Allocation> set_memory(MiB mib);
    // GPU-active jobs contribute to their GPUs' activity and slow their co-runners down.
    Result<void> set_active(bool active);
    // Its progress rate now: 1 alone, less when sharing, 0 while not GPU-active.
    Result<double> current_speed();
    // 0..1, for whoever inspects the emulator.
    Result<void> set_progress(double fraction);
    // A hidden job holds memory and slows its co-runners as any other, but the backend lists no
    // process for it (tests: a task CARMA cannot see, as a daemon in a container sees none).
    Result<void> set_hidden(bool hidden);
    // Frees its slot and memory; safe to call twice.
    void detach();

    const std::vector<int>& gpus() const { return gpus_; }
    MiB capacity_mib() const { return capacity_mib_; }
    MiB memory_mib() const { return memory_mib_; }
    // Per CUDA ordinal: the job's MPS memory limit on that GPU, nullopt where it has none.
    const std::vector<std::optional<MiB>>& memory_limits() const { return limits_; }

  private:
    JobHandle() = default;

    std::unique_ptr<emu::EmulatorFile> file_;
    std::vector<int> gpus_;
    int slot_ = -1;
    std::uint64_t serial_ = 0;
    pid_t pid_ = 0;
    MiB capacity_mib_ = 0;
    MiB memory_mib_ = 0;
    std::vector<std::optional<MiB>> limits_;
};

}  // namespace carma::device
