#include "daemon/backend.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "device/emulated.h"
#include "device/nvml.h"

namespace carma::daemon {

namespace {

constexpr const char* kDefaultEmulated = "4xA100-40GB";

Result<std::unique_ptr<device::GpuBackend>> emulated(const DaemonConfig& c, const std::string& set) {
    auto gpus = model::parse_gpu_set(set);
    if (!gpus) {
        return tl::unexpected(gpus.error());
    }
    auto sharing = model::parse_sharing_mode(c.sharing);
    if (!sharing) {
        return tl::unexpected(sharing.error());
    }
    device::EmulatorOptions o;
    o.gpus = *gpus;
    o.sharing = *sharing;
    o.file = c.state_dir + "/emulated-gpus";
    return device::open_emulated(o);
}

}  // namespace

Result<std::unique_ptr<device::GpuBackend>> open_backend(const DaemonConfig& c) {
    if (c.gpus.starts_with("emulated:")) {
        return emulated(c, c.gpus.substr(9));
    }
    if (c.gpus == "emulated") {
        return emulated(c, kDefaultEmulated);
    }
    if (c.gpus == "nvml") {
        return device::open_nvml();
    }
    if (c.gpus == "auto") {
        auto nvml = device::open_nvml();
        if (nvml && !(*nvml)->gpus().empty()) {
            spdlog::info("using {} NVIDIA GPU(s) through NVML", (*nvml)->gpus().size());
            return nvml;
        }
        spdlog::info("no NVIDIA GPU found ({}); using emulated GPUs {}",
                     nvml ? "NVML reports no devices" : nvml.error().message, kDefaultEmulated);
        return emulated(c, kDefaultEmulated);
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("--gpus '{}' is not understood; use auto, nvml or "
                            "emulated:COUNTxTYPE (e.g. emulated:4xA100-40GB)",
                            c.gpus));
}

}  // namespace carma::daemon
