#pragma once
// Private to the cgroup files of src/exec/ (cgroup.cpp, cgroup_v1.cpp, cgroup_v2.cpp,
// bpf_devices.cpp): the small file operations every hierarchy shares and the per-version entry
// points cgroup.cpp dispatches to. Callers outside use exec/cgroup.h.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "exec/cgroup.h"

namespace carma::exec::cgroup {

// --- files of a cgroup (cgroup.cpp) ----------------------------------------------------------

// "cannot <what> <path>: <errno text>; <hint>", the hint chosen by the errno (permissions: run
// as root or turn fences off; a missing file: the controller is not enabled there).
tl::unexpected<Error> file_fail(std::string_view what, const std::string& path, int err);

// One write() of the whole value, as the kernel wants for control files.
Result<void> write_file(const std::string& path, std::string_view value);
std::optional<std::string> read_file(const std::string& path);
// The first number of the file ("max" and the like are absent).
std::optional<std::int64_t> read_number(const std::string& path);
// The value of a "key value" line (memory.events, cpu.stat, memory.oom_control).
std::optional<std::int64_t> read_keyed(const std::string& path, std::string_view key);
// The pids in a cgroup.procs file; none when it cannot be read.
std::vector<pid_t> read_pids(const std::string& path);
bool is_dir(const std::string& path);
// mkdir; true when it created the directory, false when it was there already.
Result<bool> make_dir(const std::string& path);
// rmdir, retried while the kernel still calls it busy (processes that were just killed take a
// moment to leave); absent is success.
Result<void> remove_dir(const std::string& path);
// SIGKILL to every pid of the procs files, again and again until all of them are empty, for at
// most `timeout_s`: a process forking while it is killed may add one after a round.
Result<void> kill_until_empty(const std::vector<std::string>& procs_files, double timeout_s);

// "0-3,8" parsed back; nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// --- v1 (cgroup_v1.cpp) ----------------------------------------------------------------------

// The controllers a fence uses on v1, each in a hierarchy of its own or co-mounted.
inline constexpr std::string_view kV1Controllers[] = {"cpuset", "memory", "pids", "devices",
                                                      "cpuacct"};

struct V1Mount {
    std::string controller;
    std::string mount_point;
};
// Where each of kV1Controllers is mounted as a v1 hierarchy (from /proc/self/mountinfo),
// preferring mounts under `under` ("" = anywhere); the missing ones are absent.
std::vector<V1Mount> v1_mounts(const std::string& under = "");

Result<void> v1_prepare_root(const std::string& root);
Result<void> v1_remove_root(const std::string& root);
std::string v1_leaf_path(const FenceSpec& spec, std::string_view controller);
Result<void> v1_create(const FenceSpec& spec);
Result<void> v1_join(const FenceSpec& spec);
FenceUsage v1_usage(const FenceSpec& spec);
Result<void> v1_remove(const FenceSpec& spec);

// --- v2 (cgroup_v2.cpp) ----------------------------------------------------------------------

Result<void> v2_prepare_root(const std::string& root);
Result<void> v2_remove_root(const std::string& root);
Result<void> v2_create(const FenceSpec& spec);
Result<void> v2_join(const FenceSpec& spec);
FenceUsage v2_usage(const FenceSpec& spec);
Result<void> v2_remove(const FenceSpec& spec);

// --- the v2 device filter (bpf_devices.cpp) --------------------------------------------------

// Loads a BPF_PROG_TYPE_CGROUP_DEVICE program that denies every access to the listed devices
// and allows the rest, and attaches it to `cgroup_dir` (BPF_F_ALLOW_MULTI: it adds to what the
// ancestors enforce, never replaces it). The cgroup keeps the program; it goes with the cgroup.
Result<void> attach_device_filter(const std::string& cgroup_dir,
                                  const std::vector<DeviceNumber>& deny);

}  // namespace carma::exec::cgroup
