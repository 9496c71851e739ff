#include "device/dcgm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "device/dcgm_api.h"
#include "device/dl_library.h"
#include "device/nvml.h"

namespace carma::device {

namespace {

using namespace dcgm_api;

// 1 Hz, as the daemon samples; a few seconds of history is plenty for "the latest value".
constexpr long long kWatchPeriodUs = 1'000'000;
constexpr double kWatchKeepAgeS = 5.0;
constexpr int kWatchKeepSamples = 0;  // bounded by the age alone
constexpr unsigned int kConnectTimeoutMs = 5000;

constexpr const char* kInstallHint = "install datacenter-gpu-manager or use --gpus nvml";

// --- loading the library --------------------------------------------------------------------

// What to try, in order: the caller's choice, else the environment's, else DCGM 4 then DCGM 3.
std::vector<std::string> library_candidates(const DcgmOptions& options) {
    if (!options.library.empty()) {
        return {options.library};
    }
    const char* env = std::getenv(kDcgmLibraryEnv);
    if (env != nullptr && *env != '\0') {
        return {env};
    }
    return {"libdcgm.so.4", "libdcgm.so.3"};
}

// The message names every candidate tried, so that one can see which DCGM versions were sought.
Result<SharedLibrary> open_library(const std::vector<std::string>& candidates) {
    // RTLD_NODELETE: the embedded host engine starts threads and loads modules of its own;
    // keeping its code mapped means nothing left of them can run into a hole.
    auto library = SharedLibrary::open(candidates, SharedLibrary::Unload::Never);
    if (library) {
        return library;
    }
    std::string also;
    if (candidates.size() > 1) {
        std::vector<std::string> rest(candidates.begin() + 1, candidates.end());
        also = fmt::format(" (also tried {})", fmt::join(rest, ", "));
    }
    return fail(ErrorCode::Io, fmt::format("DCGM not available: {}{}; {}", library.error().message,
                                           also, kInstallHint));
}

Result<DcgmApi> resolve_dcgm_api(const SharedLibrary& library) {
    SymbolTable table(library);
    DcgmApi api;
    table.require("dcgmInit", api.init);
    table.require("dcgmShutdown", api.shutdown);
    table.require("dcgmStartEmbedded", api.start_embedded);
    table.require("dcgmStopEmbedded", api.stop_embedded);
    table.require("dcgmConnect_v2", api.connect);
    table.require("dcgmDisconnect", api.disconnect);
    table.require("errorString", api.error_string);
    table.require("dcgmGetAllSupportedDevices", api.supported_devices);
    table.require("dcgmGroupCreate", api.group_create);
    table.require("dcgmGroupAddDevice", api.group_add_device);
    table.require("dcgmGroupDestroy", api.group_destroy);
    table.require("dcgmFieldGroupCreate", api.field_group_create);
    table.require("dcgmFieldGroupDestroy", api.field_group_destroy);
    table.require("dcgmWatchFields", api.watch_fields);
    table.require("dcgmUpdateAllFields", api.update_all_fields);
    table.require("dcgmGetLatestValuesForFields", api.latest_values);
    if (!table.missing().empty()) {
        return fail(ErrorCode::Io,
                    fmt::format("DCGM not available: {} lacks {} (not DCGM, or a DCGM older than "
                                "3.0); {}",
                                library.path(), fmt::join(table.missing(), ", "), kInstallHint));
    }
    return api;
}

// --- reading field values -------------------------------------------------------------------

// "dcgmWatchFields: Feature not supported (DCGM error -6)"
std::string describe(const DcgmApi& api, const char* call, dcgmReturn_t rc) {
    const char* text = api.error_string(rc);
    return fmt::format("{}: {} (DCGM error {})", call, text != nullptr ? text : "unknown error",
                       rc);
}

// A number, or nothing when the value is missing, blank or of a type CARMA does not expect.
std::optional<double> number(const DcgmFieldValueV1* v) {
    if (v == nullptr || v->status != kDcgmOk) {
        return std::nullopt;
    }
    if (v->fieldType == kDcgmFtDouble) {
        const double d = v->value.dbl;
        return d >= kDcgmFp64Blank || d != d ? std::nullopt : std::optional<double>(d);
    }
    if (v->fieldType == kDcgmFtInt64) {
        const std::int64_t i = v->value.i64;
        return i >= kDcgmInt64Blank ? std::nullopt : std::optional<double>(static_cast<double>(i));
    }
    return std::nullopt;
}

std::optional<std::int64_t> integer(const DcgmFieldValueV1* v) {
    if (v == nullptr || v->status != kDcgmOk || v->fieldType != kDcgmFtInt64 ||
        v->value.i64 >= kDcgmInt64Blank) {
        return std::nullopt;
    }
    return v->value.i64;
}

std::optional<std::string> text(const DcgmFieldValueV1* v) {
    if (v == nullptr || v->status != kDcgmOk || v->fieldType != kDcgmFtString) {
        return std::nullopt;
    }
    const std::size_t n = ::strnlen(v->value.str, kDcgmMaxStrLength);  // do not trust the NUL
    std::string s(v->value.str, n);
    if (s.empty() || s.starts_with(kDcgmStrBlankPrefix)) {
        return std::nullopt;
    }
    return s;
}

double fraction(double value, double full) {
    return std::clamp(value / full, 0.0, 1.0);
}

// The freshest of the readings used, as seconds before now (DCGM stamps values in microseconds
// since 1970, on the host engine's clock).
class Freshness {
  public:
    void saw(const DcgmFieldValueV1* v) {
        if (v != nullptr && v->ts > 0) {
            newest_us_ = std::max(newest_us_, v->ts);
        }
    }

