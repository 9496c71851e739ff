#include "device/nvml.h"

#include <dlfcn.h>

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

namespace carma::device {

namespace {

// --- the part of the NVML C API that CARMA uses ---------------------------------------------
// Declared here rather than taken from nvml.h so that building needs nothing from NVIDIA. Only
// the layouts and values below matter; they are fixed by NVML's ABI.

using nvmlReturn_t = int;
struct NvmlDeviceOpaque;  // NVML's struct nvmlDevice_st, never looked into
using nvmlDevice_t = NvmlDeviceOpaque*;

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;

// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE: room for any UUID or name.
constexpr unsigned kNvmlStringSize = 96;
// NVML_VALUE_NOT_AVAILABLE: what usedGpuMemory holds when the driver will not say (no privilege).
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

struct NvmlMemory {  // nvmlMemory_t (v1), bytes
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct NvmlUtilization {  // nvmlUtilization_t, percent over the driver's last sample period
    unsigned int gpu;
    unsigned int memory;
};

struct NvmlProcessInfo {  // nvmlProcessInfo_t as the _v2 and _v3 process queries fill it
    unsigned int pid;
    unsigned long long usedGpuMemory;  // bytes
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};

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

// The entry points, resolved once by resolve_api(). The optional ones may be null.
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
};

// --- loading the library --------------------------------------------------------------------

std::string library_path() {
    const char* env = std::getenv(kNvmlLibraryEnv);
    return env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
}

// Owns a dlopen handle. The backend holds it as a member, so it closes after nvmlShutdown.
class Library {
public:
    static Result<Library> open(const std::string& path) {
        // RTLD_LOCAL: NVML's symbols must not leak into, or be captured by, anything loaded later.
        void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* why = ::dlerror();
            std::string text = why != nullptr ? why : "cannot load it";
            if (text.find(path) == std::string::npos) {  // dlerror usually names it; make sure
                text = fmt::format("{}: {}", path, text);
            }
            return fail(ErrorCode::Io, fmt::format("NVML not available: {}", text));
        }
        return Library(handle);
    }

    void* handle() const { return handle_.get(); }

private:
    struct Close {
        void operator()(void* handle) const { ::dlclose(handle); }
    };

    explicit Library(void* handle) : handle_(handle) {}

    std::unique_ptr<void, Close> handle_;
};

// Looks entry points up by name and remembers which required ones were missing.
class SymbolTable {
public:
    explicit SymbolTable(void* handle) : handle_(handle) {}

    template <typename Fn>
    Fn find(const char* name) const {
        // POSIX guarantees a data pointer from dlsym can hold a function's address.
        return reinterpret_cast<Fn>(::dlsym(handle_, name));
    }

    template <typename Fn>
    void require(const char* name, Fn& slot) {
        slot = find<Fn>(name);
        if (slot == nullptr) {
            missing_.emplace_back(name);
        }
    }

