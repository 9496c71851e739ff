#include "daemon/backend.h"

#include <fnmatch.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "device/dcgm.h"
#include "device/emulated.h"
#include "device/nvml.h"
#include "model/world.h"

namespace carma::daemon {

namespace {

constexpr const char* kDefaultEmulated = "4xA100-40GB";

Result<std::unique_ptr<device::GpuBackend>> emulated(const DaemonConfig& c, const std::string& set,
                                                     int attempts_running) {
    auto gpus = model::parse_gpu_set(set);
    if (!gpus) {
        return tl::unexpected(gpus.error());
    }
    if (gpus->nodes > 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gpus emulated:{}: one daemon emulates the GPUs of one machine; "
                                "for {} nodes run one `carma agent --gpus emulated:{}x{}` per node "
                                "(or `carma slurm up`) against `carma serve --agents`",
                                set, gpus->nodes, gpus->per_node(), gpus->type.name));
    }
    auto sharing = model::parse_sharing_mode(c.sharing);
    if (!sharing) {
        return tl::unexpected(sharing.error());
    }
    auto kind = model::parse_world_kind(c.world);
    if (!kind) {
        return tl::unexpected(kind.error());
    }
    auto world = model::checked(model::WorldConfig{*kind, c.world_bias, c.world_noise, 1});
    if (!world) {
        return tl::unexpected(world.error());
    }
    device::EmulatorOptions o;
    o.gpus = *gpus;
    o.sharing = *sharing;
    o.world = *world;
    o.file = c.state_dir + "/emulated-gpus";
    o.attempts_running = attempts_running;
    o.on_note = [](std::string_view note) { spdlog::warn("{}", note); };
    return device::open_emulated(o);
}

Result<std::unique_ptr<device::GpuBackend>> dcgm(const DaemonConfig& c) {
    device::DcgmOptions o;
    o.host = c.dcgm_host;
    o.on_note = [](std::string_view note) { spdlog::warn("DCGM: {}", note); };
    return device::open_dcgm(o);
}

Result<std::unique_ptr<device::GpuBackend>> automatic(const DaemonConfig& c, int attempts_running) {
    auto from_dcgm = dcgm(c);
    if (from_dcgm && !(*from_dcgm)->gpus().empty()) {
        spdlog::info("--gpus auto: using {} NVIDIA GPU(s) through DCGM", (*from_dcgm)->gpus().size());
        return from_dcgm;
    }
    const std::string no_dcgm =
        from_dcgm ? "DCGM reports no GPUs" : from_dcgm.error().message;
    auto nvml = device::open_nvml();
    if (nvml && !(*nvml)->gpus().empty()) {
        spdlog::info("--gpus auto: using {} NVIDIA GPU(s) through NVML (GPM where the GPU has "
                     "it; each GPU's metric sources are logged with its first samples); not "
                     "DCGM: {}",
                     (*nvml)->gpus().size(), no_dcgm);
        return nvml;
    }
    spdlog::info("--gpus auto: no NVIDIA GPU found (DCGM: {}; NVML: {}); using emulated GPUs {}",
                 no_dcgm, nvml ? "NVML reports no devices" : nvml.error().message,
                 kDefaultEmulated);
    return emulated(c, kDefaultEmulated, attempts_running);
}

}  // namespace

std::string exclusion_reason(const device::GpuInfo& gpu, const std::vector<std::string>& patterns) {
    for (const std::string& pattern : patterns) {
        if (pattern.empty()) {
            continue;
        }
        if (pattern == std::to_string(gpu.index) || pattern == gpu.uuid ||
            ::fnmatch(pattern.c_str(), gpu.name.c_str(), 0) == 0) {
            return fmt::format("matches exclude_gpus pattern '{}'", pattern);
        }
    }
    if (gpu.mig_enabled) {
        return fmt::format("MIG mode is on, which CARMA does not support yet; turn it off "
                           "(nvidia-smi -i {} -mig 0) or leave the GPU out with exclude_gpus",
                           gpu.index);
    }
    return {};
}

Result<void> check_some_gpu_usable(const std::vector<device::GpuInfo>& gpus,
                                   const std::vector<std::string>& patterns) {
    std::vector<std::string> reasons;
    for (const device::GpuInfo& g : gpus) {
        std::string why = exclusion_reason(g, patterns);
        if (why.empty()) {
            return {};
        }
        reasons.push_back(fmt::format("GPU {} ({}) {}", g.index, g.name, why));
    }
    if (gpus.empty()) {
        return fail(ErrorCode::NotFound, "the GPU backend reports no GPU; nothing to schedule on");
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("every GPU is left out, so nothing could ever run: {}; change "
                            "exclude_gpus (--exclude-gpus)",
                            fmt::join(reasons, "; ")));
}

std::string describe_sources(const device::GpuSample& s) {
    return fmt::format("SMACT {}, SMOCC {}, DRAMA {}, util {}, power {}, memory {}",
                       to_string(s.sources.smact), to_string(s.sources.smocc),
                       to_string(s.sources.drama), to_string(s.sources.util),
                       to_string(s.sources.power), to_string(s.sources.memory));
}

Result<std::unique_ptr<device::GpuBackend>> open_backend(const DaemonConfig& c,
                                                         int attempts_running) {
    if (c.gpus.starts_with("emulated:")) {
        return emulated(c, c.gpus.substr(9), attempts_running);
    }
    if (c.gpus == "emulated") {
        return emulated(c, kDefaultEmulated, attempts_running);
    }
    if (c.gpus == "nvml") {
        return device::open_nvml();
    }
    if (c.gpus == "dcgm") {
        return dcgm(c);
    }
    if (c.gpus == "auto") {
        return automatic(c, attempts_running);
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("--gpus '{}' is not understood; use auto, dcgm, nvml or "
                            "emulated:COUNTxTYPE (e.g. emulated:4xA100-40GB)",
                            c.gpus));
}

}  // namespace carma::daemon