    std::optional<double> age_s() const {
        if (newest_us_ == 0) {
            return std::nullopt;
        }
        const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        return std::max<double>(0.0, static_cast<double>(now_us - newest_us_) / 1e6);
    }

  private:
    std::int64_t newest_us_ = 0;
};

// Cumulative energy since the backend opened, from DCGM's counter (millijoules since the driver
// loaded). A counter that went back means the driver reloaded: counting restarts from it.
class EnergyCounter {
  public:
    // The joules so far, or nothing when this reading has no counter.
    std::optional<double> add(std::optional<std::int64_t> counter_mj) {
        if (!counter_mj) {
            return std::nullopt;  // the last counter stays, so the gap is counted when it returns
        }
        if (last_mj_ && *counter_mj >= *last_mj_) {
            joules_ += static_cast<double>(*counter_mj - *last_mj_) / 1000.0;
        }
        last_mj_ = counter_mj;
        return joules_;
    }

  private:
    double joules_ = 0;
    std::optional<std::int64_t> last_mj_;
};

// What a failed profiling watch most likely means, for the one line that says so.
std::string_view profiling_hint(dcgmReturn_t rc) {
    switch (rc) {
        case kDcgmNotSupported:
        case kDcgmProfilingNotSupported:
        case kDcgmProfilingMultiPass:
        case kDcgmGpuNotSupported:
            return "these GPUs have no DCGM profiling counters (data-centre GPUs from Volta on "
                   "have them)";
        case kDcgmInUse:
            return "another profiler holds the counters (Nsight Compute/Systems, another DCGM or "
                   "dcgm-exporter): stop it, or pause it with `dcgmi profile --pause`";
        case kDcgmRequiresRoot:
        case kDcgmNoPermission:
            return "profiling needs root, or the driver option "
                   "NVreg_RestrictProfilingToAdminUsers=0";
        case kDcgmModuleNotLoaded:
            return "DCGM's profiling module is not loaded (denylisted, or missing from the "
                   "installation)";
        default:
            return "";
    }
}

// Names that no other group on the host engine has, also when two backends are open at once.
std::string group_name(std::string_view what) {
    static std::atomic<unsigned> sequence{0};
    return fmt::format("carma-{}-{}-{}", ::getpid(), sequence.fetch_add(1), what);
}

struct DcgmDevice {
    std::optional<unsigned int> dcgm_id;  // none: DCGM does not report this GPU
    EnergyCounter energy;
    GpuSample last;  // returned again, with the error set, when this GPU cannot be read
};

// --- the backend ----------------------------------------------------------------------------

class DcgmBackend final : public GpuBackend {
  public:
    DcgmBackend(SharedLibrary library, const DcgmApi& api, std::string host,
                std::unique_ptr<GpuBackend> nvml)
        : library_(std::move(library)), api_(api), host_(std::move(host)), nvml_(std::move(nvml)) {}

