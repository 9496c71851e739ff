// Fences on cgroup v2: one unified hierarchy. The fence root is an absolute cgroup directory
// whose cgroup.subtree_control hands cpuset, memory and pids to the leaves; a leaf carries the
// limits in its own files and, for devices, a BPF program (bpf_devices.cpp), since v2 has no
// devices controller.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/cgroup.h"
#include "exec/cgroup_internal.h"

namespace carma::exec {

namespace cgroup {

namespace {

// Controllers the leaves must have, and one they get when the kernel offers it (cpu.max and
// cpu.weight are not used yet, but a leaf without the cpu controller cannot get them later
// without the daemon preparing the root again).
constexpr std::string_view kRequired[] = {"cpuset", "memory", "pids"};
constexpr std::string_view kOptional[] = {"cpu"};

bool has_word(std::string_view text, std::string_view word) {
    std::istringstream in{std::string(text)};
    for (std::string w; in >> w;) {
        if (w == word) {
            return true;
        }
    }
    return false;
}

// The cgroup2 mount that holds `path` (the longest mount point it lies under), "" when none.
std::string v2_mount_of(const std::string& path) {
    std::ifstream in("/proc/self/mountinfo");
    std::string best;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string w; fields >> w;) {
            f.push_back(w);
        }
        const auto dash = std::find(f.begin(), f.end(), "-");
        if (f.size() < 5 || dash == f.end() || dash + 1 == f.end() || *(dash + 1) != "cgroup2") {
            continue;
        }
        const std::string& mp = f[4];
        if ((path == mp || path.starts_with(mp == "/" ? mp : mp + "/")) &&
            mp.size() > best.size()) {
            best = mp;
        }
    }
    return best;
}

// Enables the controllers for the children of `dir`, one write each so that an error names the
// controller; those already enabled are left alone (a write would be a no-op, but one to a
// cgroup holding processes fails with EBUSY even then).
Result<void> enable_for_children(const std::string& dir) {
    const std::string offered_file = dir + "/cgroup.controllers";
    const auto offered = read_file(offered_file);
    if (!offered) {
        return file_fail("read", offered_file, errno);
    }
    const std::string control = dir + "/cgroup.subtree_control";
    const std::string enabled = read_file(control).value_or("");
    for (std::string_view c : kRequired) {
        if (!has_word(*offered, c)) {
            return fail(ErrorCode::Io,
                        fmt::format("no {} controller in {}: the cgroup above must hand it down "
                                    "(systemd: Delegate=yes in the daemon's unit), or set "
                                    "`fences: off`",
                                    c, offered_file));
        }
        if (!has_word(enabled, c)) {
            if (auto ok = write_file(control, fmt::format("+{}", c)); !ok) {
                return ok;
            }
        }
    }
    for (std::string_view c : kOptional) {
        if (has_word(*offered, c) && !has_word(enabled, c)) {
            // Optional: the cpu controller refuses to be enabled while a real-time process
            // runs below; the fence works without it.
            (void)write_file(control, fmt::format("+{}", c));
        }
    }
    return {};
}

std::string leaf_of(const FenceSpec& spec) {
    return spec.root + "/" + spec.name;
}

// A limit's file; a missing one means the controller was not handed to the leaves.
Result<void> write_limit(const FenceSpec& spec, std::string_view controller, std::string_view file,
                         std::string_view value) {
    const std::string path = leaf_of(spec) + "/" + std::string(file);
    if (::access(path.c_str(), F_OK) != 0) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot write \"{}\" to {}: the {} controller is not enabled in "
                                "{}/cgroup.subtree_control; the daemon enables it when it "
                                "prepares the fence root, or set `fences: off`",
                                value, path, controller, spec.root));
    }
    return write_file(path, value);
}

Result<void> apply_limits(const FenceSpec& spec) {
    const std::string leaf = leaf_of(spec);
    if (!spec.cpus.empty()) {
        if (auto ok = write_limit(spec, "cpuset", "cpuset.cpus", cpu_list(spec.cpus)); !ok) {
            return ok;
        }
    }
    if (spec.memory_bytes) {
        if (auto ok = write_limit(spec, "memory", "memory.max", std::to_string(*spec.memory_bytes));
            !ok) {
            return ok;
        }
        // memory.max bounds memory only; with no swap on top, memory + swap stays within the
        // limit. The file is missing without swap accounting (then the host's swap bounds it).
        if (::access((leaf + "/memory.swap.max").c_str(), F_OK) == 0) {
            if (auto ok = write_file(leaf + "/memory.swap.max", "0"); !ok) {
                return ok;
            }
        }
        // When the limit is hit the kernel kills the whole leaf rather than one process of it:
        // a training run that lost one worker is broken but may hang instead of ending.
        if (::access((leaf + "/memory.oom.group").c_str(), F_OK) == 0) {
            if (auto ok = write_file(leaf + "/memory.oom.group", "1"); !ok) {
                return ok;
            }
        }
    }
    if (spec.pids_max) {
        if (auto ok = write_limit(spec, "pids", "pids.max", std::to_string(*spec.pids_max)); !ok) {
            return ok;
        }
    }
    if (!spec.deny_devices.empty()) {
        return attach_device_filter(leaf, spec.deny_devices);
    }
    return {};
}

}  // namespace

