// The device effects of the emulator state (emulator_file.h): what the jobs in the slots add up to
// on each GPU, the speed each job gets among its co-runners, and the GPUs' power and energy. Pure
// functions of the state: the caller holds the lock and brings the clock.

#include "device/emulator_file.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace carma::device::emu {

bool on_gpu(const Slot& s, int gpu) {
    return s.pid != 0 && ((s.gpu_mask >> static_cast<unsigned>(gpu)) & 1ULL) != 0;
}

MiB used_mib(const State& s, int gpu) {
    MiB used = 0;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu)) {
            used += slot.memory_mib;
        }
    }
    return used;
}

double summed_util(const State& s, int gpu) {
    double u = 0;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu) && slot.phase == Phase::Active) {
            u += slot.util;
        }
    }
    return u;
}

model::GpuActivity gpu_activity(const State& s, int gpu) {
    std::vector<model::Contribution> active;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu) && slot.phase == Phase::Active) {
            active.push_back({slot.util, slot.smact, slot.smocc, slot.drama, slot.speed});
        }
    }
    return model::aggregate_activity(active);
}

void derive(State& s) {
    const model::SharingMode sharing = sharing_of(s.header);
    const model::World world(world_of(s.header), sharing);
    const int count = std::clamp(s.header.gpu_count, 0, kMaxGpus);
    for (Slot& slot : s.slots) {
        slot.speed = slot.pid != 0 && slot.phase == Phase::Active ? 1.0 : 0.0;
    }
    // A job spanning GPUs runs in lock step: at the speed of its slowest GPU. The world knows a
    // job by its profile (fake jobs of one profile are one workload).
    std::vector<model::WorldTask> tasks;
    std::vector<Slot*> of;
    std::vector<double> speeds;
    for (int g = 0; g < count; ++g) {
        tasks.clear();
        of.clear();
        for (Slot& slot : s.slots) {
            if (on_gpu(slot, g) && slot.phase == Phase::Active) {
                const std::string key = fmt::format("{:a}|{:a}|{:a}|{:a}", slot.util, slot.smact,
                                                    slot.smocc, slot.drama);
                // An MPS client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; without an MPS server
                // nothing reads it.
                const bool capped =
                    sharing == model::SharingMode::Mps && slot.sm_cap_permille > 0;
                const double cap = capped ? slot.sm_cap_permille / 1000.0 : 1.0;
                tasks.push_back(model::WorldTask{model::world_id(key), slot.util, slot.smact,
                                                 slot.smocc, slot.drama, cap});
                of.push_back(&slot);
            }
        }
        speeds.assign(tasks.size(), 1.0);
        world.speeds(tasks, speeds);
        for (std::size_t i = 0; i < of.size(); ++i) {
            of[i]->speed = std::min(of[i]->speed, speeds[i]);
        }
    }
    const model::GpuType type = gpu_type_of(s.header);
    for (int g = 0; g < count; ++g) {
        s.gpus[g].power_w = model::gpu_power_w(gpu_activity(s, g), type);
    }
}

void integrate_energy(State& s, double now_s) {
    const int count = std::clamp(s.header.gpu_count, 0, kMaxGpus);
    for (int g = 0; g < count; ++g) {
        GpuState& gpu = s.gpus[g];
        // The clock goes backwards only across a reboot (the file outlived it): start afresh.
        if (now_s > gpu.updated_s) {
            gpu.energy_j += gpu.power_w * (now_s - gpu.updated_s);
        }
        gpu.updated_s = now_s;
    }
}

}  // namespace carma::device::emu
