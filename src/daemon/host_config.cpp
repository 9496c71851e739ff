#include "daemon/host_config.h"

#include <fmt/format.h>

#include "core/host.h"

namespace carma::daemon {

namespace {

std::string memory_text(MiB mib) {
    return mib % 1024 == 0 ? fmt::format("{}GiB", mib / 1024) : fmt::format("{}MiB", mib);
}

Result<std::string> text_of(const YAML::Node& v, const std::string& key,
                            const std::string& source) {
    if (!v.IsScalar()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: '{}' must be a single value", source,
                                v.Mark().line + 1, key));
    }
    return v.Scalar();
}

Result<double> number_of(const YAML::Node& v, const std::string& key, const std::string& source,
                         double lo, double hi) {
    auto text = text_of(v, key, source);
    if (!text) {
        return tl::unexpected(text.error());
    }
    try {
        const double d = v.as<double>();
        if (d >= lo && d <= hi) {
            return d;
        }
    } catch (const YAML::Exception&) {
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("{} line {}: {} is '{}'; give a number from {} to {}", source,
                            v.Mark().line + 1, key, *text, lo, hi));
}

Result<MiB> memory_of(const YAML::Node& v, const std::string& key, const std::string& source) {
    auto text = text_of(v, key, source);
    if (!text) {
        return tl::unexpected(text.error());
    }
    if (*text == "0") {
        return MiB{0};
    }
    auto mib = parse_memory(*text);
    if (!mib) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: {}: {}", source, v.Mark().line + 1, key,
                                mib.error().message));
    }
    return *mib;
}

}  // namespace

const std::vector<HostConfigKey>& host_config_keys() {
    static const std::vector<HostConfigKey> keys = {
        {"reserved_cores", "The first N online cores stay the system's and the daemon's; tasks "
                           "never hold them (Slurm's CoreSpecCount)."},
        {"reserved_memory", "Host memory kept out of tasks' reach (Slurm's MemSpecLimit)."},
        {"default_cpus_per_task", "Cores of its own a task without -c holds; 0: it runs on the "
                                  "shared cores (reserved ones and those no task holds)."},
        {"default_mem_per_cpu", "Host memory a task without --mem reserves per core of its own "
                                "(Slurm's DefMemPerCPU); 0 reserves none."},
        {"default_mem_limit", "The memory fence of a task that reserved none; 0 is the host's "
                              "memory less reserved_memory."},
        {"cpu_billing_weight", "GPU-seconds a CPU-only task is charged per core-second (Slurm's "
                               "TRESBillingWeights CPU=)."},
        {"pids_max", "Processes and threads one attempt may have at once."},
        {"cgroup_root", "The cgroup subtree the daemon owns: v1, a name under each controller "
                        "(\"\" is carma); v2, a directory (\"\" is carma-tasks beside the "
                        "daemon's own cgroup)."},
    };
    return keys;
}

Result<void> parse_fences(const YAML::Node& v, const std::string& source, HostConfig& out) {
    auto text = text_of(v, "fences", source);
    if (!text) {
        return tl::unexpected(text.error());
    }
    // YAML reads a bare `off` as the string "off", which is what is meant here.
    const std::string value = *text == "false" ? "off" : *text;
    if (value != "auto" && value != "v1" && value != "v2" && value != "off") {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: fences '{}' is not known; give auto (the cgroup "
                                "hierarchy this machine has), v1, v2, or off (tasks unfenced)",
                                source, v.Mark().line + 1, *text));
    }
    out.fences = value;
    return {};
}

Result<void> parse_host_config(const YAML::Node& v, const std::string& source, HostConfig& out) {
    if (!v.IsMap()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: host must map keys to values (reserved_cores, "
                                "reserved_memory, default_cpus_per_task, ...)",
                                source, v.Mark().line + 1));
    }
    for (const auto& kv : v) {
        const std::string name = kv.first.as<std::string>();
        const std::string key = "host." + name;
        const YAML::Node& value = kv.second;
        Result<void> r;
        auto count = [&](int& slot, double lo, double hi) -> Result<void> {
            auto d = number_of(value, key, source, lo, hi);
            if (!d) {
                return tl::unexpected(d.error());
            }
            slot = static_cast<int>(*d);
            return {};
        };
        auto memory = [&](MiB& slot) -> Result<void> {
            auto m = memory_of(value, key, source);
            if (!m) {
                return tl::unexpected(m.error());
            }
            slot = *m;
            return {};
        };
        if (name == "reserved_cores") {
            r = count(out.reserved_cores, 0, kMaxCpusPerTask);
        } else if (name == "reserved_memory") {
            r = memory(out.reserved_memory_mib);
        } else if (name == "default_cpus_per_task") {
            r = count(out.default_cpus_per_task, 0, kMaxCpusPerTask);
        } else if (name == "default_mem_per_cpu") {
            r = memory(out.default_mem_per_cpu_mib);
        } else if (name == "default_mem_limit") {
            r = memory(out.default_mem_limit_mib);
        } else if (name == "cpu_billing_weight") {
            auto d = number_of(value, key, source, 0, 1000);
            if (!d) {
                return tl::unexpected(d.error());
            }
            out.cpu_billing_weight = *d;
        } else if (name == "pids_max") {
            r = count(out.pids_max, 1, 4194304);
        } else if (name == "cgroup_root") {
            auto t = text_of(value, key, source);
            if (!t) {
                return tl::unexpected(t.error());
            }
            out.cgroup_root = *t;
        } else {
            std::string known;
            for (const HostConfigKey& k : host_config_keys()) {
                known += (known.empty() ? "" : ", ") + std::string(k.key);
            }
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: unknown key '{}'; known keys of host: {}",
                                    source, kv.first.Mark().line + 1, key, known));
        }
        if (!r) {
            return r;
        }
    }
    return {};
}

std::optional<std::string> host_yaml_value(const HostConfig& c, std::string_view key) {
    auto quoted = [](const std::string& s) {
        return s.empty() ? std::string("\"\"") : fmt::format("\"{}\"", s);
    };
    if (key == "fences") {
        return c.fences;
    }
    if (key == "host") {
        return std::string();
    }
    if (key == "host.reserved_cores") {
        return std::to_string(c.reserved_cores);
    }
    if (key == "host.reserved_memory") {
        return memory_text(c.reserved_memory_mib);
    }
    if (key == "host.default_cpus_per_task") {
        return std::to_string(c.default_cpus_per_task);
    }
    if (key == "host.default_mem_per_cpu") {
        return c.default_mem_per_cpu_mib == 0 ? "0" : memory_text(c.default_mem_per_cpu_mib);
    }
    if (key == "host.default_mem_limit") {
        return c.default_mem_limit_mib == 0 ? "0" : memory_text(c.default_mem_limit_mib);
    }
    if (key == "host.cpu_billing_weight") {
        return fmt::format("{}", c.cpu_billing_weight);
    }
    if (key == "host.pids_max") {
        return std::to_string(c.pids_max);
    }
    if (key == "host.cgroup_root") {
        return quoted(c.cgroup_root);
    }
    return std::nullopt;
}

Result<void> check_host_config(const HostConfig& c) {
    if (c.cgroup_root.find("..") != std::string::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("host.cgroup_root '{}' must not contain '..'; name a subtree "
                                "the daemon may own",
                                c.cgroup_root));
    }
    if (c.reserved_memory_mib < 0 || c.default_mem_per_cpu_mib < 0 ||
        c.default_mem_limit_mib < 0) {
        return fail(ErrorCode::InvalidArgument, "host memory sizes must be 0 or more");
    }
    return {};
}

}  // namespace carma::daemon