    void note_missing(std::string what) { missing_.push_back(std::move(what)); }
    const std::vector<std::string>& missing() const { return missing_; }

private:
    void* handle_;
    std::vector<std::string> missing_;
};

// Current drivers have the _v3 process query, older ones only _v2; both fill the same structure.
void resolve_process_query(SymbolTable& table, NvmlApi& api) {
    for (const char* name :
         {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"}) {
        if (auto fn = table.find<GetProcessesFn>(name); fn != nullptr) {
            api.running_processes = fn;
            api.running_processes_name = name;
            return;
        }
    }
    table.note_missing("nvmlDeviceGetComputeRunningProcesses_v3 (or _v2)");
}

// The one table of entry points.
Result<NvmlApi> resolve_api(const Library& library, const std::string& path) {
    SymbolTable table(library.handle());
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
    api.total_energy = table.find<GetEnergyFn>("nvmlDeviceGetTotalEnergyConsumption");
    resolve_process_query(table, api);
    if (!table.missing().empty()) {
        return fail(ErrorCode::Io,
                    fmt::format("NVML not available: {} lacks {} (not NVML, or a driver too old)",
                                path, fmt::join(table.missing(), ", ")));
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

// "nvmlDeviceGetMemoryInfo: GPU is lost (NVML error 15)"
std::string describe(const NvmlApi& api, const char* call, nvmlReturn_t rc) {
    const char* text = api.error_string(rc);
    return fmt::format("{}: {} (NVML error {})", call, text != nullptr ? text : "unknown error",
                       rc);
}

// Cumulative energy since the backend opened. The driver's counter (millijoules since it loaded)
// is preferred; where it is missing or not supported (before Volta) power is integrated instead.
class EnergyMeter {
public:
    using Clock = std::chrono::steady_clock;

    double add(std::optional<unsigned long long> counter_mj, double power_w,
               Clock::time_point now) {
        if (counter_mj && last_counter_mj_) {
            // A counter that went back means the driver reloaded: start again from it.
            if (*counter_mj >= *last_counter_mj_) {
                joules_ += static_cast<double>(*counter_mj - *last_counter_mj_) / 1000.0;
            }
        } else if (!counter_mj && last_time_) {
            // Trapezoid between the two power readings.
            const std::chrono::duration<double> dt = now - *last_time_;
            joules_ += 0.5 * (last_power_w_ + power_w) * dt.count();
        }
        // Forgetting the counter while integrating keeps a gap from being counted twice.
        last_counter_mj_ = counter_mj;
        last_time_ = now;
        last_power_w_ = power_w;
        return joules_;
    }

private:
    double joules_ = 0;
    std::optional<unsigned long long> last_counter_mj_;
    std::optional<Clock::time_point> last_time_;
    double last_power_w_ = 0;
};

struct Device {
    nvmlDevice_t handle = nullptr;
    EnergyMeter energy;
    GpuSample last;  // returned again, with the error set, when this GPU cannot be read
};

// --- the backend ----------------------------------------------------------------------------

class NvmlBackend final : public GpuBackend {
public:
    // Takes over an initialised NVML: from here on the destructor shuts it down.
    NvmlBackend(Library library, const NvmlApi& api) : library_(std::move(library)), api_(api) {}
    ~NvmlBackend() override { api_.shutdown(); }  // then library_ closes

    NvmlBackend(const NvmlBackend&) = delete;
    NvmlBackend& operator=(const NvmlBackend&) = delete;

    std::string name() const override { return "nvml"; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }

    // Never fails as a whole: a GPU that cannot be read reports it in its own sample.
    Result<std::vector<GpuSample>> sample() override {
        std::vector<GpuSample> out;
        out.reserve(devices_.size());
        for (std::size_t i = 0; i < devices_.size(); ++i) {
            Device& device = devices_[i];
            if (auto fresh = read_sample(device, static_cast<int>(i))) {
                device.last = std::move(*fresh);
            } else {
                device.last.error = std::move(fresh.error().message);
            }
            out.push_back(device.last);
        }
        return out;
    }

    // Lists the GPUs and starts their energy meters. A GPU that cannot be listed fails it all:
    // leaving it out would renumber the others, and its total memory is what scheduling needs.
    Result<void> enumerate() {
        unsigned int count = 0;
        if (nvmlReturn_t rc = api_.device_count(&count); rc != kNvmlSuccess) {
            return fail(ErrorCode::Io, fmt::format("NVML cannot list the GPUs: {}",
                                                   describe(api_, "nvmlDeviceGetCount_v2", rc)));
        }
        for (unsigned int i = 0; i < count; ++i) {
            if (auto added = add_device(i); !added) {
                return fail(ErrorCode::Io,
                            fmt::format("NVML cannot list the GPUs: {}", added.error().message));
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
        Device device;
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
        // Until the first sample, the last one is what opening saw.
        device.last.index = index;
        device.last.free_mib = bytes_to_mib(memory.free);
        device.last.used_mib = bytes_to_mib(memory.used);
        device.energy.add(read_energy(device.handle), read_power_at_open(device.handle),
                          EnergyMeter::Clock::now());
        devices_.push_back(std::move(device));
        gpus_.push_back(std::move(info));
        return {};
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

    // Any error here only means power integration starts at the first sample instead.
    double read_power_at_open(nvmlDevice_t handle) const {
        unsigned int mw = 0;
        return api_.power_usage(handle, &mw) == kNvmlSuccess ? mw / 1000.0 : 0.0;
    }

    // The driver's energy counter, or nothing when it has none (the meter integrates power).
    std::optional<unsigned long long> read_energy(nvmlDevice_t handle) const {
        unsigned long long mj = 0;
        if (api_.total_energy == nullptr || api_.total_energy(handle, &mj) != kNvmlSuccess) {
            return std::nullopt;
        }
        return mj;
    }

    Result<GpuSample> read_sample(Device& device, int index) {
        GpuSample s;
        s.index = index;
        NvmlMemory memory{};
        if (nvmlReturn_t rc = api_.memory_info(device.handle, &memory); rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetMemoryInfo", rc));
        }
        s.free_mib = bytes_to_mib(memory.free);
        s.used_mib = bytes_to_mib(memory.used);
        if (auto r = read_activity(device.handle, index, s); !r) {
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
        // Last, so that a failed read leaves the meter to cover the gap next time.
        s.energy_j =
            device.energy.add(read_energy(device.handle), s.power_w, EnergyMeter::Clock::now());
        return s;
    }

    // NVML has no SM activity/occupancy or DRAM activity counters (DCGM profiling does): the
    // utilisation rates stand in for SMACT and DRAMA, and SMOCC stays 0 (see nvml.h).
    Result<void> read_activity(nvmlDevice_t handle, int index, GpuSample& s) const {
        NvmlUtilization rates{};
        const nvmlReturn_t rc = api_.utilization(handle, &rates);
        if (rc == kNvmlNotSupported) {
            return {};  // some boards do not report it; zero is the honest reading
        }
        if (rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetUtilizationRates", rc));
        }
        s.util = percent_to_fraction(rates.gpu);
        s.smact = s.util;
        s.drama = percent_to_fraction(rates.memory);
        s.smocc = 0;
        return {};
    }

    Result<void> read_power(nvmlDevice_t handle, int index, GpuSample& s) const {
        unsigned int mw = 0;
        const nvmlReturn_t rc = api_.power_usage(handle, &mw);
        if (rc == kNvmlNotSupported) {
            return {};  // boards without a power sensor
        }
        if (rc != kNvmlSuccess) {
            return tl::unexpected(gpu_error(index, "nvmlDeviceGetPowerUsage", rc));
        }
        s.power_w = mw / 1000.0;
        return {};
    }

    // NVML's size protocol: a buffer too small gets INSUFFICIENT_SIZE and the count needed. The
    // buffer is kept between samples, so it grows once; slack covers processes starting between
    // the two calls, and the attempts are bounded in case they keep starting.
    Result<std::vector<GpuProcess>> read_processes(nvmlDevice_t handle, int index) {
        constexpr int kAttempts = 4;
        constexpr std::size_t kSlack = 8;
        if (process_buffer_.empty()) {
            process_buffer_.resize(32);
        }
        for (int attempt = 0; attempt < kAttempts; ++attempt) {
            auto count = static_cast<unsigned int>(process_buffer_.size());
            const nvmlReturn_t rc = api_.running_processes(handle, &count, process_buffer_.data());
            if (rc == kNvmlSuccess) {
                return merge_by_pid(count);
            }
            if (rc == kNvmlNotSupported) {
                return std::vector<GpuProcess>{};
            }
            if (rc != kNvmlInsufficientSize) {
                return tl::unexpected(gpu_error(index, api_.running_processes_name, rc));
            }
            process_buffer_.resize(std::max<std::size_t>(count, process_buffer_.size()) + kSlack);
        }
        return tl::unexpected(gpu_error(index, api_.running_processes_name, kNvmlInsufficientSize));
    }

    // A process can be listed more than once (one entry per MIG instance): report it once, with
    // all its memory, as the emulated backend does.
    std::vector<GpuProcess> merge_by_pid(unsigned int count) const {
        std::map<int, MiB> by_pid;
        const auto n = std::min<std::size_t>(count, process_buffer_.size());
        for (std::size_t i = 0; i < n; ++i) {
            const NvmlProcessInfo& p = process_buffer_[i];
            const MiB mib =
                p.usedGpuMemory == kNvmlValueNotAvailable ? 0 : bytes_to_mib(p.usedGpuMemory);
            by_pid[static_cast<int>(p.pid)] += mib;
        }
        std::vector<GpuProcess> out;
        out.reserve(by_pid.size());
        for (const auto& [pid, mib] : by_pid) {
            out.push_back(GpuProcess{pid, mib});
        }
        return out;
    }

    Library library_;
    NvmlApi api_;
    std::vector<Device> devices_;
    std::vector<GpuInfo> gpus_;
    std::vector<NvmlProcessInfo> process_buffer_;
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> open_nvml() {
    const std::string path = library_path();
    auto library = Library::open(path);
    if (!library) {
        return tl::unexpected(library.error());
    }
    auto api = resolve_api(*library, path);
    if (!api) {
        return tl::unexpected(api.error());
    }
    if (nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
        return fail(ErrorCode::Io, fmt::format("NVML not available: {}: {}", path,
                                               describe(*api, "nvmlInit_v2", rc)));
    }
    auto backend = std::make_unique<NvmlBackend>(std::move(*library), *api);
    if (auto listed = backend->enumerate(); !listed) {
        return tl::unexpected(listed.error());  // the backend's destructor shuts NVML down
    }
    return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace carma::device