    // Undoes whatever start() got to, in reverse; then library_ closes.
    ~DcgmBackend() override {
        if (handle_) {
            for (const auto& fields : {prof_fields_, base_fields_}) {
                if (fields) {
                    api_.field_group_destroy(*handle_, *fields);
                }
            }
            if (group_) {
                api_.group_destroy(*handle_, *group_);
            }
            if (host_.empty()) {
                api_.stop_embedded(*handle_);
            } else {
                api_.disconnect(*handle_);
            }
        }
        if (initialised_) {
            api_.shutdown();
        }
    }

    DcgmBackend(const DcgmBackend&) = delete;
    DcgmBackend& operator=(const DcgmBackend&) = delete;

    std::string name() const override { return host_.empty() ? "dcgm" : "dcgm@" + host_; }
    const std::vector<GpuInfo>& gpus() const override { return nvml_->gpus(); }
    std::vector<std::pair<std::string, std::string>> task_environment() const override {
        return nvml_->task_environment();
    }

    // Never fails as a whole unless NVML does: a GPU that cannot be read reports it in its own
    // sample, keeping its last values.
    Result<std::vector<GpuSample>> sample() override {
        auto fresh = nvml_->sample();
        if (!fresh) {
            return tl::unexpected(fresh.error());
        }
        std::vector<GpuSample> out;
        out.reserve(fresh->size());
        for (std::size_t i = 0; i < fresh->size() && i < devices_.size(); ++i) {
            DcgmDevice& device = devices_[i];
            GpuSample& s = (*fresh)[i];
            if (!s.error.empty()) {
                device.last.error = std::move(s.error);  // NVML could not read it
            } else if (!device.dcgm_id) {
                device.last = std::move(s);
            } else if (auto read = overlay(device, s); read) {
                device.last = std::move(s);
            } else {
                device.last.error = std::move(read.error().message);
            }
            out.push_back(device.last);
        }
        return out;
    }

    // Starts DCGM, watches the fields and matches DCGM's GPUs to NVML's. Notes on what is
    // missing go to `notes`, for the caller to pass on once the backend is known to work.
    Result<void> start(std::vector<std::string>& notes) {
        if (auto r = connect(); !r) {
            return r;
        }
        auto ids = supported_gpus();
        if (!ids) {
            return tl::unexpected(ids.error());
        }
        if (auto r = watch(*ids, notes); !r) {
            return r;
        }
        return match(*ids, notes);
    }

  private:
    Error dcgm_error(std::string_view what, const char* call, dcgmReturn_t rc) const {
        return Error{ErrorCode::Io,
                     fmt::format("{} {}: {}", where(), what, describe(api_, call, rc))};
    }

    std::string where() const { return host_.empty() ? "DCGM" : "DCGM at " + host_; }

    Result<void> connect() {
        if (dcgmReturn_t rc = api_.init(); rc != kDcgmOk) {
            return fail(ErrorCode::Io,
                        fmt::format("DCGM not available: {}: {}; {}", library_.path(),
                                    describe(api_, "dcgmInit", rc), kInstallHint));
        }
        initialised_ = true;
        dcgmHandle_t handle = 0;
        if (host_.empty()) {
            if (dcgmReturn_t rc = api_.start_embedded(kDcgmOperationModeAuto, &handle);
                rc != kDcgmOk) {
                return fail(ErrorCode::Io,
                            fmt::format("DCGM not available: cannot start DCGM inside carma ({}); "
                                        "is the NVIDIA driver loaded? Or run nv-hostengine and "
                                        "give its address, or use --gpus nvml",
                                        describe(api_, "dcgmStartEmbedded", rc)));
            }
        } else {
            DcgmConnectV2Params params{};
            params.version = kDcgmConnectV2ParamsVersion2;
            params.persistAfterDisconnect = 0;
            params.timeoutMs = kConnectTimeoutMs;
            std::string address = host_;
            if (address.starts_with("unix:")) {
                address.erase(0, 5);
                params.addressIsUnixSocket = 1;
            } else if (address.starts_with("/")) {
                params.addressIsUnixSocket = 1;
            }
            if (dcgmReturn_t rc = api_.connect(address.c_str(), &params, &handle); rc != kDcgmOk) {
                return fail(ErrorCode::Io,
                            fmt::format("DCGM not available: cannot reach nv-hostengine at {} "
                                        "({}); is it running there (systemctl status "
                                        "nvidia-dcgm)? Or use --gpus nvml",
                                        host_, describe(api_, "dcgmConnect_v2", rc)));
            }
        }
        handle_ = handle;
        return {};
    }

