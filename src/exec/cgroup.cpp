// Fences: detecting which cgroup interface the kernel offers, the checks and file operations both
// versions share, and the dispatch of exec/cgroup.h's calls to cgroup_v1.cpp or cgroup_v2.cpp.

#include "exec/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/host.h"
#include "core/text.h"
#include "exec/cgroup_internal.h"

namespace carma::exec {

namespace cgroup {

namespace {

std::string hint_for(int err) {
    switch (err) {
        case EACCES:
        case EPERM:
        case EROFS:
            return "run the daemon as root, or set `fences: off`";
        case ENOENT:
            return "the cgroup or the controller behind this file is missing: the daemon "
                   "prepares the fence root when it starts, or set `fences: off`";
        case ENOSPC:
            return "a cpuset without cpus or mems cannot hold a process: the fence root's "
                   "cpuset.cpus and cpuset.mems must be set";
        case EBUSY:
            return "a cgroup that hands controllers to its children may not hold processes "
                   "itself: move them into a leaf first";
        case ERANGE:
            return "a cpu or memory node this machine does not have";
        case EINVAL:
            return "is the value allowed by the parent cgroup (a cpu outside its cpuset, a "
                   "limit below the usage)?";
        default:
            return "or set `fences: off`";
    }
}

}  // namespace

tl::unexpected<Error> file_fail(std::string_view what, const std::string& path, int err) {
    const ErrorCode code =
        (err == EACCES || err == EPERM || err == EROFS) ? ErrorCode::Forbidden : ErrorCode::Io;
    return fail(code,
                fmt::format("cannot {} {}: {}; {}", what, path, errno_text(err), hint_for(err)));
}

Result<void> write_file(const std::string& path, std::string_view value) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return file_fail(fmt::format("write \"{}\" to", value), path, errno);
    }
    const ssize_t n = ::write(fd, value.data(), value.size());
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(value.size())) {
        return file_fail(fmt::format("write \"{}\" to", value), path, n < 0 ? err : EIO);
    }
    return {};
}

std::optional<std::string> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::optional<std::int64_t> read_number(const std::string& path) {
    const auto text = read_file(path);
    if (!text) {
        return std::nullopt;
    }
    const std::string_view t = trim(*text);
    std::int64_t value = 0;
    if (t.empty() || std::from_chars(t.data(), t.data() + t.size(), value).ec != std::errc()) {
        return std::nullopt;  // "max" and the like
    }
    return value;
}

std::optional<std::int64_t> read_keyed(const std::string& path, std::string_view key) {
    const auto text = read_file(path);
    if (!text) {
        return std::nullopt;
    }
    std::istringstream lines(*text);
    std::string name;
    std::int64_t value = 0;
    while (lines >> name >> value) {
        if (name == key) {
            return value;
        }
    }
    return std::nullopt;
}

