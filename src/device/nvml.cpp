#include "device/nvml.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "device/dl_library.h"
#include "device/nvml_api.h"
#include "device/nvml_gpm.h"
#include "device/proc_names.h"

namespace carma::device {

namespace {

using namespace nvml_abi;
using Clock = std::chrono::steady_clock;

// --- loading the library --------------------------------------------------------------------

std::string library_path() {
    const char* env = std::getenv(kNvmlLibraryEnv);
    return env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
}

// What to do about nvmlInit_v2's common failures (codes of nvml.h).
std::string init_hint(nvmlReturn_t rc) {
    switch (rc) {
        case 18:  // NVML_ERROR_LIB_RM_VERSION_MISMATCH
            return "; the loaded NVIDIA kernel module and its libraries are of different "
                   "versions, as after a driver update: reboot (or reload the nvidia modules)";
        case 9:  // NVML_ERROR_DRIVER_NOT_LOADED
            return "; the NVIDIA kernel module is not loaded: see nvidia-smi and the kernel log";
        case 4:  // NVML_ERROR_NO_PERMISSION
            return "; the daemon's user may not open /dev/nvidia*: run it as a user who can";
        default: return "; see what nvidia-smi says";
    }
}

// GPM is used only when all five entry points are there.
void resolve_gpm(const SymbolTable& table, NvmlApi& api) {
    api.gpm_query_support = table.find<GpmQuerySupportFn>("nvmlGpmQueryDeviceSupport");
    api.gpm_sample_alloc = table.find<GpmSampleAllocFn>("nvmlGpmSampleAlloc");
    api.gpm_sample_free = table.find<GpmSampleFreeFn>("nvmlGpmSampleFree");
    api.gpm_sample_get = table.find<GpmSampleGetFn>("nvmlGpmSampleGet");
    api.gpm_metrics_get = table.find<GpmMetricsGetFn>("nvmlGpmMetricsGet");
    if (!api.has_gpm()) {
        api.gpm_query_support = nullptr;
        api.gpm_sample_alloc = nullptr;
        api.gpm_sample_free = nullptr;
        api.gpm_sample_get = nullptr;
        api.gpm_metrics_get = nullptr;
    }
}

// The one table of entry points.
Result<NvmlApi> resolve_nvml_api(const SharedLibrary& library) {
    SymbolTable table(library);
    NvmlApi api;
    table.require("nvmlInit_v2", api.init);
    table.require("nvmlShutdown", api.shutdown);
    table.require("nvmlErrorString", api.error_string);
    table.require("nvmlDeviceGetCount_v2", api.device_count);
    table.require("nvmlDeviceGetHandleByIndex_v2", api.device_handle);
    table.require("nvmlDeviceGetUUID", api.device_uuid);
    table.require("nvmlDeviceGetName", api.device_name);
    table.require("nvmlDeviceGetMemoryInfo", api.memory_info);
    table.require("nvmlDeviceGetUtilizationRates", api.utilization);
    table.require("nvmlDeviceGetPowerUsage", api.power_usage);
    // Current drivers have the _v3 process queries, older ones only _v2; both fill the same
    // structure.
    api.running_processes = table.find_first<GetProcessesFn>(
        {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
        &api.running_processes_name);
    if (api.running_processes == nullptr) {
        table.note_missing("nvmlDeviceGetComputeRunningProcesses_v3 (or _v2)");
    }
    api.total_energy = table.find<GetEnergyFn>("nvmlDeviceGetTotalEnergyConsumption");
    api.mps_processes = table.find_first<GetProcessesFn>(
        {"nvmlDeviceGetMPSComputeRunningProcesses_v3",
         "nvmlDeviceGetMPSComputeRunningProcesses_v2"},
        &api.mps_processes_name);
    api.mig_mode = table.find<GetMigModeFn>("nvmlDeviceGetMigMode");
    api.minor_number = table.find<GetMinorNumberFn>("nvmlDeviceGetMinorNumber");
    api.process_utilization =
        table.find<GetProcessUtilizationFn>("nvmlDeviceGetProcessUtilization");
    resolve_gpm(table, api);
    if (!table.missing().empty()) {
        return fail(ErrorCode::Io,
                    fmt::format("NVML not available: {} lacks {} (not NVML, or a driver too old)",
                                library.path(), fmt::join(table.missing(), ", ")));
    }
    return api;
}

// --- conversions ----------------------------------------------------------------------------

MiB bytes_to_mib(unsigned long long bytes) {
    return static_cast<MiB>(bytes >> 20);
}

double percent_to_fraction(unsigned int percent) {
    return std::min(percent, 100U) / 100.0;
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

// A metric and its label together, so that neither is set without the other.
void set_metric(std::optional<double>& metric, MetricSource& source, std::optional<double> value,
                MetricSource from) {
    metric = value;
    source = value ? from : MetricSource::Unavailable;
}

// Cumulative energy since the backend opened. The driver's counter (millijoules since it loaded)
// is preferred; where it is missing or not supported (before Volta) power is integrated instead.
// With neither, energy is unknown rather than a sum of nothing.
class EnergyMeter {
public:
    std::optional<double> add(std::optional<unsigned long long> counter_mj,
                              std::optional<double> power_w, Clock::time_point now) {
        if (counter_mj && last_counter_mj_) {
            // A counter that went back means the driver reloaded: start again from it.
            if (*counter_mj >= *last_counter_mj_) {
                joules_ += static_cast<double>(*counter_mj - *last_counter_mj_) / 1000.0;
            }
        } else if (!counter_mj && power_w && last_power_w_ && last_time_) {
            // Trapezoid between the two power readings.
            joules_ += 0.5 * (*last_power_w_ + *power_w) * seconds_between(*last_time_, now);
        }
        counting_ = counting_ || counter_mj || power_w;
        // Forgetting the counter while integrating keeps a gap from being counted twice.
        last_counter_mj_ = counter_mj;
        last_time_ = now;
        last_power_w_ = power_w;
        return counting_ ? std::optional<double>(joules_) : std::nullopt;
    }

private:
    double joules_ = 0;
    bool counting_ = false;
    std::optional<unsigned long long> last_counter_mj_;
    std::optional<Clock::time_point> last_time_;
    std::optional<double> last_power_w_;
};

struct NvmlDevice {
    nvmlDevice_t handle = nullptr;
    EnergyMeter energy;
    std::unique_ptr<GpmReader> gpm;  // null where the GPU or driver has no GPM
    GpuSample last;  // returned again, with the error set, when this GPU cannot be read
    Clock::time_point last_read;  // when `last` was read
    // The newest per-process utilisation sample read (the driver's microseconds): the next read
    // asks only for newer ones.
    unsigned long long process_util_seen_us = 0;
};

// --- the backend ----------------------------------------------------------------------------

class NvmlBackend final : public GpuBackend {
public:
    // Takes over an initialised NVML: from here on the destructor shuts it down.
    NvmlBackend(SharedLibrary library, const NvmlApi& api)
        : library_(std::move(library)), api_(api) {}
    ~NvmlBackend() override {
        devices_.clear();  // their GPM buffers are freed through NVML, so before it shuts down
        api_.shutdown();   // then library_ closes
    }

    NvmlBackend(const NvmlBackend&) = delete;
    NvmlBackend& operator=(const NvmlBackend&) = delete;

    std::string name() const override { return "nvml"; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }

    // Never fails as a whole: a GPU that cannot be read reports it in its own sample, with its
    // last values and their age, and is read afresh next time.
    Result<std::vector<GpuSample>> sample() override {
        std::vector<GpuSample> out;
        out.reserve(devices_.size());
        for (std::size_t i = 0; i < devices_.size(); ++i) {
            NvmlDevice& device = devices_[i];
            const Clock::time_point now = Clock::now();
            if (device.handle == nullptr) {  // failed to enumerate: its error, never a read
                out.push_back(device.last);
                continue;
            }
            if (auto fresh = read_sample(device, static_cast<int>(i), now)) {
                device.last = std::move(*fresh);
                device.last_read = now;
            } else {
                device.last.error = std::move(fresh.error().message);
                device.last.age_s = seconds_between(device.last_read, now);
            }
            out.push_back(device.last);
        }
        return out;
    }

    // Lists the GPUs and starts their energy meters and GPM readers. A GPU that cannot be listed
    // (fallen off the bus, no permission) keeps its index, with its fault set and no handle, so
    // the others keep theirs: the daemon leaves it out and schedules the rest. Only a failure to
    // count the GPUs fails it all.
    Result<void> enumerate() {
        unsigned int count = 0;
        if (nvmlReturn_t rc = api_.device_count(&count); rc != kNvmlSuccess) {
            return fail(ErrorCode::Io, fmt::format("NVML cannot list the GPUs: {}",
                                                   describe(api_, "nvmlDeviceGetCount_v2", rc)));
        }
        for (unsigned int i = 0; i < count; ++i) {
            if (auto added = add_device(i); !added) {
                add_faulty(i, added.error().message);
            }
        }
        return {};
    }

private:
    Error gpu_error(int index, const char* call, nvmlReturn_t rc) const {
        return Error{ErrorCode::Io, fmt::format("GPU {}: {}", index, describe(api_, call, rc))};
    }

    Result<void> add_device(unsigned int i) {
        const int index = static_cast<int>(i);
        NvmlDevice device;
        if (nvmlReturn_t rc = api_.device_handle(i, &device.handle); rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetHandleByIndex_v2", rc));
        }
        GpuInfo info;
        info.index = index;
        auto uuid = read_string(api_.device_uuid, device.handle, index, "nvmlDeviceGetUUID");
        auto name = read_string(api_.device_name, device.handle, index, "nvmlDeviceGetName");
        if (!uuid || !name) {
            return tl::unexpected(!uuid ? uuid.error() : name.error());
        }
        info.uuid = std::move(*uuid);
        info.name = std::move(*name);
        NvmlMemory memory{};
        if (nvmlReturn_t rc = api_.memory_info(device.handle, &memory); rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetMemoryInfo", rc));
        }
        info.total_mib = bytes_to_mib(memory.total);
        info.mig_enabled = read_mig_enabled(device.handle);
        // The device file a fence allows or denies (NVIDIA's /dev/nvidiaN, N the minor number,
        // which need not be NVML's index).
        unsigned int minor = 0;
        if (api_.minor_number != nullptr && api_.minor_number(device.handle, &minor) == kNvmlSuccess) {
            info.device_file = fmt::format("/dev/nvidia{}", minor);
        }
        const Clock::time_point now = Clock::now();
        // Until the first sample, the last one is what opening saw.
        device.last.index = index;
        device.last.free_mib = bytes_to_mib(memory.free);
        device.last.used_mib = bytes_to_mib(memory.used);
        device.last.sources.memory = MetricSource::Nvml;
        device.last_read = now;
        device.energy.add(read_energy(device.handle), read_power_at_open(device.handle), now);
        device.gpm = GpmReader::open(api_, device.handle, now);
        devices_.push_back(std::move(device));
        gpus_.push_back(std::move(info));
        return {};
    }

    void add_faulty(unsigned int i, std::string why) {
        const int index = static_cast<int>(i);
        GpuInfo info;
        info.index = index;
        info.name = fmt::format("GPU {} (cannot be read)", index);
        info.fault = fmt::format("{}; the GPU may have fallen off the bus: check nvidia-smi and "
                                 "the kernel log for Xid errors, then restart carma",
                                 why);
        NvmlDevice device;  // no handle: never read
        device.last.index = index;
        device.last.error = info.fault;
        device.last_read = Clock::now();
        devices_.push_back(std::move(device));
        gpus_.push_back(std::move(info));
    }

    Result<std::string> read_string(GetStringFn fn, nvmlDevice_t handle, int index,
                                    const char* call) const {
        char buffer[kNvmlStringSize] = {};
        if (nvmlReturn_t rc = fn(handle, buffer, kNvmlStringSize); rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, call, rc));
        }
        buffer[kNvmlStringSize - 1] = '\0';  // do not trust the terminator
        return std::string(buffer);
    }

    // MIG on means CARMA cannot place on the GPU as a whole. Drivers without the call, GPUs
    // without MIG (NOT_SUPPORTED) and any other refusal all read as MIG off: the GPU then stays
    // schedulable, as it was before MIG was looked at.
    bool read_mig_enabled(nvmlDevice_t handle) const {
        unsigned int current = 0;
        unsigned int pending = 0;
        return api_.mig_mode != nullptr &&
               api_.mig_mode(handle, &current, &pending) == kNvmlSuccess &&
               current == kNvmlMigEnable;
    }

    // Any error here only means power integration starts at the first sample instead.
    std::optional<double> read_power_at_open(nvmlDevice_t handle) const {
        unsigned int mw = 0;
        if (api_.power_usage(handle, &mw) != kNvmlSuccess) {
            return std::nullopt;
        }
        return mw / 1000.0;
    }

    // The driver's energy counter, or nothing when it has none (the meter integrates power).
    std::optional<unsigned long long> read_energy(nvmlDevice_t handle) const {
        unsigned long long mj = 0;
        if (api_.total_energy == nullptr || api_.total_energy(handle, &mj) != kNvmlSuccess) {
            return std::nullopt;
        }
        return mj;
    }

    Result<GpuSample> read_sample(NvmlDevice& device, int index, Clock::time_point now) {
        GpuSample s;
        s.index = index;
        NvmlMemory memory{};
        if (nvmlReturn_t rc = api_.memory_info(device.handle, &memory); rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetMemoryInfo", rc));
        }
        s.free_mib = bytes_to_mib(memory.free);
        s.used_mib = bytes_to_mib(memory.used);
        s.sources.memory = MetricSource::Nvml;
        if (auto r = read_activity(device, index, now, s); !r) {
            return tl::unexpected(r.error());
        }
        if (auto r = read_power(device.handle, index, s); !r) {
            return tl::unexpected(r.error());
        }
        auto processes = read_processes(device.handle, index);
        if (!processes) {
            return tl::unexpected(processes.error());
        }
        s.processes = std::move(*processes);
        read_process_activity(device, s.processes);
        // Last, so that a failed read leaves the meter to cover the gap next time.
        set_metric(s.energy_j, s.sources.energy,
                   device.energy.add(read_energy(device.handle), s.power_w, now),
                   MetricSource::Nvml);
        return s;
    }

    // Utilisation from the rates; SMACT, SMOCC and DRAMA from GPM where the GPU has it, else the
    // rates stand in for SMACT and DRAMA (labelled proxies) and SMOCC is unknown (see nvml.h).
    Result<void> read_activity(NvmlDevice& device, int index, Clock::time_point now,
                               GpuSample& s) const {
        NvmlUtilization rates{};
        const nvmlReturn_t rc = api_.utilization(device.handle, &rates);
        // NOT_SUPPORTED: MIG mode and some boards report no utilisation; it stays unknown.
        if (rc != kNvmlSuccess && rc != kNvmlNotSupported) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetUtilizationRates", rc));
        }
        std::optional<double> util;
        std::optional<double> memory_rate;
        if (rc == kNvmlSuccess) {
            util = percent_to_fraction(rates.gpu);
            memory_rate = percent_to_fraction(rates.memory);
        }
        set_metric(s.util, s.sources.util, util, MetricSource::Nvml);
        if (device.gpm) {
            const GpmReader::Activity activity = device.gpm->read(now);
            set_metric(s.smact, s.sources.smact, activity.smact, MetricSource::NvmlGpm);
            set_metric(s.smocc, s.sources.smocc, activity.smocc, MetricSource::NvmlGpm);
            set_metric(s.drama, s.sources.drama, activity.drama, MetricSource::NvmlGpm);
        } else {
            set_metric(s.smact, s.sources.smact, util, MetricSource::Nvml);
            set_metric(s.smocc, s.sources.smocc, std::nullopt, MetricSource::Nvml);
            set_metric(s.drama, s.sources.drama, memory_rate, MetricSource::Nvml);
        }
        return {};
    }

