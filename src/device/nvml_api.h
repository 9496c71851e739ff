#pragma once
// The part of the NVML C API that CARMA uses, declared here rather than taken from NVIDIA's nvml.h
// so that building needs nothing from NVIDIA, and the table of entry points nvml.cpp resolves
// with dlsym. Only the layouts and values below matter: they are fixed by NVML's ABI (NVML API
// Reference, "Device Structs", "GPM Structs", "GPM Enums"), and every structure is checked
// against the documented sizes and offsets at compile time.

#include <cstddef>
#include <string>

#include <fmt/format.h>

namespace carma::device::nvml_abi {

using nvmlReturn_t = int;
struct NvmlDeviceOpaque;  // NVML's struct nvmlDevice_st, never looked into
using nvmlDevice_t = NvmlDeviceOpaque*;
struct NvmlGpmSampleOpaque;  // struct nvmlGpmSample_st: a buffer NVML allocates and fills
using nvmlGpmSample_t = NvmlGpmSampleOpaque*;

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;

// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE: room for any UUID or name.
constexpr unsigned kNvmlStringSize = 96;
// NVML_VALUE_NOT_AVAILABLE: what usedGpuMemory holds when the driver will not say (no privilege).
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
// NVML_DEVICE_MIG_ENABLE: the current (or pending) mode nvmlDeviceGetMigMode reports for MIG on.
constexpr unsigned kNvmlMigEnable = 1;

struct NvmlMemory {  // nvmlMemory_t (v1), bytes
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
static_assert(sizeof(NvmlMemory) == 24);

struct NvmlUtilization {  // nvmlUtilization_t, percent over the driver's last sample period
    unsigned int gpu;
    unsigned int memory;
};
static_assert(sizeof(NvmlUtilization) == 8);

// nvmlProcessInfo_t as the _v2 and _v3 process queries (compute and MPS) fill it.
struct NvmlProcessInfo {
    unsigned int pid;
    unsigned long long usedGpuMemory;  // bytes
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};
static_assert(sizeof(NvmlProcessInfo) == 24);
static_assert(offsetof(NvmlProcessInfo, usedGpuMemory) == 8);
static_assert(offsetof(NvmlProcessInfo, gpuInstanceId) == 16);

constexpr nvmlReturn_t kNvmlNotFound = 6;  // NVML_ERROR_NOT_FOUND

// nvmlProcessUtilizationSample_t: one process's utilisation over one of the driver's sample
// periods in which it was busy; each figure a percentage.
struct NvmlProcessUtilizationSample {
    unsigned int pid;
    unsigned long long timeStamp;  // CPU time stamp, microseconds
    unsigned int smUtil;           // SM (3D/compute) utilisation
    unsigned int memUtil;          // frame buffer memory utilisation
    unsigned int encUtil;
    unsigned int decUtil;
};
static_assert(sizeof(NvmlProcessUtilizationSample) == 32);
static_assert(offsetof(NvmlProcessUtilizationSample, timeStamp) == 8);
static_assert(offsetof(NvmlProcessUtilizationSample, smUtil) == 16);

// --- GPM (GPU performance monitoring, Hopper and later) --------------------------------------

constexpr unsigned kNvmlGpmSupportVersion = 1;     // NVML_GPM_SUPPORT_VERSION
constexpr unsigned kNvmlGpmMetricsGetVersion = 1;  // NVML_GPM_METRICS_GET_VERSION

// nvmlGpmMetricId_t values CARMA asks for; each is a percentage, 0.0 - 100.0, over the period
// between two GPM samples.
constexpr unsigned kNvmlGpmMetricSmUtil = 2;       // NVML_GPM_METRIC_SM_UTIL: SMs busy (SMACT)
constexpr unsigned kNvmlGpmMetricSmOccupancy = 3;  // NVML_GPM_METRIC_SM_OCCUPANCY: warps (SMOCC)
constexpr unsigned kNvmlGpmMetricDramBwUtil = 10;  // NVML_GPM_METRIC_DRAM_BW_UTIL: DRAM bw (DRAMA)

// NVML_GPM_METRIC_MAX sizes the metrics array: 98 in the R525 header, 333 in later ones, with the
// structure's version still 1, so a driver can only rely on the first numMetrics entries. The
// largest known size keeps the buffer at least as big as any driver's idea of it.
constexpr std::size_t kNvmlGpmMetricMax = 333;

struct NvmlGpmSupport {  // nvmlGpmSupport_t
    unsigned int version;
    unsigned int isSupportedDevice;
};
static_assert(sizeof(NvmlGpmSupport) == 8);

struct NvmlGpmMetric {  // nvmlGpmMetric_t
    unsigned int metricId;    // in
    nvmlReturn_t nvmlReturn;  // out: this metric's status; value is valid only on success
    double value;             // out
    struct {
        char* shortName;
        char* longName;
        char* unit;
    } metricInfo;  // out: may be null
};
static_assert(sizeof(NvmlGpmMetric) == 40);
static_assert(offsetof(NvmlGpmMetric, nvmlReturn) == 4);
static_assert(offsetof(NvmlGpmMetric, value) == 8);
static_assert(offsetof(NvmlGpmMetric, metricInfo) == 16);

struct NvmlGpmMetricsGet {  // nvmlGpmMetricsGet_t
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;  // the earlier sample
    nvmlGpmSample_t sample2;  // the later one
    NvmlGpmMetric metrics[kNvmlGpmMetricMax];
};
static_assert(offsetof(NvmlGpmMetricsGet, numMetrics) == 4);
static_assert(offsetof(NvmlGpmMetricsGet, sample1) == 8);
static_assert(offsetof(NvmlGpmMetricsGet, sample2) == 16);
static_assert(offsetof(NvmlGpmMetricsGet, metrics) == 24);
static_assert(sizeof(NvmlGpmMetricsGet) == 24 + kNvmlGpmMetricMax * sizeof(NvmlGpmMetric));

// --- entry points ---------------------------------------------------------------------------

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using GetCountFn = nvmlReturn_t (*)(unsigned int*);
using GetHandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using GetStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using GetMemoryFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlMemory*);
using GetUtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlUtilization*);
using GetPowerFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);         // milliwatts
using GetEnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);  // millijoules
using GetProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, NvmlProcessInfo*);
using GetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* current, unsigned int* pending);
using GetMinorNumberFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int* minor);
using GetProcessUtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlProcessUtilizationSample*,
                                                 unsigned int* count,
                                                 unsigned long long last_seen_time_stamp);
using GpmQuerySupportFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlGpmSupport*);
using GpmSampleAllocFn = nvmlReturn_t (*)(nvmlGpmSample_t*);
using GpmSampleFreeFn = nvmlReturn_t (*)(nvmlGpmSample_t);
using GpmSampleGetFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
using GpmMetricsGetFn = nvmlReturn_t (*)(NvmlGpmMetricsGet*);

// The entry points, resolved once when NVML is opened. The optional ones may be null.
struct NvmlApi {
    InitFn init = nullptr;
    ShutdownFn shutdown = nullptr;
    ErrorStringFn error_string = nullptr;
    GetCountFn device_count = nullptr;
    GetHandleFn device_handle = nullptr;
    GetStringFn device_uuid = nullptr;
    GetStringFn device_name = nullptr;
    GetMemoryFn memory_info = nullptr;
    GetUtilizationFn utilization = nullptr;
    GetPowerFn power_usage = nullptr;
    GetEnergyFn total_energy = nullptr;  // optional: old drivers lack it, pre-Volta GPUs refuse
    GetProcessesFn running_processes = nullptr;
    const char* running_processes_name = "";  // which version was found, for messages
    GetProcessesFn mps_processes = nullptr;   // optional: MPS clients
    const char* mps_processes_name = "";
    GetMigModeFn mig_mode = nullptr;  // optional
    GetMinorNumberFn minor_number = nullptr;  // optional: /dev/nvidiaN's N, for device fences
    GetProcessUtilizationFn process_utilization = nullptr;  // optional: per-process SM activity
    // Optional, all or none: GPM came with the R525 drivers (CUDA 12).
    GpmQuerySupportFn gpm_query_support = nullptr;
    GpmSampleAllocFn gpm_sample_alloc = nullptr;
    GpmSampleFreeFn gpm_sample_free = nullptr;
    GpmSampleGetFn gpm_sample_get = nullptr;
    GpmMetricsGetFn gpm_metrics_get = nullptr;

    bool has_gpm() const {
        return gpm_query_support != nullptr && gpm_sample_alloc != nullptr &&
               gpm_sample_free != nullptr && gpm_sample_get != nullptr &&
               gpm_metrics_get != nullptr;
    }
};

// "nvmlDeviceGetMemoryInfo: GPU is lost (NVML error 15)"
inline std::string describe(const NvmlApi& api, const char* call, nvmlReturn_t rc) {
    const char* text = api.error_string(rc);
    return fmt::format("{}: {} (NVML error {})", call, text != nullptr ? text : "unknown error",
                       rc);
}

}  // namespace carma::device::nvml_abi
