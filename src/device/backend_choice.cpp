#include "device/backend_choice.h"

#include <fnmatch.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "device/dcgm.h"
#include "device/dl_library.h"
#include "device/emulated.h"
#include "device/nvml.h"
#include "model/world.h"

namespace carma::device {

namespace {

constexpr const char* kDefaultEmulated = "4xA100-40GB";

Result<std::unique_ptr<GpuBackend>> emulated(const BackendChoice& c, const std::string& set,
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
    EmulatorOptions o;
    o.gpus = *gpus;
    o.sharing = *sharing;
    o.world = *world;
    o.file = c.state_dir + "/emulated-gpus";
    o.attempts_running = attempts_running;
    o.on_note = [](std::string_view note) { spdlog::warn("{}", note); };
    auto backend = open_emulated(o);
    if (backend) {
        // At every start, so that a log read later cannot be mistaken for real hardware.
        spdlog::warn("GPUs are EMULATED ({}): no real GPU is used; tasks see made-up UUIDs in "
                     "CUDA_VISIBLE_DEVICES and only carma-fakejob processes use them",
                     (*backend)->name());
    }
    return backend;
}

Result<std::unique_ptr<GpuBackend>> dcgm(const BackendChoice& c) {
    DcgmOptions o;
    o.host = c.dcgm_host;
    o.on_note = [](std::string_view note) { spdlog::warn("DCGM: {}", note); };
    return open_dcgm(o);
}

Result<std::unique_ptr<GpuBackend>> automatic(const BackendChoice& c, int attempts_running,
                                                      const DriverProbe& probe) {
    auto from_dcgm = dcgm(c);
    if (from_dcgm && !(*from_dcgm)->gpus().empty()) {
        spdlog::info("--gpus auto: using {} NVIDIA GPU(s) through DCGM", (*from_dcgm)->gpus().size());
        return from_dcgm;
    }
    const std::string no_dcgm =
        from_dcgm ? "DCGM reports no GPUs" : from_dcgm.error().message;
    auto nvml = open_nvml();
    if (nvml && !(*nvml)->gpus().empty()) {
        spdlog::info("--gpus auto: using {} NVIDIA GPU(s) through NVML (GPM where the GPU has "
                     "it; each GPU's metric sources are logged with its first samples); not "
                     "DCGM: {}",
                     (*nvml)->gpus().size(), no_dcgm);
        return nvml;
    }
    const std::string no_nvml = nvml ? "NVML reports no GPUs" : nvml.error().message;
    if (std::string driver = nvidia_driver_expected(probe); !driver.empty()) {
        // NVML's error first: it is the one that says what is wrong with the driver.
        return fail(ErrorCode::Io,
                    fmt::format("--gpus auto: an NVIDIA driver is meant to be here ({}) but no "
                                "GPU can be used, so carma does not start (it would run real "
                                "jobs on emulated GPUs): {}; DCGM: {}. Fix the driver, or "
                                "start with --gpus emulated on purpose",
                                driver, no_nvml, no_dcgm));
    }
    spdlog::warn("--gpus auto: no NVIDIA driver on this machine (no /dev/nvidiactl, no "
                 "/proc/driver/nvidia, no libnvidia-ml.so.1; DCGM: {}; NVML: {}); using "
                 "EMULATED GPUs {}",
                 no_dcgm, no_nvml, kDefaultEmulated);
    return emulated(c, kDefaultEmulated, attempts_running);
}

std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

}  // namespace

DriverProbe driver_probe_from_environment() {
    DriverProbe p;
    p.nvml_library = env_or_empty(kNvmlLibraryEnv);
    p.dcgm_library = env_or_empty(kDcgmLibraryEnv);
    p.loads = [](const std::string& name) {
        return static_cast<bool>(SharedLibrary::open({name}));
    };
    return p;
}

std::string nvidia_driver_expected(const DriverProbe& probe) {
    if (!probe.nvml_library.empty()) {
        return fmt::format("{} names {}", kNvmlLibraryEnv, probe.nvml_library);
    }
    if (!probe.dcgm_library.empty()) {
        return fmt::format("{} names {}", kDcgmLibraryEnv, probe.dcgm_library);
    }
    const std::filesystem::path root = probe.root.empty() ? "/" : probe.root;
    for (const char* path : {"dev/nvidiactl", "proc/driver/nvidia"}) {
        std::error_code ec;
        if (std::filesystem::exists(root / path, ec)) {
            return fmt::format("/{} exists", path);
        }
    }
    if (probe.loads && probe.loads("libnvidia-ml.so.1")) {
        return "libnvidia-ml.so.1 loads";
    }
    return {};
}

std::string exclusion_reason(const GpuInfo& gpu, const std::vector<std::string>& patterns) {
    if (!gpu.fault.empty()) {
        return gpu.fault;
    }
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

Result<void> check_some_gpu_usable(const std::vector<GpuInfo>& gpus,
                                   const std::vector<std::string>& patterns) {
    std::vector<std::string> reasons;
    for (const GpuInfo& g : gpus) {
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

std::string describe_sources(const GpuSample& s) {
    return fmt::format("SMACT {}, SMOCC {}, DRAMA {}, util {}, power {}, memory {}",
                       to_string(s.sources.smact), to_string(s.sources.smocc),
                       to_string(s.sources.drama), to_string(s.sources.util),
                       to_string(s.sources.power), to_string(s.sources.memory));
}

Result<std::unique_ptr<GpuBackend>> open_backend(const BackendChoice& c,
                                                         int attempts_running) {
    return open_backend(c, attempts_running, driver_probe_from_environment());
}

Result<std::unique_ptr<GpuBackend>> open_backend(const BackendChoice& c,
                                                         int attempts_running,
                                                         const DriverProbe& probe) {
    if (c.gpus.starts_with("emulated:")) {
        return emulated(c, c.gpus.substr(9), attempts_running);
    }
    if (c.gpus == "emulated") {
        return emulated(c, kDefaultEmulated, attempts_running);
    }
    if (c.gpus == "nvml") {
        return open_nvml();
    }
    if (c.gpus == "dcgm") {
        return dcgm(c);
    }
    if (c.gpus == "auto") {
        return automatic(c, attempts_running, probe);
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("--gpus '{}' is not understood; use auto, dcgm, nvml or "
                            "emulated:COUNTxTYPE (e.g. emulated:4xA100-40GB)",
                            c.gpus));
}

}  // namespace carma::device
