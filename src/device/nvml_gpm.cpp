#include "device/nvml_gpm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace carma::device {

using namespace nvml_abi;

namespace {

// The metrics asked for, in the order of Activity's fields.
constexpr unsigned kMetricIds[] = {kNvmlGpmMetricSmUtil, kNvmlGpmMetricSmOccupancy,
                                   kNvmlGpmMetricDramBwUtil};
constexpr unsigned kMetricCount = sizeof(kMetricIds) / sizeof(kMetricIds[0]);

// A percentage the driver vouches for, as a fraction; nothing for a failed or meaningless one.
std::optional<double> fraction(const NvmlGpmMetric& metric, unsigned expected_id) {
    if (metric.metricId != expected_id || metric.nvmlReturn != kNvmlSuccess ||
        !std::isfinite(metric.value)) {
        return std::nullopt;
    }
    return std::clamp(metric.value / 100.0, 0.0, 1.0);
}

}  // namespace

std::unique_ptr<GpmReader> GpmReader::open(const NvmlApi& api, nvmlDevice_t device,
                                           Clock::time_point now) {
    if (!api.has_gpm()) {
        return nullptr;
    }
    NvmlGpmSupport support{kNvmlGpmSupportVersion, 0};
    if (api.gpm_query_support(device, &support) != kNvmlSuccess || support.isSupportedDevice == 0) {
        return nullptr;
    }
    nvmlGpmSample_t a = nullptr;
    nvmlGpmSample_t b = nullptr;
    if (api.gpm_sample_alloc(&a) != kNvmlSuccess || api.gpm_sample_alloc(&b) != kNvmlSuccess) {
        for (nvmlGpmSample_t sample : {a, b}) {
            if (sample != nullptr) {
                api.gpm_sample_free(sample);
            }
        }
        return nullptr;
    }
    std::unique_ptr<GpmReader> reader(new GpmReader(api, device, a, b));
    // A failure here only means the first read starts the period instead.
    if (api.gpm_sample_get(device, reader->previous_) == kNvmlSuccess) {
        reader->previous_time_ = now;
    }
    return reader;
}

GpmReader::GpmReader(const NvmlApi& api, nvmlDevice_t device, nvmlGpmSample_t previous,
                     nvmlGpmSample_t current)
    : api_(api),
      device_(device),
      previous_(previous),
      current_(current),
      request_(std::make_unique<NvmlGpmMetricsGet>()) {}

GpmReader::~GpmReader() {
    api_.gpm_sample_free(previous_);
    api_.gpm_sample_free(current_);
}

GpmReader::Activity GpmReader::read(Clock::time_point now) {
    if (!previous_time_) {
        if (api_.gpm_sample_get(device_, previous_) == kNvmlSuccess) {
            previous_time_ = now;
        }
        last_ = {};
        return last_;
    }
    if (now - *previous_time_ < kMinPeriod) {
        return last_;
    }
    // A failed sample leaves the previous one in place: the next read covers the longer period.
    if (api_.gpm_sample_get(device_, current_) != kNvmlSuccess) {
        last_ = {};
        return last_;
    }
    std::memset(request_.get(), 0, sizeof(NvmlGpmMetricsGet));
    request_->version = kNvmlGpmMetricsGetVersion;
    request_->numMetrics = kMetricCount;
    request_->sample1 = previous_;
    request_->sample2 = current_;
    for (unsigned i = 0; i < kMetricCount; ++i) {
        request_->metrics[i].metricId = kMetricIds[i];
    }
    const nvmlReturn_t rc = api_.gpm_metrics_get(request_.get());
    std::swap(previous_, current_);  // this sample starts the next period
    previous_time_ = now;
    if (rc != kNvmlSuccess) {
        last_ = {};
        return last_;
    }
    last_.smact = fraction(request_->metrics[0], kMetricIds[0]);
    last_.smocc = fraction(request_->metrics[1], kMetricIds[1]);
    last_.drama = fraction(request_->metrics[2], kMetricIds[2]);
    return last_;
}

}  // namespace carma::device