    Result<void> read_power(nvmlDevice_t handle, int index, GpuSample& s) const {
        unsigned int mw = 0;
        const nvmlReturn_t rc = api_.power_usage(handle, &mw);
        if (rc == kNvmlNotSupported) {
            return {};  // boards without a power sensor: unknown
        }
        if (rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetPowerUsage", rc));
        }
        set_metric(s.power_w, s.sources.power, mw / 1000.0, MetricSource::Nvml);
        return {};
    }

    // The compute processes and, where the driver lists them, the MPS clients (under MPS the
    // compute list holds the server, the MPS list its clients). A pid on both lists is reported
    // once, with the larger memory: the two lists describe the same allocations, not extra ones.
    Result<std::vector<GpuProcess>> read_processes(nvmlDevice_t handle, int index) {
        auto compute = query_processes(api_.running_processes, api_.running_processes_name,
                                       handle, index);
        if (!compute) {
            return tl::unexpected(compute.error());
        }
        std::map<int, MiB> by_pid = std::move(*compute);
        if (api_.mps_processes != nullptr) {
            auto mps = query_processes(api_.mps_processes, api_.mps_processes_name, handle, index);
            if (!mps) {
                return tl::unexpected(mps.error());
            }
            for (const auto& [pid, mib] : *mps) {
                MiB& merged = by_pid[pid];
                merged = std::max(merged, mib);
            }
        }
        std::vector<GpuProcess> out;
        out.reserve(by_pid.size());
        for (const auto& [pid, mib] : by_pid) {
            out.push_back(GpuProcess{pid, mib, is_mps_server_process(pid), std::nullopt});
        }
        return out;
    }

