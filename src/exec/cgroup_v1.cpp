// Fences on cgroup v1: one hierarchy per controller, each mounted on its own (or co-mounted, as
// "cpu,cpuacct"), so the fence root and every leaf exist once per hierarchy, and a process joins
// the leaf by writing its pid into each hierarchy's cgroup.procs.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/cgroup.h"
#include "exec/cgroup_internal.h"

namespace carma::exec::cgroup {

namespace {

// A mount point in /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mount_path(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto octal = [&](std::size_t at) { return s[at] >= '0' && s[at] <= '7'; };
        if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out +=
                static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

bool under_dir(const std::string& path, const std::string& dir) {
    return dir.empty() || path == dir || path.starts_with(dir + "/");
}

// One v1 hierarchy the fence uses, with the controllers of kV1Controllers it carries.
struct Hierarchy {
    std::string mount_point;
    std::vector<std::string> controllers;
    bool has(std::string_view c) const {
        return std::find(controllers.begin(), controllers.end(), c) != controllers.end();
    }
};

// Every hierarchy the fence needs, each once even when it carries several controllers; fails
// naming the controllers that are not mounted.
Result<std::vector<Hierarchy>> hierarchies() {
    const std::vector<V1Mount> mounts = v1_mounts();
    std::vector<Hierarchy> out;
    std::vector<std::string> missing;
    for (std::string_view c : kV1Controllers) {
        auto m = std::find_if(mounts.begin(), mounts.end(),
                              [&](const V1Mount& v) { return v.controller == c; });
        if (m == mounts.end()) {
            missing.emplace_back(c);
            continue;
        }
        auto h = std::find_if(out.begin(), out.end(),
                              [&](const Hierarchy& x) { return x.mount_point == m->mount_point; });
        if (h == out.end()) {
            out.push_back(Hierarchy{m->mount_point, {std::string(c)}});
        } else {
            h->controllers.emplace_back(c);
        }
    }
    if (!missing.empty()) {
        std::string list;
        for (const std::string& c : missing) {
            list += (list.empty() ? "" : ", ") + c;
        }
        return fail(ErrorCode::Io,
                    fmt::format("no cgroup v1 hierarchy of {} is mounted (see /proc/self/"
                                "mountinfo); mount it, or set `fences: off`",
                                list));
    }
    return out;
}

std::string leaf_in(const Hierarchy& h, const FenceSpec& spec) {
    return h.mount_point + "/" + spec.root + "/" + spec.name;
}

// A cpuset with empty cpus or mems cannot hold a process (attaching fails with ENOSPC), and a
// new v1 cpuset starts empty: it gets its parent's, unless it has some already.
Result<void> inherit_cpuset(const std::string& dir) {
    const std::string parent = dir.substr(0, dir.rfind('/'));
    for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
        const std::string path = dir + "/" + file;
        const auto mine = read_file(path);
        if (mine && !trim(*mine).empty()) {
            continue;
        }
        const std::string from = parent + "/" + file;
        const auto value = read_file(from);
        if (!value) {
            return file_fail("read", from, errno);
        }
        if (auto ok = write_file(path, std::string(trim(*value))); !ok) {
            return ok;
        }
    }
    return {};
}

Result<void> apply_cpuset(const std::string& leaf, const FenceSpec& spec) {
    if (auto ok = inherit_cpuset(leaf); !ok) {  // mems, and cpus when the spec names none
        return ok;
    }
    if (spec.cpus.empty()) {
        return {};
    }
    return write_file(leaf + "/cpuset.cpus", cpu_list(spec.cpus));
}

// memory.memsw.limit_in_bytes bounds memory + swap and may never be below the memory limit, so
// the memory limit goes first. Without swap accounting (swapaccount=0) there is no memsw file:
// the task could then swap beyond the limit, which the host's swap size bounds.
Result<void> apply_memory(const std::string& leaf, std::int64_t bytes) {
    const std::string value = std::to_string(bytes);
    if (auto ok = write_file(leaf + "/memory.limit_in_bytes", value); !ok) {
        return ok;
    }
    const std::string memsw = leaf + "/memory.memsw.limit_in_bytes";
    if (::access(memsw.c_str(), F_OK) == 0) {
        return write_file(memsw, value);
    }
    return {};
}

// The leaf inherits its parent's list (normally "a *:* rwm"); each device named is taken out.
Result<void> apply_devices(const std::string& leaf, const std::vector<DeviceNumber>& deny) {
    for (const DeviceNumber& d : deny) {
        if (auto ok = write_file(leaf + "/devices.deny",
                                 fmt::format("{} {}:{} rwm", d.type, d.major, d.minor));
            !ok) {
            return ok;
        }
    }
    return {};
}

Result<void> apply_limits(const Hierarchy& h, const std::string& leaf, const FenceSpec& spec) {
    if (h.has("cpuset")) {
        if (auto ok = apply_cpuset(leaf, spec); !ok) {
            return ok;
        }
    }
    if (h.has("memory") && spec.memory_bytes) {
        if (auto ok = apply_memory(leaf, *spec.memory_bytes); !ok) {
            return ok;
        }
    }
    if (h.has("pids") && spec.pids_max) {
        if (auto ok = write_file(leaf + "/pids.max", std::to_string(*spec.pids_max)); !ok) {
            return ok;
        }
    }
    if (h.has("devices")) {
        if (auto ok = apply_devices(leaf, spec.deny_devices); !ok) {
            return ok;
        }
    }
    return {};
}

}  // namespace