    Result<std::vector<unsigned int>> supported_gpus() const {
        unsigned int ids[kDcgmMaxNumDevices] = {};
        int count = 0;
        if (dcgmReturn_t rc = api_.supported_devices(*handle_, ids, &count); rc != kDcgmOk) {
            return tl::unexpected(
                dcgm_error("cannot list the GPUs:", "dcgmGetAllSupportedDevices", rc));
        }
        count = std::clamp(count, 0, kDcgmMaxNumDevices);
        return std::vector<unsigned int>(ids, ids + count);
    }

    // One GPU group with DCGM's GPUs; one field group for the fields every GPU has and one for
    // the profiling fields, watched separately so that losing the latter keeps the former.
    Result<void> watch(const std::vector<unsigned int>& ids, std::vector<std::string>& notes) {
        if (ids.empty()) {
            return {};  // nothing to watch (and DCGM refuses empty groups)
        }
        dcgmGpuGrp_t group = 0;
        const std::string name = group_name("gpus");
        if (dcgmReturn_t rc = api_.group_create(*handle_, kDcgmGroupEmpty, name.c_str(), &group);
            rc != kDcgmOk) {
            return tl::unexpected(dcgm_error("cannot watch the GPUs:", "dcgmGroupCreate", rc));
        }
        group_ = group;
        for (unsigned int id : ids) {
            if (dcgmReturn_t rc = api_.group_add_device(*handle_, group, id); rc != kDcgmOk) {
                return tl::unexpected(dcgm_error(fmt::format("cannot watch GPU id {}:", id),
                                                 "dcgmGroupAddDevice", rc));
            }
        }
        std::vector<unsigned short> base = {
            field::kUuid,    field::kNvmlIndex, field::kPowerUsage, field::kTotalEnergy,
            field::kGpuUtil, field::kFbTotal,   field::kFbFree,     field::kFbUsed};
        auto base_watch = watch_fields(base, "base", base_fields_);
        if (base_watch != kDcgmOk) {
            return tl::unexpected(dcgm_error("cannot watch the GPUs:", last_call_, base_watch));
        }
        read_fields_ = base;
        std::vector<unsigned short> prof = {field::kSmActive, field::kSmOccupancy,
                                            field::kDramActive};
        if (dcgmReturn_t rc = watch_fields(prof, "profiling", prof_fields_); rc != kDcgmOk) {
            const std::string_view hint = profiling_hint(rc);
            notes.push_back(fmt::format(
                "{}: the profiling fields (SM active, SM occupancy, DRAM active) cannot be "
                "watched ({}){}{}; SMACT, SMOCC and DRAMA are unavailable, the other metrics still "
                "come from DCGM",
                where(), describe(api_, last_call_, rc), hint.empty() ? "" : ": ", hint));
            if (prof_fields_) {
                api_.field_group_destroy(*handle_, *prof_fields_);
                prof_fields_.reset();
            }
        } else {
            read_fields_.insert(read_fields_.end(), prof.begin(), prof.end());
        }
        // Once now, so that the first sample (and the UUIDs matched below) have values.
        if (dcgmReturn_t rc = api_.update_all_fields(*handle_, 1); rc != kDcgmOk) {
            return tl::unexpected(
                dcgm_error("cannot read the watched fields:", "dcgmUpdateAllFields", rc));
        }
        return {};
    }

    // Creates a field group and watches it on the GPU group; the call that failed is last_call_.
    dcgmReturn_t watch_fields(std::vector<unsigned short>& ids, std::string_view what,
                              std::optional<dcgmFieldGrp_t>& slot) {
        dcgmFieldGrp_t fields = 0;
        const std::string name = group_name(what);
        last_call_ = "dcgmFieldGroupCreate";
        if (dcgmReturn_t rc = api_.field_group_create(*handle_, static_cast<int>(ids.size()),
                                                      ids.data(), name.c_str(), &fields);
            rc != kDcgmOk) {
            return rc;
        }
        slot = fields;
        last_call_ = "dcgmWatchFields";
        return api_.watch_fields(*handle_, *group_, fields, kWatchPeriodUs, kWatchKeepAgeS,
                                 kWatchKeepSamples);
    }

