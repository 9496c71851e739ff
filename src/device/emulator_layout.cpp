// The emulator file's format (emulator_layout.h): telling what a file holds from its size and
// prefix, writing a backend's GPU set and world into the header, and reading them back.

#include "device/emulator_layout.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::device::emu {

namespace {

struct Prefix {
    std::uint64_t magic = 0;
    std::uint32_t version = 0;
    std::uint32_t size = 0;
};

}  // namespace

// --- what the file holds ----------------------------------------------------------------------

std::string header_problem(const Header& h) {
    if (h.gpu_count < 1 || h.gpu_count > kMaxGpus || h.usable_mib <= 0 || h.type_name[0] == 0) {
        return fmt::format("its header is damaged ({} GPUs of {} MiB each)", h.gpu_count,
                           h.usable_mib);
    }
    return {};
}

Result<Inspection> inspect(int fd, const std::string& path) {
    struct stat st = {};
    if (::fstat(fd, &st) != 0) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot stat it: {}", path, errno_text(errno)));
    }
    if (st.st_size == 0) {
        return Inspection{Layout::Empty, "it is empty"};
    }
    const Inspection wrong_size{Layout::OtherVersion,
                                fmt::format("it is {} bytes long where it should be {} "
                                            "(truncated or extended)",
                                            st.st_size, sizeof(State))};
    Prefix p;
    const ssize_t got = ::pread(fd, &p, sizeof p, 0);
    const bool read_ok = got == static_cast<ssize_t>(sizeof p);
    // Our size but no magic yet: an initialisation that was interrupted (the magic comes last).
    if (read_ok && p.magic == 0 && st.st_size == static_cast<off_t>(sizeof(State))) {
        return Inspection{Layout::Empty, "its initialisation never finished (no magic number)"};
    }
    if (!read_ok) {
        // Cut inside the prefix: ours if what is left is the start of the magic number.
        const std::uint64_t magic = kMagic;
        const std::size_t n = std::min(got > 0 ? static_cast<std::size_t>(got) : 0, sizeof magic);
        if (n > 0 && std::memcmp(&p, &magic, n) == 0) {
            return wrong_size;
        }
        return Inspection{Layout::Foreign,
                          fmt::format("it is shorter ({} bytes) than an emulator file's header",
                                      st.st_size)};
    }
    if (p.magic != kMagic) {
        return Inspection{Layout::Foreign,
                          "it does not start with the emulator file's magic number"};
    }
    if (p.version == kVersion && p.size == sizeof(State) &&
        st.st_size != static_cast<off_t>(sizeof(State))) {
        return wrong_size;
    }
    if (p.version != kVersion || p.size != sizeof(State)) {
        return Inspection{Layout::OtherVersion,
                          fmt::format("it holds layout version {} of {} bytes, where this CARMA "
                                      "writes version {} of {} bytes (another CARMA version)",
                                      p.version, p.size, kVersion, sizeof(State))};
    }
    Header h;
    if (::pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
        return Inspection{Layout::Damaged, "its header cannot be read"};
    }
    if (std::string problem = header_problem(h); !problem.empty()) {
        return Inspection{Layout::Damaged, std::move(problem)};
    }
    return Inspection{Layout::Ours, ""};
}

void write_world(Header& h, const EmulatorOptions& o) {
    h.world_kind = static_cast<std::uint32_t>(o.world.kind);
    h.world_compose = static_cast<std::uint32_t>(o.world.compose);
    h.world_bias = o.world.bias;
    h.world_noise = o.world.noise;
    h.world_seed = o.world.seed;
}

void write_gpu_set(Header& h, const EmulatorOptions& o) {
    h.gpu_count = o.gpus.count;
    h.sharing = static_cast<std::uint32_t>(o.sharing);
    std::memset(h.type_name, 0, sizeof h.type_name);
    std::memcpy(h.type_name, o.gpus.type.name.data(), o.gpus.type.name.size());
    h.usable_mib = o.gpus.type.usable_mib;
    h.idle_power_w = o.gpus.type.idle_power_w;
    h.max_power_w = o.gpus.type.max_power_w;
    write_world(h, o);
}

bool same_gpu_set(const Header& h, const EmulatorOptions& o) {
    return h.gpu_count == o.gpus.count && gpu_type_of(h).name == o.gpus.type.name &&
           h.usable_mib == o.gpus.type.usable_mib;
}

void clear_gpus_and_slots(State& s) {
    std::memset(s.gpus, 0, sizeof s.gpus);
    std::memset(s.slots, 0, sizeof s.slots);
    const double now = monotonic_seconds();
    for (GpuState& g : s.gpus) {
        g.updated_s = now;
    }
}

Result<void> validate_options(const EmulatorOptions& o) {
    if (o.file.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "emulated GPUs need an emulator file path (e.g. <state dir>/emulated-gpus)");
    }
    if (o.gpus.count < 1 || o.gpus.count > kMaxGpus) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: {} emulated GPUs asked for; one emulator file "
                                "holds 1..{}",
                                o.file, o.gpus.count, kMaxGpus));
    }
    if (o.gpus.type.name.empty() || o.gpus.type.name.size() >= sizeof(Header::type_name) ||
        o.gpus.type.usable_mib <= 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: GPU type '{}' cannot be emulated (name of 1..31 "
                                "characters and a positive capacity needed)",
                                o.file, o.gpus.type.name));
    }
    return {};
}

// --- reading the header back ------------------------------------------------------------------

model::GpuType gpu_type_of(const Header& h) {
    const std::size_t len = strnlen(h.type_name, sizeof h.type_name);
    return model::GpuType{std::string(h.type_name, len), h.usable_mib, h.idle_power_w,
                          h.max_power_w};
}

model::SharingMode sharing_of(const Header& h) {
    return h.sharing == static_cast<std::uint32_t>(model::SharingMode::Timeslice)
               ? model::SharingMode::Timeslice
               : model::SharingMode::Mps;
}

model::WorldConfig world_of(const Header& h) {
    model::WorldConfig w;
    w.kind = h.world_kind == static_cast<std::uint32_t>(model::WorldKind::Measured)
                 ? model::WorldKind::Measured
                 : model::WorldKind::Model;
    // Anything else than a compose this build knows (a newer writer's) reads as the default.
    switch (h.world_compose) {
        case static_cast<std::uint32_t>(model::WorldCompose::Pairwise):
            w.compose = model::WorldCompose::Pairwise;
            break;
        case static_cast<std::uint32_t>(model::WorldCompose::Bottleneck):
            w.compose = model::WorldCompose::Bottleneck;
            break;
        default:
            w.compose = model::WorldCompose::Model;
            break;
    }
    w.bias = std::isfinite(h.world_bias) ? std::max(0.0, h.world_bias) : 0.0;
    w.noise = std::isfinite(h.world_noise) ? std::max(0.0, h.world_noise) : 0.0;
    w.seed = h.world_seed;
    return w;
}

}  // namespace carma::device::emu
