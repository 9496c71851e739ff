#include "device/emulated_job.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "core/gpu_share.h"
#include "core/mps_limit.h"
#include "core/text.h"
#include "device/emulated.h"
#include "device/emulator_file.h"

namespace carma::device {

namespace {

// One CUDA_VISIBLE_DEVICES entry: an index or an emulated GPU's UUID; -1 if neither.
int device_index(std::string_view entry, int gpu_count) {
    int index = -1;
    const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    if (ec == std::errc() && ptr == entry.data() + entry.size()) {
        return index >= 0 && index < gpu_count ? index : -1;
    }
    for (int i = 0; i < gpu_count; ++i) {
        if (entry == emulated_gpu_uuid(i)) {
            return i;
        }
    }
    return -1;
}

Result<void> check_profile(const JobProfile& p) {
    for (double v : {p.util, p.smact, p.smocc, p.drama}) {
        if (!std::isfinite(v) || v < 0 || v > 1) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("job profile util {} smact {} smocc {} drama {}: each must be "
                                    "a fraction in 0..1",
                                    p.util, p.smact, p.smocc, p.drama));
        }
    }
    return {};
}

int free_slot(const emu::State& s) {
    for (int i = 0; i < emu::kMaxSlots; ++i) {
        if (s.slots[i].pid == 0) {
            return i;
        }
    }
    return -1;
}

// The lock together with this handle's slot, provided the slot is still this handle's.
struct OwnSlot {
    emu::Locked locked;
    emu::Slot* slot;
};

Result<OwnSlot> lock_slot(emu::EmulatorFile* file, int slot, std::uint64_t serial) {
    if (file == nullptr) {
        return fail(ErrorCode::InvalidArgument, "this job has detached from the emulated GPUs");
    }
    auto locked = file->lock();
    if (!locked) {
        return tl::unexpected(locked.error());
    }
    emu::Slot* s = &locked->state().slots[slot];
    if (s->pid == 0 || s->serial != serial) {
        return fail(ErrorCode::NotFound,
                    fmt::format("emulator file {}: slot {} of this job (pid {}) was freed by "
                                "someone else (the backend thought the process dead, or the file "
                                "was re-initialised); attach again",
                                file->path(), slot, ::getpid()));
    }
    return OwnSlot{std::move(*locked), s};
}

// The job's MPS memory limit per CUDA ordinal, from the variable's value.
Result<std::vector<std::optional<MiB>>> limits_from(std::string_view text,
                                                    const std::vector<int>& gpus) {
    auto parsed = parse_pinned_mem_limit(text);
    if (!parsed) {
        return tl::unexpected(parsed.error());
    }
    std::vector<std::optional<MiB>> limits(gpus.size());
    for (const MpsMemLimit& l : *parsed) {
        std::size_t ordinal = gpus.size();
        if (l.device.starts_with("GPU-") || l.device.starts_with("MIG-")) {
            for (std::size_t i = 0; i < gpus.size(); ++i) {
                if (l.device == emulated_gpu_uuid(gpus[i])) {
                    ordinal = i;
                }
            }
        } else {
            const auto [ptr, ec] =
                std::from_chars(l.device.data(), l.device.data() + l.device.size(), ordinal);
            if (ec != std::errc() || ptr != l.device.data() + l.device.size()) {
                ordinal = gpus.size();
            }
        }
        if (ordinal >= gpus.size()) {
            return fail(
                ErrorCode::InvalidArgument,
                fmt::format("{}='{}': device '{}' is not one of the job's {} GPU(s) in "
                            "CUDA_VISIBLE_DEVICES (ordinals 0..{}, or their UUIDs)",
                            kMpsMemLimitEnv, text, l.device, gpus.size(), gpus.size() - 1));
        }
        limits[ordinal] = l.limit_mib;
    }
    return limits;
}

}  // namespace

