#pragma once
// Readers for a cluster description and a pod list in the format of Alibaba's GPU cluster trace
// v2023 ("openb", github.com/alibaba/clusterdata, cluster-trace-gpu-v2023), recognised by their
// headers:
//   nodes: sn,cpu_milli,memory_mib,gpu,model
//   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
//          deletion_time,scheduled_time]
// A bad row is refused with its line and what to write instead. Pure: they parse text handed in.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_pack.h"
#include "core/result.h"
#include "core/task.h"

namespace carma::sim {

struct ClusterSpec {
    std::string name;
    std::vector<NodeSpec> nodes;
};

struct PodTimes {
    double created_s = 0;
    std::optional<double> scheduled_s;  // absent or 0 before creation: never scheduled
    std::optional<double> deleted_s;
};

struct Pod {
    TaskSpec task;        // name, cpu_milli, host_mem_mib, gpus, gpu_milli, gpu_models
    std::string qos;      // LS, BE, Burstable, Guaranteed; "" if the list has no such column
    std::string phase;    // Running, Succeeded, Failed, Pending; ""
    std::optional<PodTimes> times;  // the multigpu* lists have none
};

struct PodList {
    std::string name;
    std::vector<Pod> pods;
};

// Whether a CSV's header is openb's node list or pod list.
bool is_openb_node_list(std::string_view csv_text);
bool is_openb_pod_list(std::string_view csv_text);

Result<ClusterSpec> parse_openb_nodes(std::string_view csv_text, std::string_view name);
Result<PodList> parse_openb_pods(std::string_view csv_text, std::string_view name);

// Reads a file; the error names the path.
Result<std::string> read_text_file(const std::string& path, std::string_view what);

}  // namespace carma::sim
