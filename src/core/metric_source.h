#pragma once
// Where each GPU metric came from. The risk filter trusts only real measurements (DCGM profiling
// fields, NVML GPM, the emulated GPUs' device model); NVML's coarse utilisation rates are proxies
// and are labelled so; a metric no source can give is unavailable, which means unknown, never 0.

#include <cstdint>
#include <string_view>

namespace carma {

enum class MetricSource : std::uint8_t {
    Unavailable,  // no source gives it on this GPU: unknown
    Emulated,     // the device model of the emulated GPUs (or the simulator)
    Dcgm,         // DCGM fields (profiling fields 1002/1003/1005 for SMACT/SMOCC/DRAMA)
    NvmlGpm,      // NVML GPM metrics (Hopper and later)
    Nvml,         // plain NVML; for SMACT and DRAMA a proxy (utilisation rates)
};

constexpr std::string_view to_string(MetricSource s) {
    switch (s) {
        case MetricSource::Unavailable: return "unavailable";
        case MetricSource::Emulated: return "emulated";
        case MetricSource::Dcgm: return "dcgm";
        case MetricSource::NvmlGpm: return "nvml-gpm";
        case MetricSource::Nvml: return "nvml";
    }
    return "unavailable";
}

// A measurement of the quantity itself, not a stand-in for it. Only meaningful for SMACT, SMOCC
// and DRAMA: NVML's utilisation rate is a real utilisation but only a proxy for SM activity.
constexpr bool is_real_activity(MetricSource s) {
    return s == MetricSource::Emulated || s == MetricSource::Dcgm || s == MetricSource::NvmlGpm;
}

// One source per metric of a sample.
struct MetricSources {
    MetricSource memory = MetricSource::Unavailable;  // free/used framebuffer
    MetricSource util = MetricSource::Unavailable;    // GPU utilisation (nvidia-smi's)
    MetricSource smact = MetricSource::Unavailable;
    MetricSource smocc = MetricSource::Unavailable;
    MetricSource drama = MetricSource::Unavailable;
    MetricSource power = MetricSource::Unavailable;
    MetricSource energy = MetricSource::Unavailable;

    static constexpr MetricSources all(MetricSource s) { return {s, s, s, s, s, s, s}; }
    friend constexpr bool operator==(const MetricSources&, const MetricSources&) = default;
};

}  // namespace carma
