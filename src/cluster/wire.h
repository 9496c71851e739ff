#pragma once
// What a node's agent (`carma agent`) and the CARMA server say to each other, as JSON: the
// agent's periodic report (its GPUs, their samples, the attempts it supervises, the answers to
// commands) and the commands the server answers it with (launch, stop, forget). Pure: the HTTP
// transport is in cluster/hub.cpp and cluster/agent.cpp.
//
// Launch requests and exit records travel in the form exec/launch.h writes for the shim.
// Reading is strict: a field of the wrong type, a number out of its range (an index, a pid, a
// uid, an offset) or a list or text beyond its bound (below) is an error naming its path, so a
// mismatched agent and server fail with a message instead of a wrong schedule, and a forged
// message fails instead of reaching undefined behaviour.

#include <sys/types.h>

#include <optional>
#include <set>
#include <utility>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "core/node_name.h"
#include "core/result.h"
#include "device/gpu_backend.h"
#include "exec/launch.h"

namespace carma::cluster {

// Bumped when a message changes shape; agent and server must agree.
inline constexpr int kWireVersion = 2;

// What one report may hold: a node has at most this many GPUs.
inline constexpr int kMaxNodeGpus = 64;

// Bounds of what a message may carry. Whoever holds the agents' token can send anything, and a
// report is read before it is believed: these keep a forged one from costing the server more
// than a real one would (memory, a deep recursion, a slot per GPU index). Each is well above
// what a real agent or server sends; the reader refuses what exceeds one, naming the field.
inline constexpr std::size_t kMaxWireBytes = 8 * 1024 * 1024;  // a whole message (JSON text)
inline constexpr std::size_t kMaxWireDepth = kMaxJsonDepth;  // core/json_limits.h: one limit
inline constexpr std::size_t kMaxSamples = 64;         // one per GPU
inline constexpr std::size_t kMaxSampleProcesses = 4096;
inline constexpr std::size_t kMaxAttempts = 4096;      // attempts in one report
inline constexpr std::size_t kMaxMembers = 65536;      // processes of one attempt
inline constexpr std::size_t kMaxReplies = 4096;
inline constexpr std::size_t kMaxAbsent = 4096;
inline constexpr std::size_t kMaxCommands = 4096;      // commands in one answer
inline constexpr std::size_t kMaxLogChunks = 4;        // per attempt (the agent sends one per stream)
inline constexpr std::size_t kMaxLogChunkBytes = 1024 * 1024;  // decoded (the agent sends 256 KiB)
inline constexpr std::uint64_t kMaxLogOffset = INT64_MAX;      // an off_t
inline constexpr std::size_t kMaxStderrTail = 16 * 1024;       // what the agent reads of stderr.log
inline constexpr std::size_t kMaxNodeName = kMaxNodeNameLength;  // core/node_name.h
inline constexpr std::size_t kMaxShortText = 256;  // uuid, GPU name, backend, host, instance, job
inline constexpr std::size_t kMaxErrorText = 4096;  // error messages (a sample's, a reply's, ...)
inline constexpr std::size_t kMaxPathText = 4096;   // an attempt directory on the node (PATH_MAX)

// A message's text as JSON, refusing (InvalidArgument, with the byte offset) text longer than
// `max_bytes` or nested deeper than kMaxWireDepth: nlohmann parses any depth, but copying or
// dumping a value recurses once per level and overflows the stack. The error message is
// printable ASCII whatever the text, so it can be sent back as a JSON string.
Result<nlohmann::json> parse_wire_json(std::string_view text,
                                       std::size_t max_bytes = kMaxWireBytes);

// An attempt's directory on a node is named "<task>-<attempt>" under the agent's state dir: the
// server chooses the name, the agent reads the task and attempt back from it.
std::string attempt_name(std::int64_t task, int number);
// Strict: the two numbers in decimal without sign, space or leading zero (so that one attempt has
// one name) and within range; nullopt otherwise.
std::optional<std::pair<std::int64_t, int>> parse_attempt_name(const std::string& name);
// The name of an attempt directory given by its path (what the agent reports it by).
std::string attempt_name_of(const std::string& dir);

// Bytes of an attempt's stdout.log or stderr.log from `offset` on, as the server asked for them
// (Command::Kind::Logs): remote logs reach `carma logs` through the report, never through a path
// the server would open. `eof`: the attempt has ended and these are its last bytes.
struct LogChunk {
    bool stderr_stream = false;
    std::uint64_t offset = 0;
    std::string data;  // raw bytes (base64 on the wire)
    bool eof = false;
};

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
    std::vector<LogChunk> logs;
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
    std::string host;       // the agent's host name: who else claims `node` (duplicate agents)
    std::string instance;   // random per agent process: two live agents of one node differ here
    std::string slurm_job;  // "" outside Slurm
    uid_t uid = 0;          // whom the agent runs as: it switches users only as root
    std::string backend;    // "emulated:4xA100-40GB", "nvml"
    std::vector<device::GpuInfo> gpus;  // indices are the node's own
    std::vector<device::GpuSample> samples;
    // Non-empty: the agent could not list its attempts (an NFS hiccup, a renamed directory), so
    // `attempts` says nothing about the ones missing from it.
    std::string scan_error;
    std::vector<AttemptReport> attempts;
    // Attempts the server asked about (Command::Kind::Check) whose directories are certainly
    // gone: the attempts directory was read and they are not in it.
    std::vector<std::string> absent;
    std::vector<LaunchReply> replies;
    bool ending = false;  // the agent is stopping its tasks and going away (allocation ends)
};

struct Command {
    // Logs: send the attempt's logs from these offsets (the bytes the server holds).
    // Check: the attempt is missing from the reports; say whether its directory is gone.
    enum class Kind { Launch, Stop, Forget, Logs, Check };
    Kind kind = Kind::Launch;
    std::uint64_t id = 0;           // Launch: echoed in the reply
    std::string name;               // the attempt directory's name
    // Launch: the request as exec/launch.h writes it for the shim (attempt_dir is the name;
    // the agent places it under its state directory); `request` is it read back.
    std::string request_json;
    exec::LaunchRequest request;
    std::uint64_t stdout_offset = 0;  // Logs
    std::uint64_t stderr_offset = 0;
};

nlohmann::json to_json(const device::GpuInfo& gpu);
nlohmann::json to_json(const device::GpuSample& sample);
nlohmann::json to_json(const AgentReport& report);
nlohmann::json to_json(const std::vector<Command>& commands);

Result<AgentReport> report_from_json(const nlohmann::json& j);
Result<std::vector<Command>> commands_from_json(const nlohmann::json& j);

}  // namespace carma::cluster
