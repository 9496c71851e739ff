#pragma once
// Per-attempt fences: each attempt of a task runs in a cgroup leaf of its own that carries the
// task's cores (cpuset), a hard host-memory limit with swap limited too, a pids limit, and a
// device filter that denies the other GPUs' device files. The daemon owns a subtree (the fence
// root) and prepares it once; carma-shim creates the attempt's leaf before it forks the task
// (so a failure is reported as "not started" with the file and errno), the task child joins it
// before it drops root and execs, and the shim reads the usage and removes the leaf once the
// task has ended. The shim itself stays outside the leaf.
//
// Two kernels' interfaces, one API:
//   v1 (cgroup_v1.cpp): one hierarchy per controller (cpuset, memory, pids, devices, cpuacct),
//       each found in /proc/self/mountinfo; the root is a relative path created in each of them;
//       devices are denied with devices.deny.
//   v2 (cgroup_v2.cpp): one unified hierarchy; the root is an absolute cgroup directory whose
//       subtree_control hands cpuset, memory and pids to the leaves; devices are denied by a
//       BPF_PROG_TYPE_CGROUP_DEVICE program attached to the leaf (bpf_devices.cpp).
//
// Every function that touches the kernel needs root (CAP_SYS_ADMIN over the hierarchy); errors
// name the file written, the errno text and a hint.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma::exec {

enum class CgroupMode { None, V1, V2 };

std::string_view to_string(CgroupMode mode);  // "none", "v1", "v2"
std::optional<CgroupMode> cgroup_mode_from_string(std::string_view text);

inline constexpr std::string_view kCgroupMountRoot = "/sys/fs/cgroup";

struct CgroupSupport {
    CgroupMode mode = CgroupMode::None;
    // What was found (v1: where each controller is mounted; v2: which cgroup.controllers offers
    // them) or, for None, exactly what is missing.
    std::string detail{};
};

// Decides from statfs() of `mount_root` (CGROUP2_SUPER_MAGIC) and /proc/self/mountinfo, never
// from guesses:
//   v2   when mount_root is a cgroup2 mount and cpuset, memory and pids are offered in the
//        cgroup.controllers of this process's cgroup or, failing that, of its nearest ancestor
//        that offers them (prepare_fence_root enables them down from there);
//   v1   when cpuset, memory, pids, devices and cpuacct are each mounted as a v1 hierarchy under
//        mount_root (co-mounted ones, like "cpu,cpuacct", count);
//   None otherwise.
CgroupSupport detect_cgroups(const std::string& mount_root = std::string(kCgroupMountRoot));

struct DeviceNumber {
    char type = 'c';  // 'c' character, 'b' block
    int major = 0;
    int minor = 0;
};

struct FenceSpec {
    CgroupMode mode = CgroupMode::None;  // V1 or V2 (None is refused)
    // The subtree the daemon owns. v1: a relative path ("carma"), the same under every
    // controller's mount; v2: an absolute cgroup directory the daemon prepared
    // ("/sys/fs/cgroup/system.slice/carma.service/tasks").
    std::string root{};
    std::string name{};       // the attempt's leaf under root, one path component ("task-12-1")
    std::vector<int> cpus{};  // the cores the task may run on; empty: the root's
    std::optional<std::int64_t> memory_bytes{};  // hard limit; memory + swap limited to it too
    std::optional<int> pids_max{};               // processes and threads together
    std::vector<DeviceNumber> deny_devices{};    // e.g. the other GPUs' /dev/nvidiaN (195:N)
};

// The leaf's directory in one hierarchy: v1 `<mount of controller>/<root>/<name>`, v2
// `<root>/<name>`. `controller` is ignored on v2; "" on v1 means the cpuset hierarchy.
std::string fence_leaf_path(const FenceSpec& spec, std::string_view controller = "");

// Once, when the daemon starts: creates the root (idempotent).
//   v1: in each of cpuset, memory, pids, devices and cpuacct; every new cpuset level gets
//       cpuset.cpus and cpuset.mems copied from its parent (a cpuset with none cannot hold a
//       process).
//   v2: creates the directory and enables +cpuset +memory +pids (and +cpu when offered) in the
//       subtree_control of every level from the nearest one that offers them down to the root,
//       root included, so that its leaves get the controllers.
//       The no-internal-process rule: a cgroup other than the hierarchy's root that enables a
//       controller for its children cannot itself hold processes. A daemon started by systemd
//       runs in its unit's cgroup (e.g. carma.service), so before the root
//       carma.service/tasks can be prepared, carma.service's own processes must leave it: the
//       daemon calls move_self_to_leaf(<its cgroup>, "daemon") first (its shims, forked later,
//       are then born in that leaf). The unit needs Delegate=yes, and KillMode=process if the
//       tasks are to survive a restart of the daemon; then systemd must start the next daemon in
//       a leaf too, since carma.service itself may no longer hold a process: DelegateSubgroup=
//       (systemd 254). Older systemd (Debian 12 has 252) cannot, so there the root belongs in a
//       cgroup of its own beside the unit (a scope with Delegate=yes, as Slurm's
//       slurmstepd.scope).
Result<void> prepare_fence_root(CgroupMode mode, const std::string& root);

// v2: creates `<cgroup_dir>/<leaf>` and moves this process (all its threads) into it.
Result<void> move_self_to_leaf(const std::string& cgroup_dir, const std::string& leaf);

// Removes the root itself (empty of leaves) from every hierarchy; nothing to do when absent.
Result<void> remove_fence_root(CgroupMode mode, const std::string& root);

// The leaf with every limit applied, before the task is forked. A leaf left over under the same
// name (a shim that died) is removed and made anew when it holds no process, so no limit of the
// old one lingers, and refused (Conflict) when it does.
Result<void> create_fence(const FenceSpec& spec);
// The calling process joins the leaf (cgroup.procs of each hierarchy): in the task child, after
// fork and before it drops root and execs. Allocates; fine in carma-shim's single-threaded child.
Result<void> join_fence(const FenceSpec& spec);
// create_fence, then join_fence.
Result<void> enter_fence(const FenceSpec& spec);

struct FenceUsage {
    std::optional<double> cpu_s{};                     // user + system CPU time of the leaf
    std::optional<std::int64_t> peak_bytes{};          // the highest memory charge seen
    std::int64_t oom_kills = 0;                        // processes the kernel killed for memory
    std::optional<std::int64_t> memory_limit_bytes{};  // the limit in force; none when unlimited
};

// What the leaf's counters say; a counter that cannot be read is absent (v2's memory.peak needs
// Linux 5.19).
FenceUsage read_fence_usage(const FenceSpec& spec);

// Kills whatever is left in the leaf (v2: cgroup.kill, else SIGKILL to each pid; v1: SIGKILL to
// each pid of every hierarchy, repeated until none is left, for a bounded time) and removes it
// from every hierarchy. Nothing to do when it is already gone.
Result<void> remove_fence(const FenceSpec& spec);

// "0-3,8" for {0,1,2,3,8}, as cpuset.cpus takes it.
std::string cpu_list(const std::vector<int>& cpus);

// Why a fence spec cannot be used ("" when it can): mode, root and name checked without
// touching the kernel (a name is one path component; a v1 root is relative, a v2 root absolute,
// neither with "..").
std::string fence_spec_problem(const FenceSpec& spec);

}  // namespace carma::exec