// The no-internal-process rule (see prepare_fence_root in exec/cgroup.h) is why every level
// below the mount's root that enables controllers here must be free of processes: the write to
// its cgroup.subtree_control fails with EBUSY otherwise, and the error says so.
Result<void> v2_prepare_root(const std::string& root) {
    const std::string mount = v2_mount_of(root);
    if (mount.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the fence root {} is not inside a cgroup2 mount (see "
                                "/proc/self/mountinfo)",
                                root));
    }
    std::vector<std::string> levels = {mount};
    for (const std::string& part : split_list(root.substr(mount.size()), '/')) {
        if (!part.empty() && part != ".") {
            levels.push_back(levels.back() + "/" + part);
        }
    }
    // Top-down: a level only offers its children what its parent enabled for it. Each level is
    // made just before it is needed, so a kernel that offers nothing fails at the top with
    // nothing created.
    for (std::size_t i = 0; i < levels.size(); ++i) {
        if (i > 0) {
            if (auto made = make_dir(levels[i]); !made) {
                return tl::unexpected(made.error());
            }
        }
        if (auto ok = enable_for_children(levels[i]); !ok) {
            return ok;
        }
    }
    return {};
}

Result<void> v2_remove_root(const std::string& root) {
    return remove_dir(root);
}

Result<void> v2_create(const FenceSpec& spec) {
    if (!is_dir(spec.root)) {
        return fail(ErrorCode::Io,
                    fmt::format("the fence root {} does not exist: the daemon prepares it when "
                                "it starts (prepare_fence_root), or set `fences: off`",
                                spec.root));
    }
    const std::string leaf = leaf_of(spec);
    if (is_dir(leaf)) {  // left behind by a shim that died: made anew if nothing runs in it
        if (const auto pids = read_pids(leaf + "/cgroup.procs"); !pids.empty()) {
            return fail(ErrorCode::Conflict,
                        fmt::format("the fence {} already holds process {}: an earlier attempt of "
                                    "this name still runs",
                                    leaf, pids.front()));
        }
        if (auto ok = remove_dir(leaf); !ok) {
            return ok;
        }
    }
    if (auto made = make_dir(leaf); !made) {
        return tl::unexpected(made.error());
    }
    if (auto ok = apply_limits(spec); !ok) {
        (void)remove_dir(leaf);  // not half a fence left behind
        return ok;
    }
    return {};
}

Result<void> v2_join(const FenceSpec& spec) {
    return write_file(leaf_of(spec) + "/cgroup.procs", std::to_string(::getpid()));
}

FenceUsage v2_usage(const FenceSpec& spec) {
    const std::string leaf = leaf_of(spec);
    FenceUsage u;
    if (auto usec = read_keyed(leaf + "/cpu.stat", "usage_usec")) {
        u.cpu_s = static_cast<double>(*usec) / 1e6;
    }
    u.peak_bytes = read_number(leaf + "/memory.peak");  // Linux 5.19 and later
    u.oom_kills = read_keyed(leaf + "/memory.events", "oom_kill").value_or(0);
    u.memory_limit_bytes = read_number(leaf + "/memory.max");  // "max" reads as none
    return u;
}

Result<void> v2_remove(const FenceSpec& spec) {
    const std::string leaf = leaf_of(spec);
    if (!is_dir(leaf)) {
        return {};
    }
    // cgroup.kill (Linux 5.14) kills every process of the leaf at once, forks in flight
    // included; without it, SIGKILL to each pid until none is left.
    const std::string kill_file = leaf + "/cgroup.kill";
    if (::access(kill_file.c_str(), F_OK) == 0) {
        if (auto ok = write_file(kill_file, "1"); !ok) {
            return ok;
        }
    }
    constexpr double kKillTimeoutS = 10;
    Result<void> result = kill_until_empty({leaf + "/cgroup.procs"}, kKillTimeoutS);
    if (auto ok = remove_dir(leaf); !ok && result) {
        result = ok;
    }
    return result;
}

}  // namespace cgroup

Result<void> move_self_to_leaf(const std::string& cgroup_dir, const std::string& leaf) {
    if (leaf.empty() || leaf == "." || leaf == ".." || leaf.find('/') != std::string::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("leaf \"{}\" must be one path component", leaf));
    }
    const std::string dir = cgroup_dir + "/" + leaf;
    if (auto made = cgroup::make_dir(dir); !made) {
        return tl::unexpected(made.error());
    }
    // All threads of the process move together: v2 keeps a process's threads in one cgroup
    // unless the subtree is threaded.
    return cgroup::write_file(dir + "/cgroup.procs", std::to_string(::getpid()));
}

}  // namespace carma::exec