Result<std::vector<int>> parse_visible_devices(std::string_view text, int gpu_count) {
    std::vector<int> out;
    std::string_view rest = text;
    while (!trim(rest).empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view entry = trim(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const int index = device_index(entry, gpu_count);
        if (index < 0) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("CUDA_VISIBLE_DEVICES '{}': '{}' is neither a GPU index "
                                    "0..{} nor an emulated GPU UUID ({}...)",
                                    text, entry, gpu_count - 1, emulated_gpu_uuid(0)));
        }
        if (std::find(out.begin(), out.end(), index) != out.end()) {
            return fail(
                ErrorCode::InvalidArgument,
                fmt::format("CUDA_VISIBLE_DEVICES '{}': GPU {} is named twice", text, index));
        }
        out.push_back(index);
    }
    if (out.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("CUDA_VISIBLE_DEVICES '{}' names no GPU; give indices (0,1) or "
                                "emulated GPU UUIDs",
                                text));
    }
    return out;
}

Result<JobHandle> JobHandle::attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile) {
    const auto from_env = [](std::string_view name) -> std::optional<std::string_view> {
        const char* value = std::getenv(std::string(name).c_str());
        return value != nullptr ? std::optional<std::string_view>(value) : std::nullopt;
    };
    return attach(file, visible_devices, profile, from_env(kMpsMemLimitEnv),
                  from_env(kMpsThreadPercentageEnv));
}

Result<JobHandle> JobHandle::attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile,
                                    std::optional<std::string_view> pinned_mem_limit) {
    return attach(file, visible_devices, profile, pinned_mem_limit, std::nullopt);
}

Result<JobHandle> JobHandle::attach(const std::string& file, std::string_view visible_devices,
                                    const JobProfile& profile,
                                    std::optional<std::string_view> pinned_mem_limit,
                                    std::optional<std::string_view> active_thread_percentage) {
    if (auto ok = check_profile(profile); !ok) {
        return tl::unexpected(ok.error());
    }
    std::uint32_t sm_cap_permille = 0;
    if (active_thread_percentage) {
        auto cap = parse_active_thread_percentage(*active_thread_percentage);
        if (!cap) {
            return tl::unexpected(cap.error());
        }
        sm_cap_permille = static_cast<std::uint32_t>(*cap);
    }
    auto opened = emu::EmulatorFile::open_for_job(file);
    if (!opened) {
        return tl::unexpected(opened.error());
    }
    auto gpus = parse_visible_devices(visible_devices, (*opened)->gpu_count());
    if (!gpus) {
        return tl::unexpected(gpus.error());
    }
    std::vector<std::optional<MiB>> limits(gpus->size());
    if (pinned_mem_limit) {
        auto parsed = limits_from(*pinned_mem_limit, *gpus);
        if (!parsed) {
            return tl::unexpected(parsed.error());
        }
        limits = std::move(*parsed);
    }
    JobHandle job;
    job.file_ = std::move(*opened);
    job.gpus_ = std::move(*gpus);
    job.limits_ = std::move(limits);
    job.pid_ = ::getpid();
    job.capacity_mib_ = job.file_->gpu_type().usable_mib;
    auto locked = job.file_->lock(emu::Reap::Now);  // dead jobs' slots are free slots
    if (!locked) {
        return tl::unexpected(locked.error());
    }
    emu::State& s = locked->state();
    job.slot_ = free_slot(s);
    if (job.slot_ < 0) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("emulator file {}: all {} job slots are taken; wait for jobs to "
                                "end",
                                file, emu::kMaxSlots));
    }
    emu::Slot slot = {};
    slot.phase = emu::Phase::Starting;
    slot.serial = s.header.next_serial++;
    slot.start_ticks = emu::process_start_ticks(job.pid_);
    for (int g : job.gpus_) {
        slot.gpu_mask |= 1ULL << static_cast<unsigned>(g);
    }
    slot.util = profile.util;
    slot.smact = profile.smact;
    slot.smocc = profile.smocc;
    slot.drama = profile.drama;
    slot.sm_cap_permille = sm_cap_permille;
    slot.pid = static_cast<std::int32_t>(job.pid_);
    s.slots[job.slot_] = slot;
    job.serial_ = slot.serial;
    return job;
}

