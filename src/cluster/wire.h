#pragma once
// What a node's agent (`carma agent`) and the CARMA server say to each other, as JSON: the
// agent's periodic report (its GPUs, their samples, the attempts it supervises, the answers to
// commands) and the commands the server answers it with (launch, stop, forget). Pure: the HTTP
// transport is in cluster/hub.cpp and cluster/agent.cpp.
//
// Launch requests and exit records travel in the form exec/launch.h writes for the shim.
// Reading is strict: a field of the wrong type is an error naming its path, so a mismatched
// agent and server fail with a message instead of a wrong schedule.

#include <sys/types.h>

#include <optional>
#include <set>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "device/gpu_backend.h"
#include "exec/launch.h"

namespace carma::cluster {

// Bumped when a message changes shape; agent and server must agree.
inline constexpr int kWireVersion = 1;

// An attempt's directory on a node is named "<task>-<attempt>" under the agent's state dir: the
// server chooses the name, the agent reads the task and attempt back from it.
std::string attempt_name(std::int64_t task, int number);
std::optional<std::pair<std::int64_t, int>> parse_attempt_name(const std::string& name);
// The name of an attempt directory given by its path (what the agent reports it by).
std::string attempt_name_of(const std::string& dir);

// What the agent knows of one attempt it supervises.
struct AttemptReport {
    enum class State { Running, Ended, Vanished };
    std::string name;  // the attempt directory's name under the agent's state dir ("12-1")
    std::string dir;   // its full path on the node (logs)
    pid_t shim_pid = 0;
    State state = State::Running;
    std::optional<exec::ExitRecord> exit;  // when Ended
    std::set<pid_t> members;               // the task's processes now (node-local pids)
    std::string stderr_tail;               // when Ended or Vanished: what classifies the end
};

// The agent's answer to one launch command.
struct LaunchReply {
    std::uint64_t id = 0;
    bool ok = false;
    pid_t shim_pid = 0;
    std::string dir;
    std::string error;
    bool invalid = false;  // the request itself cannot run here (ErrorCode::InvalidArgument)
};

struct AgentReport {
    int version = kWireVersion;
    std::string node;
    std::string slurm_job;  // "" outside Slurm
    uid_t uid = 0;          // whom the agent runs as: it switches users only as root
    std::string backend;    // "emulated:4xA100-40GB", "nvml"
    std::vector<device::GpuInfo> gpus;  // indices are the node's own
    std::vector<device::GpuSample> samples;
    std::vector<AttemptReport> attempts;
    std::vector<LaunchReply> replies;
    bool ending = false;  // the agent is stopping its tasks and going away (allocation ends)
};

struct Command {
    enum class Kind { Launch, Stop, Forget };
    Kind kind = Kind::Launch;
    std::uint64_t id = 0;           // Launch: echoed in the reply
    std::string name;               // the attempt directory's name
    // Launch: the request as exec/launch.h writes it for the shim (attempt_dir is the name;
    // the agent places it under its state directory); `request` is it read back.
    std::string request_json;
    exec::LaunchRequest request;
};

nlohmann::json to_json(const device::GpuInfo& gpu);
nlohmann::json to_json(const device::GpuSample& sample);
nlohmann::json to_json(const AgentReport& report);
nlohmann::json to_json(const std::vector<Command>& commands);

Result<AgentReport> report_from_json(const nlohmann::json& j);
Result<std::vector<Command>> commands_from_json(const nlohmann::json& j);

}  // namespace carma::cluster