std::vector<V1Mount> v1_mounts(const std::string& under) {
    std::vector<V1Mount> out;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // id parent maj:min root mount_point options [optional...] - fstype source super_options
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string w; fields >> w;) {
            f.push_back(w);
        }
        const auto dash = std::find(f.begin(), f.end(), "-");
        if (f.size() < 5 || dash == f.end() || f.end() - dash < 4 || *(dash + 1) != "cgroup") {
            continue;
        }
        const std::string mount_point = unescape_mount_path(f[4]);
        if (!under_dir(mount_point, under)) {
            continue;
        }
        for (const std::string& option : split_list(*(dash + 3), ',')) {
            const bool wanted = std::find(std::begin(kV1Controllers), std::end(kV1Controllers),
                                          option) != std::end(kV1Controllers);
            const bool known = std::any_of(
                out.begin(), out.end(), [&](const V1Mount& m) { return m.controller == option; });
            if (wanted && !known) {  // the first mount of a hierarchy; bind mounts repeat it
                out.push_back(V1Mount{option, mount_point});
            }
        }
    }
    return out;
}

std::string v1_leaf_path(const FenceSpec& spec, std::string_view controller) {
    for (const V1Mount& m : v1_mounts()) {
        if (m.controller == controller) {
            return m.mount_point + "/" + spec.root + "/" + spec.name;
        }
    }
    return "";
}

Result<void> v1_prepare_root(const std::string& root) {
    auto hs = hierarchies();
    if (!hs) {
        return tl::unexpected(hs.error());
    }
    for (const Hierarchy& h : *hs) {
        std::string dir = h.mount_point;
        for (const std::string& part : split_list(root, '/')) {
            if (part.empty() || part == ".") {
                continue;
            }
            dir += "/" + part;
            if (auto made = make_dir(dir); !made) {
                return tl::unexpected(made.error());
            }
            // Every level, new or not: one left empty by an earlier, interrupted start is
            // repaired, and a level that has its own cpus keeps them.
            if (h.has("cpuset")) {
                if (auto ok = inherit_cpuset(dir); !ok) {
                    return ok;
                }
            }
        }
    }
    return {};
}

Result<void> v1_remove_root(const std::string& root) {
    auto hs = hierarchies();
    if (!hs) {
        return tl::unexpected(hs.error());
    }
    Result<void> result;
    for (const Hierarchy& h : *hs) {
        if (auto ok = remove_dir(h.mount_point + "/" + root); !ok && result) {
            result = ok;
        }
    }
    return result;
}

Result<void> v1_create(const FenceSpec& spec) {
    auto hs = hierarchies();
    if (!hs) {
        return tl::unexpected(hs.error());
    }
    for (const Hierarchy& h : *hs) {
        const std::string root = h.mount_point + "/" + spec.root;
        if (!is_dir(root)) {
            return fail(ErrorCode::Io,
                        fmt::format("the fence root {} does not exist: the daemon prepares it "
                                    "when it starts (prepare_fence_root), or set `fences: off`",
                                    root));
        }
    }
    // A leaf of the same name left behind by a shim that died: made anew if nothing runs in it.
    for (const Hierarchy& h : *hs) {
        const std::string leaf = leaf_in(h, spec);
        if (!is_dir(leaf)) {
            continue;
        }
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
    for (const Hierarchy& h : *hs) {
        const std::string leaf = leaf_in(h, spec);
        if (auto made = make_dir(leaf); !made) {
            return tl::unexpected(made.error());
        }
        if (auto ok = apply_limits(h, leaf, spec); !ok) {
            v1_remove(spec);  // not half a fence left behind
            return ok;
        }
    }
    return {};
}

Result<void> v1_join(const FenceSpec& spec) {
    auto hs = hierarchies();
    if (!hs) {
        return tl::unexpected(hs.error());
    }
    const std::string pid = std::to_string(::getpid());
    for (const Hierarchy& h : *hs) {
        if (auto ok = write_file(leaf_in(h, spec) + "/cgroup.procs", pid); !ok) {
            return ok;
        }
    }
    return {};
}

FenceUsage v1_usage(const FenceSpec& spec) {
    FenceUsage u;
    const std::string cpuacct = v1_leaf_path(spec, "cpuacct");
    const std::string memory = v1_leaf_path(spec, "memory");
    if (!cpuacct.empty()) {
        if (auto ns = read_number(cpuacct + "/cpuacct.usage")) {
            u.cpu_s = static_cast<double>(*ns) / 1e9;
        }
    }
    if (!memory.empty()) {
        u.peak_bytes = read_number(memory + "/memory.max_usage_in_bytes");
        u.oom_kills = read_keyed(memory + "/memory.oom_control", "oom_kill").value_or(0);
        // "No limit" reads as the page counter's maximum (about 2^63), not as a word.
        constexpr std::int64_t kUnlimited = std::int64_t{1} << 62;
        if (auto limit = read_number(memory + "/memory.limit_in_bytes");
            limit && *limit < kUnlimited) {
            u.memory_limit_bytes = limit;
        }
    }
    return u;
}

Result<void> v1_remove(const FenceSpec& spec) {
    auto hs = hierarchies();
    if (!hs) {
        return tl::unexpected(hs.error());
    }
    std::vector<std::string> procs;
    for (const Hierarchy& h : *hs) {
        procs.push_back(leaf_in(h, spec) + "/cgroup.procs");
    }
    // Processes may be in some hierarchies' leaves and not others (killed while joining): every
    // procs file counts. A kill that does not empty them still leaves the rmdirs to try.
    constexpr double kKillTimeoutS = 10;
    Result<void> result = kill_until_empty(procs, kKillTimeoutS);
    for (const Hierarchy& h : *hs) {
        if (auto ok = remove_dir(leaf_in(h, spec)); !ok && result) {
            result = ok;
        }
    }
    return result;
}

}  // namespace carma::exec::cgroup