    // Each NVML GPU gets the DCGM GPU with its UUID; where DCGM cannot say the UUID, the one
    // DCGM says has its NVML index. Matching by UUID is what keeps a host engine on another
    // machine from being read as this one's GPUs.
    Result<void> match(const std::vector<unsigned int>& ids, std::vector<std::string>& notes) {
        const auto& gpus = nvml_->gpus();
        devices_.resize(gpus.size());
        std::map<std::string, unsigned int> by_uuid;
        std::map<std::int64_t, unsigned int> by_index;  // only for GPUs without a UUID
        std::vector<std::string> dcgm_uuids;
        std::map<unsigned int, std::optional<std::int64_t>> energy_at_open;
        for (unsigned int id : ids) {
            auto values = read(id, {field::kUuid, field::kNvmlIndex, field::kTotalEnergy});
            if (!values) {
                continue;  // this GPU stays unmatched, and is named below if NVML lists it
            }
            energy_at_open[id] = integer(find(*values, field::kTotalEnergy));
            if (auto uuid = text(find(*values, field::kUuid))) {
                dcgm_uuids.push_back(*uuid);
                by_uuid.emplace(std::move(*uuid), id);
            } else if (auto index = integer(find(*values, field::kNvmlIndex))) {
                by_index.emplace(*index, id);
            }
        }
        std::vector<std::string> unmatched;
        std::size_t readable = 0;
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            DcgmDevice& device = devices_[i];
            device.last.index = gpus[i].index;
            if (!gpus[i].fault.empty()) {
                continue;  // NVML could not list it: left out, its samples carry the fault
            }
            ++readable;
            if (auto it = by_uuid.find(gpus[i].uuid); it != by_uuid.end()) {
                device.dcgm_id = it->second;
            } else if (auto jt = by_index.find(gpus[i].index); jt != by_index.end()) {
                device.dcgm_id = jt->second;
            } else {
                unmatched.push_back(fmt::format("GPU {} ({})", gpus[i].index, gpus[i].uuid));
                continue;
            }
            device.energy.add(energy_at_open[*device.dcgm_id]);  // counting starts now
        }
        if (readable > 0 && unmatched.size() == readable) {
            return fail(
                ErrorCode::Io,
                fmt::format(
                    "{} reports none of the GPUs NVML lists on this machine "
                    "(DCGM: {}; NVML: {}); connect to this machine's "
                    "nv-hostengine, or use --gpus nvml",
                    where(),
                    dcgm_uuids.empty() ? "no GPU" : fmt::format("{}", fmt::join(dcgm_uuids, ", ")),
                    fmt::join(unmatched, ", ")));
        }
        if (!unmatched.empty()) {
            notes.push_back(fmt::format("{} does not report {}: NVML alone gives {} metrics",
                                        where(), fmt::join(unmatched, ", "),
                                        unmatched.size() == 1 ? "its" : "their"));
        }
        return {};
    }

    // The latest values of `fields` for one DCGM GPU.
    Result<std::vector<DcgmFieldValueV1>> read(unsigned int id,
                                               std::vector<unsigned short> fields) const {
        std::vector<DcgmFieldValueV1> values(fields.size());
        for (auto& v : values) {
            v.version = kDcgmFieldValueVersion1;
        }
        if (dcgmReturn_t rc =
                api_.latest_values(*handle_, static_cast<int>(id), fields.data(),
                                   static_cast<unsigned int>(fields.size()), values.data());
            rc != kDcgmOk) {
            return tl::unexpected(Error{
                ErrorCode::Io, fmt::format("DCGM GPU id {}: {}", id,
                                           describe(api_, "dcgmGetLatestValuesForFields", rc))});
        }
        return values;
    }

    static const DcgmFieldValueV1* find(const std::vector<DcgmFieldValueV1>& values,
                                        unsigned short id) {
        auto it = std::find_if(values.begin(), values.end(),
                               [id](const DcgmFieldValueV1& v) { return v.fieldId == id; });
        return it != values.end() ? &*it : nullptr;
    }