    // Each process's SM activity: the mean smUtil of its per-process utilisation samples since
    // the last read. The driver keeps a sample only for a process that kept the SMs busy in one
    // of its periods, so a listed process without one was idle (0), and NOT_FOUND means none was
    // busy. Without the entry point (older drivers), or when it refuses, activity stays unknown
    // and the daemon shares the GPU's energy equally (core/energy_split.h); it never fails the
    // sample.
    void read_process_activity(NvmlDevice& device, std::vector<GpuProcess>& processes) {
        if (api_.process_utilization == nullptr) {
            return;
        }
        constexpr int kAttempts = 4;
        constexpr std::size_t kSlack = 8;
        if (util_buffer_.empty()) {
            util_buffer_.resize(64);
        }
        std::optional<unsigned int> read;
        for (int attempt = 0; attempt < kAttempts && !read; ++attempt) {
            auto count = static_cast<unsigned int>(util_buffer_.size());
            const nvmlReturn_t rc = api_.process_utilization(device.handle, util_buffer_.data(),
                                                             &count, device.process_util_seen_us);
            if (rc == kNvmlSuccess) {
                read = std::min<unsigned int>(count, static_cast<unsigned int>(util_buffer_.size()));
            } else if (rc == kNvmlNotFound) {
                read = 0U;
            } else if (rc == kNvmlInsufficientSize) {
                util_buffer_.resize(std::max<std::size_t>(count, util_buffer_.size()) + kSlack);
            } else {
                return;
            }
        }
        if (!read) {
            return;
        }
        std::map<int, std::pair<double, int>> busy;  // pid -> (sum of smUtil, samples)
        for (unsigned int i = 0; i < *read; ++i) {
            const NvmlProcessUtilizationSample& u = util_buffer_[i];
            auto& [sum, n] = busy[static_cast<int>(u.pid)];
            sum += percent_to_fraction(u.smUtil);
            ++n;
            device.process_util_seen_us = std::max(device.process_util_seen_us, u.timeStamp);
        }
        for (GpuProcess& p : processes) {
            const auto it = busy.find(p.pid);
            p.activity = it == busy.end() ? 0.0 : it->second.first / it->second.second;
        }
    }

