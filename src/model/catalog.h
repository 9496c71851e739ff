#pragma once
// Workload profiles: what the device model needs to know about a training task to emulate it
// (interference-model.md §10(a)), read from data/workloads.csv.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/task.h"

namespace carma::model {

struct WorkloadProfile {
    std::string name;       // task name as in the traces (.rad stem)
    std::string model;
    int gpus = 1;
    double t_solo_s = 0;    // standalone run time, dispatch to exit, startup included
    double t_start_s = 0;   // dispatch -> first GPU activity (CPU-side start-up)
    MiB m_peak_mib = 0;     // per-GPU peak memory of a standalone run ("oracle")
    std::optional<MiB> horus_mib;
    std::optional<MiB> faketensor_mib;
    std::optional<MiB> gpumemnet_mib;
    std::optional<ModelDescriptor> descriptor;
    double util = 0;        // solo nvidia-smi utilisation: the interference demand
    double smact = 0;
    double smocc = 0;
    double drama = 0;
    double power_w = 0;     // measured solo mean power, informational
    std::string source;
};

// A profile for a trace row with no catalog entry: activity by class ("light", "medium",
// "heavy"), duration and memory from the row.
WorkloadProfile profile_from_class(std::string name, std::string_view task_class, int gpus,
                                   double t_solo_s, MiB m_peak_mib);

// The task spec a profile stands for, with everything the profile knows about memory.
TaskSpec task_spec_for(const WorkloadProfile& profile);

class Catalog {
public:
    static Result<Catalog> parse(std::string_view csv_text, std::string_view source);
    // The catalog compiled into the binary from data/workloads.csv.
    static const Catalog& embedded();

    const WorkloadProfile* find(std::string_view name) const;
    const std::vector<WorkloadProfile>& profiles() const { return profiles_; }

private:
    std::vector<WorkloadProfile> profiles_;
    std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace carma::model