    // Lays DCGM's readings over NVML's sample `s` (which keeps its index and processes). Every
    // metric DCGM does not give is unknown, except memory, which NVML always gives.
    Result<void> overlay(DcgmDevice& device, GpuSample& s) {
        auto values = read(*device.dcgm_id, read_fields_);
        if (!values) {
            return fail(ErrorCode::Io, fmt::format("GPU {}: {}", s.index, values.error().message));
        }
        Freshness freshness;
        auto take = [&](unsigned short id) {
            const DcgmFieldValueV1* v = find(*values, id);
            auto n = number(v);
            if (n) {
                freshness.saw(v);
            }
            return n;
        };
        auto set = [](std::optional<double> value, std::optional<double>& slot,
                      MetricSource& source) {
            slot = value;
            source = value ? MetricSource::Dcgm : MetricSource::Unavailable;
        };

        const auto used = take(field::kFbUsed);
        auto free = take(field::kFbFree);
        const auto total = take(field::kFbTotal);
        if (used && !free && total) {
            free = std::max(0.0, *total - *used);
        }
        if (used && free) {
            s.used_mib = static_cast<MiB>(*used);
            s.free_mib = static_cast<MiB>(*free);
            s.sources.memory = MetricSource::Dcgm;
        } else {
            s.sources.memory = MetricSource::Nvml;
        }

        auto util = take(field::kGpuUtil);
        set(util ? std::optional(fraction(*util, 100.0)) : std::nullopt, s.util, s.sources.util);
        auto ratio = [&](unsigned short id) {
            auto r = take(id);
            return r ? std::optional(fraction(*r, 1.0)) : std::nullopt;
        };
        // Where DCGM's profiling fields are unavailable, NVML's GPM (Hopper and later) still
        // measures the same three: keep those rather than leave the metric unknown.
        auto activity = [&](std::optional<double> value, std::optional<double>& slot,
                            MetricSource& source) {
            if (!value && source == MetricSource::NvmlGpm && slot) {
                return;
            }
            set(value, slot, source);
        };
        activity(ratio(field::kSmActive), s.smact, s.sources.smact);
        activity(ratio(field::kSmOccupancy), s.smocc, s.sources.smocc);
        activity(ratio(field::kDramActive), s.drama, s.sources.drama);
        set(take(field::kPowerUsage), s.power_w, s.sources.power);

        const DcgmFieldValueV1* energy = find(*values, field::kTotalEnergy);
        const auto joules = device.energy.add(integer(energy));
        if (joules) {
            freshness.saw(energy);
        }
        set(joules, s.energy_j, s.sources.energy);

        if (auto age = freshness.age_s()) {
            s.age_s = *age;
        }
        return {};
    }

    SharedLibrary library_;  // first: closes last
    DcgmApi api_;
    std::string host_;
    std::unique_ptr<GpuBackend> nvml_;
    bool initialised_ = false;
    std::optional<dcgmHandle_t> handle_;
    std::optional<dcgmGpuGrp_t> group_;
    std::optional<dcgmFieldGrp_t> base_fields_;
    std::optional<dcgmFieldGrp_t> prof_fields_;
    const char* last_call_ = "";
    std::vector<unsigned short> read_fields_;
    std::vector<DcgmDevice> devices_;  // one per NVML GPU, in NVML's order
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> open_dcgm(const DcgmOptions& options) {
    auto library = open_library(library_candidates(options));
    if (!library) {
        return tl::unexpected(library.error());
    }
    auto api = resolve_dcgm_api(*library);
    if (!api) {
        return tl::unexpected(api.error());
    }
    // NVML lists the GPUs and their processes (see dcgm.h).
    auto nvml = open_nvml();
    if (!nvml) {
        return fail(ErrorCode::Io,
                    fmt::format("DCGM backend needs NVML for the GPU list and processes: {}",
                                nvml.error().message));
    }
    auto backend =
        std::make_unique<DcgmBackend>(std::move(*library), *api, options.host, std::move(*nvml));
    std::vector<std::string> notes;
    if (auto started = backend->start(notes); !started) {
        return tl::unexpected(started.error());  // the destructor undoes what was started
    }
    if (options.on_note) {
        for (const std::string& note : notes) {
            options.on_note(note);
        }
    }
    return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace carma::device
