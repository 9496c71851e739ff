#pragma once
// SM activity, SM occupancy and DRAM bandwidth utilisation from NVML GPM (GPU performance
// monitoring, Hopper and later): real measurements, like DCGM's profiling fields, where plain NVML
// only has utilisation rates to stand in for them.
//
// GPM metrics are averages over the period between two samples the caller takes. The reader keeps
// the previous sample and takes one at open, so the first read already covers a period. NVML's
// documentation asks for at least 100 ms between the two samples (the counters refresh at that
// rate); a read sooner than that repeats the last values rather than divide by a period too short
// to measure.

#include <chrono>
#include <memory>
#include <optional>

#include "device/nvml_api.h"

namespace carma::device {

class GpmReader {
public:
    using Clock = std::chrono::steady_clock;

    // 0..1 each; nullopt where GPM could not give the metric this time.
    struct Activity {
        std::optional<double> smact;  // NVML_GPM_METRIC_SM_UTIL
        std::optional<double> smocc;  // NVML_GPM_METRIC_SM_OCCUPANCY
        std::optional<double> drama;  // NVML_GPM_METRIC_DRAM_BW_UTIL
    };

    static constexpr Clock::duration kMinPeriod = std::chrono::milliseconds(100);

    // Nothing where the driver or the GPU has no GPM, or its sample buffers cannot be allocated:
    // the caller then falls back to plain NVML. `api` must outlive the reader, and NVML must stay
    // initialised until the reader is gone (it frees its buffers through NVML).
    static std::unique_ptr<GpmReader> open(const nvml_abi::NvmlApi& api,
                                           nvml_abi::nvmlDevice_t device, Clock::time_point now);

    ~GpmReader();
    GpmReader(const GpmReader&) = delete;
    GpmReader& operator=(const GpmReader&) = delete;

    // Takes a sample and returns the metrics over the period since the previous one.
    Activity read(Clock::time_point now);

private:
    GpmReader(const nvml_abi::NvmlApi& api, nvml_abi::nvmlDevice_t device,
              nvml_abi::nvmlGpmSample_t previous, nvml_abi::nvmlGpmSample_t current);

    const nvml_abi::NvmlApi& api_;
    nvml_abi::nvmlDevice_t device_;
    nvml_abi::nvmlGpmSample_t previous_;
    nvml_abi::nvmlGpmSample_t current_;
    std::optional<Clock::time_point> previous_time_;  // empty until a sample has been taken
    Activity last_;
    std::unique_ptr<nvml_abi::NvmlGpmMetricsGet> request_;  // 13 KB, so not on the stack
};

}  // namespace carma::device