std::vector<pid_t> read_pids(const std::string& path) {
    std::vector<pid_t> pids;
    const auto text = read_file(path);
    if (!text) {
        return pids;
    }
    std::istringstream in(*text);
    pid_t pid = 0;
    while (in >> pid) {
        pids.push_back(pid);
    }
    return pids;
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<bool> make_dir(const std::string& path) {
    if (::mkdir(path.c_str(), 0755) == 0) {
        return true;
    }
    if (errno == EEXIST && is_dir(path)) {
        return false;
    }
    return file_fail("create cgroup", path, errno);
}

Result<void> remove_dir(const std::string& path) {
    constexpr int kTries = 200;  // 10 ms apart
    for (int i = 0;; ++i) {
        if (::rmdir(path.c_str()) == 0 || errno == ENOENT) {
            return {};
        }
        if (errno != EBUSY || i == kTries) {
            return file_fail("remove cgroup", path, errno);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

Result<void> kill_until_empty(const std::vector<std::string>& procs_files, double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        std::set<pid_t> left;
        for (const std::string& file : procs_files) {
            for (pid_t pid : read_pids(file)) {
                left.insert(pid);
            }
        }
        if (left.empty()) {
            return {};
        }
        for (pid_t pid : left) {
            ::kill(pid, SIGKILL);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return fail(ErrorCode::Conflict,
                        fmt::format("{} process(es) still in {} after SIGKILL for {} s (pid {}); "
                                    "a process in uninterruptible sleep (D state) leaves only "
                                    "when its I/O completes",
                                    left.size(), procs_files.front(), timeout_s, *left.begin()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
    std::vector<int> cpus;
    text = trim(text);
    if (text.empty()) {
        return cpus;
    }
    for (const std::string& piece : split_list(text, ',')) {
        const auto dash = piece.find('-');
        int lo = 0;
        int hi = 0;
        const char* b = piece.data();
        const char* e = piece.data() + piece.size();
        const char* mid = dash == std::string::npos ? e : piece.data() + dash;
        if (std::from_chars(b, mid, lo).ec != std::errc() || lo < 0) {
            return std::nullopt;
        }
        hi = lo;
        if (dash != std::string::npos &&
            (std::from_chars(mid + 1, e, hi).ec != std::errc() || hi < lo)) {
            return std::nullopt;
        }
        for (int c = lo; c <= hi; ++c) {
            cpus.push_back(c);
        }
    }
    return cpus;
}

}  // namespace cgroup

namespace {

using cgroup::read_file;

bool has_word(std::string_view text, std::string_view word) {
    std::istringstream in{std::string(text)};
    std::string w;
    while (in >> w) {
        if (w == word) {
            return true;
        }
    }
    return false;
}

constexpr std::string_view kV2Required[] = {"cpuset", "memory", "pids"};

// This process's cgroup in the unified hierarchy ("0::/path" of /proc/self/cgroup).
std::string own_v2_cgroup() {
    const auto text = read_file("/proc/self/cgroup");
    if (!text) {
        return "/";
    }
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.starts_with("0::")) {
            return line.substr(3);
        }
    }
    return "/";
}

CgroupSupport detect_v2(const std::string& mount_root) {
    // From this process's cgroup up to the mount's root: the first level whose
    // cgroup.controllers offers all of them is where prepare_fence_root can start enabling.
    std::string rel = own_v2_cgroup();
    for (;;) {
        const std::string dir = rel == "/" ? mount_root : mount_root + rel;
        const std::string file = dir + "/cgroup.controllers";
        if (const auto offered = read_file(file)) {
            bool all = true;
            for (std::string_view c : kV2Required) {
                all = all && has_word(*offered, c);
            }
            if (all) {
                return {CgroupMode::V2, fmt::format("cpuset, memory and pids offered in {}", file)};
            }
        }
        if (rel == "/" || rel.empty()) {
            break;
        }
        const auto slash = rel.rfind('/');
        rel = slash == 0 ? "/" : rel.substr(0, slash);
    }
    const std::string file = mount_root + "/cgroup.controllers";
    const auto offered = read_file(file);
    if (!offered) {
        return {CgroupMode::None, fmt::format("cannot read {}", file)};
    }
    std::vector<std::string> missing;
    for (std::string_view c : kV2Required) {
        if (!has_word(*offered, c)) {
            missing.emplace_back(c);
        }
    }
    return {CgroupMode::None,
            fmt::format("no {} controller in {}", fmt::join(missing, ", "), file)};
}

CgroupSupport detect_v1(const std::string& mount_root) {
    const std::vector<cgroup::V1Mount> mounts = cgroup::v1_mounts(mount_root);
    std::vector<std::string> found;
    std::vector<std::string> missing;
    for (std::string_view c : cgroup::kV1Controllers) {
        auto it = std::find_if(mounts.begin(), mounts.end(),
                               [&](const cgroup::V1Mount& m) { return m.controller == c; });
        if (it == mounts.end()) {
            missing.emplace_back(c);
        } else {
            found.push_back(fmt::format("{} at {}", c, it->mount_point));
        }
    }
    if (!missing.empty()) {
        return {CgroupMode::None,
                fmt::format("{} is not a cgroup2 mount and no v1 hierarchy of {} is mounted "
                            "under it (see /proc/self/mountinfo)",
                            mount_root, fmt::join(missing, ", "))};
    }
    return {CgroupMode::V1, fmt::format("{}", fmt::join(found, ", "))};
}

}  // namespace

std::string_view to_string(CgroupMode mode) {
    switch (mode) {
        case CgroupMode::None:
            return "none";
        case CgroupMode::V1:
            return "v1";
        case CgroupMode::V2:
            return "v2";
    }
    return "none";
}

std::optional<CgroupMode> cgroup_mode_from_string(std::string_view text) {
    for (CgroupMode m : {CgroupMode::None, CgroupMode::V1, CgroupMode::V2}) {
        if (text == to_string(m)) {
            return m;
        }
    }
    return std::nullopt;
}

CgroupSupport detect_cgroups(const std::string& mount_root) {
    struct statfs fs {};
    if (::statfs(mount_root.c_str(), &fs) != 0) {
        return {CgroupMode::None,
                fmt::format("cannot statfs {}: {}", mount_root, errno_text(errno))};
    }
    if (fs.f_type == CGROUP2_SUPER_MAGIC) {
        return detect_v2(mount_root);
    }
    return detect_v1(mount_root);
}

std::string cpu_list(const std::vector<int>& cpus) {
    // core/host.h writes the syntax; a cpuset takes it sorted and without repeats.
    std::vector<int> sorted = cpus;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    return format_cpu_list(sorted);
}

std::string fence_spec_problem(const FenceSpec& spec) {
    if (spec.mode == CgroupMode::None) {
        return "a fence needs cgroup mode v1 or v2";
    }
    if (spec.name.empty() || spec.name == "." || spec.name == ".." ||
        spec.name.find('/') != std::string::npos) {
        return fmt::format("fence name \"{}\" must be one path component", spec.name);
    }
    if (spec.root.empty()) {
        return "a fence needs a root";
    }
    if (spec.mode == CgroupMode::V1 && spec.root.front() == '/') {
        return fmt::format("v1 fence root \"{}\" must be relative to the controllers' mounts",
                           spec.root);
    }
    if (spec.mode == CgroupMode::V2 && spec.root.front() != '/') {
        return fmt::format("v2 fence root \"{}\" must be an absolute cgroup directory", spec.root);
    }
    for (const std::string& part : split_list(spec.root, '/')) {
        if (part == "..") {
            return fmt::format("fence root \"{}\" must not contain \"..\"", spec.root);
        }
    }
    for (int cpu : spec.cpus) {
        if (cpu < 0) {
            return fmt::format("cpu {} of the fence is negative", cpu);
        }
    }
    if (spec.memory_bytes && *spec.memory_bytes <= 0) {
        return "the fence's memory limit must be positive";
    }
    if (spec.pids_max && *spec.pids_max <= 0) {
        return "the fence's pids limit must be positive";
    }
    for (const DeviceNumber& d : spec.deny_devices) {
        if ((d.type != 'c' && d.type != 'b') || d.major < 0 || d.minor < 0) {
            return fmt::format("denied device {} {}:{} is not 'c' or 'b' with numbers >= 0", d.type,
                               d.major, d.minor);
        }
    }
    return "";
}

std::string fence_leaf_path(const FenceSpec& spec, std::string_view controller) {
    if (spec.mode == CgroupMode::V1) {
        return cgroup::v1_leaf_path(spec, controller.empty() ? "cpuset" : controller);
    }
    return spec.root + "/" + spec.name;
}

namespace {

Result<void> check_spec(const FenceSpec& spec) {
    if (std::string problem = fence_spec_problem(spec); !problem.empty()) {
        return fail(ErrorCode::InvalidArgument, problem);
    }
    return {};
}

Result<void> check_root(CgroupMode mode, const std::string& root) {
    FenceSpec probe;
    probe.mode = mode;
    probe.root = root;
    probe.name = "probe";
    return check_spec(probe);
}

}  // namespace

Result<void> prepare_fence_root(CgroupMode mode, const std::string& root) {
    if (auto ok = check_root(mode, root); !ok) {
        return ok;
    }
    return mode == CgroupMode::V1 ? cgroup::v1_prepare_root(root) : cgroup::v2_prepare_root(root);
}

Result<void> remove_fence_root(CgroupMode mode, const std::string& root) {
    if (auto ok = check_root(mode, root); !ok) {
        return ok;
    }
    return mode == CgroupMode::V1 ? cgroup::v1_remove_root(root) : cgroup::v2_remove_root(root);
}

Result<void> create_fence(const FenceSpec& spec) {
    if (auto ok = check_spec(spec); !ok) {
        return ok;
    }
    return spec.mode == CgroupMode::V1 ? cgroup::v1_create(spec) : cgroup::v2_create(spec);
}

Result<void> join_fence(const FenceSpec& spec) {
    if (auto ok = check_spec(spec); !ok) {
        return ok;
    }
    return spec.mode == CgroupMode::V1 ? cgroup::v1_join(spec) : cgroup::v2_join(spec);
}

Result<void> enter_fence(const FenceSpec& spec) {
    if (auto ok = create_fence(spec); !ok) {
        return ok;
    }
    return join_fence(spec);
}

FenceUsage read_fence_usage(const FenceSpec& spec) {
    if (!fence_spec_problem(spec).empty()) {
        return {};
    }
    return spec.mode == CgroupMode::V1 ? cgroup::v1_usage(spec) : cgroup::v2_usage(spec);
}

Result<void> remove_fence(const FenceSpec& spec) {
    if (auto ok = check_spec(spec); !ok) {
        return ok;
    }
    return spec.mode == CgroupMode::V1 ? cgroup::v1_remove(spec) : cgroup::v2_remove(spec);
}

}  // namespace carma::exec
