#pragma once
// What a user tells CARMA about a training task. Everything about memory is optional: the
// policies differ precisely in how much of it they may use (spec §2.2).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"

namespace carma {

using TaskId = std::int64_t;

// Enough of a network's shape for the Horus-style analytic estimate (spec §3.2).
struct ModelDescriptor {
    double parameters = 0;              // P: trainable parameters
    double activations_per_sample = 0;  // A: output elements per sample summed over layers
    int batch_size = 0;                 // B
};

struct MemoryInfo {
    std::optional<MiB> declared_mib;    // what the submitter says the task needs per GPU
    std::optional<MiB> profiled_mib;    // peak of a standalone run ("oracle"), per GPU
    std::optional<MiB> horus_mib;       // precomputed estimates, as in the .rad files
    std::optional<MiB> faketensor_mib;
    std::optional<MiB> gpumemnet_mib;
    std::optional<ModelDescriptor> model;
};

struct TaskSpec {
    std::string name;
    std::vector<std::string> command;  // argv; empty in the simulator
    int gpus = 1;
    MemoryInfo memory;
    std::string workload;  // profile name for the simulator and fake jobs; may be empty
};

}  // namespace carma