    // NVML's size protocol: a buffer too small gets INSUFFICIENT_SIZE and the count needed. The
    // buffer is kept between samples, so it grows once; slack covers processes starting between
    // the two calls, and the attempts are bounded in case they keep starting.
    Result<std::map<int, MiB>> query_processes(GetProcessesFn fn, const char* call,
                                               nvmlDevice_t handle, int index) {
        constexpr int kAttempts = 4;
        constexpr std::size_t kSlack = 8;
        if (process_buffer_.empty()) {
            process_buffer_.resize(32);
        }
        for (int attempt = 0; attempt < kAttempts; ++attempt) {
            auto count = static_cast<unsigned int>(process_buffer_.size());
            const nvmlReturn_t rc = fn(handle, &count, process_buffer_.data());
            if (rc == kNvmlSuccess) {
                return sum_by_pid(count);
            }
            if (rc == kNvmlNotSupported) {
                return std::map<int, MiB>{};
            }
            if (rc != kNvmlInsufficientSize) {
                return tl::unexpected(gpu_error(index, call, rc));
            }
            process_buffer_.resize(std::max<std::size_t>(count, process_buffer_.size()) + kSlack);
        }
        return tl::unexpected(gpu_error(index, call, kNvmlInsufficientSize));
    }

    // A process can be listed more than once (one entry per MIG instance): its memory is the sum.
    std::map<int, MiB> sum_by_pid(unsigned int count) const {
        std::map<int, MiB> by_pid;
        const auto n = std::min<std::size_t>(count, process_buffer_.size());
        for (std::size_t i = 0; i < n; ++i) {
            const NvmlProcessInfo& p = process_buffer_[i];
            const MiB mib =
                p.usedGpuMemory == kNvmlValueNotAvailable ? 0 : bytes_to_mib(p.usedGpuMemory);
            by_pid[static_cast<int>(p.pid)] += mib;
        }
        return by_pid;
    }

    SharedLibrary library_;
    NvmlApi api_;
    std::vector<NvmlDevice> devices_;
    std::vector<GpuInfo> gpus_;
    std::vector<NvmlProcessInfo> process_buffer_;
    std::vector<NvmlProcessUtilizationSample> util_buffer_;
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> open_nvml() {
    const std::string path = library_path();
    auto library = SharedLibrary::open({path});
    if (!library) {
        return fail(ErrorCode::Io, fmt::format("NVML not available: {}", library.error().message));
    }
    auto api = resolve_nvml_api(*library);
    if (!api) {
        return tl::unexpected(api.error());
    }
    if (nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
        return fail(ErrorCode::Io, fmt::format("NVML not available: {}: {}{}", path,
                                               describe(*api, "nvmlInit_v2", rc), init_hint(rc)));
    }
    auto backend = std::make_unique<NvmlBackend>(std::move(*library), *api);
    if (auto listed = backend->enumerate(); !listed) {
        return tl::unexpected(listed.error());  // the backend's destructor shuts NVML down
    }
    return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace carma::device