JobHandle::JobHandle(JobHandle&& other) noexcept
    : file_(std::move(other.file_)),
      gpus_(std::move(other.gpus_)),
      slot_(std::exchange(other.slot_, -1)),
      serial_(other.serial_),
      pid_(other.pid_),
      capacity_mib_(other.capacity_mib_),
      memory_mib_(other.memory_mib_),
      limits_(std::move(other.limits_)) {}

JobHandle& JobHandle::operator=(JobHandle&& other) noexcept {
    if (this != &other) {
        detach();
        file_ = std::move(other.file_);
        gpus_ = std::move(other.gpus_);
        slot_ = std::exchange(other.slot_, -1);
        serial_ = other.serial_;
        pid_ = other.pid_;
        capacity_mib_ = other.capacity_mib_;
        memory_mib_ = other.memory_mib_;
        limits_ = std::move(other.limits_);
    }
    return *this;
}

JobHandle::~JobHandle() {
    detach();
}

Result<Allocation> JobHandle::set_memory(MiB mib) {
    if (mib < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("set_memory({} MiB): memory cannot be negative", mib));
    }
    auto own = lock_slot(file_.get(), slot_, serial_);
    if (!own) {
        return tl::unexpected(own.error());
    }
    const emu::State& s = own->locked.state();
    // The OOM rule: the allocation that would cross a GPU's capacity, or this job's MPS limit
    // there, fails; the holders keep theirs.
    for (std::size_t ordinal = 0; ordinal < gpus_.size(); ++ordinal) {
        const MiB used = emu::used_mib(s, gpus_[ordinal]);
        const MiB others = used - own->slot->memory_mib;
        const std::optional<MiB> limit = limits_[ordinal];
        if (limit && mib > own->slot->memory_mib && mib > *limit) {
            // As cudaMemGetInfo reports under a limit: the total is the GPU's, the free part
            // what the limit leaves (or less, if the GPU itself is fuller).
            const MiB gpu_free = std::max<MiB>(0, s.header.usable_mib - used);
            return Allocation{false,
                              static_cast<int>(ordinal),
                              mib - own->slot->memory_mib,
                              s.header.usable_mib,
                              std::clamp<MiB>(*limit - own->slot->memory_mib, 0, gpu_free),
                              own->slot->memory_mib,
                              *limit};
        }
        if (mib > own->slot->memory_mib && others + mib > s.header.usable_mib) {
            return Allocation{false,
                              static_cast<int>(ordinal),
                              mib - own->slot->memory_mib,
                              s.header.usable_mib,
                              std::max<MiB>(0, s.header.usable_mib - used),
                              own->slot->memory_mib};
        }
    }
    own->slot->memory_mib = mib;
    memory_mib_ = mib;
    return Allocation{};
}

Result<void> JobHandle::set_active(bool active) {
    auto own = lock_slot(file_.get(), slot_, serial_);
    if (!own) {
        return tl::unexpected(own.error());
    }
    own->slot->phase = active ? emu::Phase::Active : emu::Phase::Starting;
    return {};
}

Result<double> JobHandle::current_speed() {
    auto own = lock_slot(file_.get(), slot_, serial_);
    if (!own) {
        return tl::unexpected(own.error());
    }
    return own->slot->speed;  // derived when the lock was taken
}

Result<void> JobHandle::set_progress(double fraction) {
    auto own = lock_slot(file_.get(), slot_, serial_);
    if (!own) {
        return tl::unexpected(own.error());
    }
    own->slot->progress = std::clamp(fraction, 0.0, 1.0);
    return {};
}

Result<void> JobHandle::set_hidden(bool hidden) {
    auto own = lock_slot(file_.get(), slot_, serial_);
    if (!own) {
        return tl::unexpected(own.error());
    }
    own->slot->hidden = hidden ? 1U : 0U;
    return {};
}

void JobHandle::detach() {
    if (!file_) {
        return;
    }
    // A forked child holds a copy of its parent's handle: the slot stays the parent's.
    if (::getpid() == pid_) {
        if (auto own = lock_slot(file_.get(), slot_, serial_)) {
            *own->slot = emu::Slot{};
        }
    }
    file_.reset();
    slot_ = -1;
    memory_mib_ = 0;
}

}  // namespace carma::device
