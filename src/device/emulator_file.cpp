#include "device/emulator_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::device::emu {

namespace {

// --- byte-range OFD locks (per open file description, released when the fd is closed) --------

constexpr off_t kInitByte = 0;
constexpr off_t kAttachedByte = 1;

int ofd_lock(int fd, off_t byte, short type, bool wait) {
    struct flock fl = {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = byte;
    fl.l_len = 1;
    while (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) != 0) {
        if (errno != EINTR) {
            return errno;
        }
    }
    return 0;
}

Result<void> ofd_lock_or_fail(int fd, off_t byte, short type, const std::string& path) {
    if (int err = ofd_lock(fd, byte, type, true); err != 0) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot lock it: {}", path, errno_text(err)));
    }
    return {};
}

// Whether any other open file description holds the "attached" byte.
bool anyone_attached(int fd) {
    if (ofd_lock(fd, kAttachedByte, F_WRLCK, false) != 0) {
        return true;
    }
    ofd_lock(fd, kAttachedByte, F_UNLCK, false);
    return false;
}

// --- what the file holds ----------------------------------------------------------------------

enum class Layout { Empty, Foreign, OtherVersion, Damaged, Ours };

struct Prefix {
    std::uint64_t magic = 0;
    std::uint32_t version = 0;
    std::uint32_t size = 0;
};

struct Inspection {
    Layout layout = Layout::Empty;
    std::string detail;  // what is wrong with it, for messages ("" when Ours)
};

// What a header of our layout says that cannot be right (a damaged file), or "".
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

// Zeroed GPUs and slots; energy counts from now.
void clear_gpus_and_slots(State& s) {
    std::memset(s.gpus, 0, sizeof s.gpus);
    std::memset(s.slots, 0, sizeof s.slots);
    const double now = monotonic_seconds();
    for (GpuState& g : s.gpus) {
        g.updated_s = now;
    }
}

std::string live_pids(const State& s) {
    std::string out;
    int shown = 0;
    for (const Slot& slot : s.slots) {
        if (slot.pid != 0 && shown++ < 8) {
            out += fmt::format("{}{}", out.empty() ? "" : ", ", slot.pid);
        }
    }
    return out;
}

int live_jobs(const State& s) {
    return static_cast<int>(std::count_if(std::begin(s.slots), std::end(s.slots),
                                          [](const Slot& slot) { return slot.pid != 0; }));
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

struct Opened {
    int fd = -1;
    bool created = false;  // by this call: empty, nothing to keep
};

// Opens the file, creating it 0600: whoever can write it steers placement with its readings, so
// only the daemon's user opens it by name and tasks get a descriptor from their supervisor
// (GpuBackend::task_files). Never through a symlink: a planted link would make the daemon write
// (and chmod) whatever it points at.
Result<Opened> open_or_create(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        ::fchmod(fd, 0600);  // a umask may have taken the owner's bits too
        return Opened{fd, true};
    }
    if (errno == EEXIST) {
        fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    }
    if (fd < 0) {
        const int err = errno;
        if (err == ELOOP) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("emulator file {}: is a symbolic link, which is never "
                                    "followed there; remove it (the file is created anew)",
                                    path));
        }
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot open it for writing: {}; check that its "
                                "directory exists and is writable",
                                path, errno_text(err)));
    }
    struct stat st = {};
    std::string problem;
    if (::fstat(fd, &st) != 0) {
        problem = fmt::format("cannot stat it: {}", errno_text(errno));
    } else if (!S_ISREG(st.st_mode)) {
        problem = "is not a regular file; remove it or choose another path";
    } else if (st.st_uid != ::geteuid()) {
        problem = fmt::format("belongs to uid {}, not to this process's uid {}, and its owner "
                              "could write false GPU readings; remove it (the file is created "
                              "anew)",
                              st.st_uid, ::geteuid());
    } else if ((st.st_mode & 07777) != 0600 && ::fchmod(fd, 0600) != 0) {
        problem = fmt::format("cannot make it 0600: {}", errno_text(errno));
    }
    if (!problem.empty()) {
        ::close(fd);
        return fail(ErrorCode::InvalidArgument, fmt::format("emulator file {}: {}", path, problem));
    }
    return Opened{fd, false};
}

// The descriptor of the file that carma-shim passed in $CARMA_EMULATOR_FD, duplicated
// (close-on-exec, owned by the caller) so that closing it leaves the inherited one to the task's
// other processes; -1 when the variable is unset or names no descriptor of `path`, with `why`
// saying which (empty when unset). If `path` cannot be looked at (the task's user may not), the
// descriptor is trusted: the layout checks that follow still apply.
int inherited_fd(const std::string& path, std::string& why) {
    const char* env = std::getenv(kEmulatorFdEnv);
    if (env == nullptr || *env == '\0') {
        return -1;
    }
    const std::string_view text(env);
    int fd = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), fd);
    if (ec != std::errc() || end != text.data() + text.size() || fd < 0) {
        why = fmt::format("{}='{}' is not a descriptor number", kEmulatorFdEnv, text);
        return -1;
    }
    struct stat fd_st = {};
    if (::fstat(fd, &fd_st) != 0 || !S_ISREG(fd_st.st_mode)) {
        why = fmt::format("{}={} is not an open file here (a launcher in between may have closed "
                          "it: keep it open for the job, e.g. Python's subprocess pass_fds)",
                          kEmulatorFdEnv, fd);
        return -1;
    }
    struct stat path_st = {};
    if (::stat(path.c_str(), &path_st) == 0 &&
        (path_st.st_dev != fd_st.st_dev || path_st.st_ino != fd_st.st_ino)) {
        why = fmt::format("{}={} is another file", kEmulatorFdEnv, fd);
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) != O_RDWR) {
        why = fmt::format("{}={} is not open for reading and writing", kEmulatorFdEnv, fd);
        return -1;
    }
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0) {
        why = fmt::format("{}={} cannot be duplicated: {}", kEmulatorFdEnv, fd, errno_text(errno));
    }
    return own;
}

struct ProcStat {
    char state = '?';
    std::uint64_t start_ticks = 0;
};

std::optional<ProcStat> read_proc_stat(pid_t pid) {
    const std::string path = fmt::format("/proc/{}/stat", pid);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return std::nullopt;
    }
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) {
        return std::nullopt;
    }
    // "pid (comm) S ppid ... starttime ...": comm may hold spaces and ')', so parse after the last
    // ')'. The state is field 3, starttime field 22 (proc(5)).
    const std::string_view text(buf, static_cast<std::size_t>(n));
    const std::size_t close = text.rfind(')');
    if (close == std::string_view::npos || close + 2 >= text.size()) {
        return std::nullopt;
    }
    ProcStat out;
    out.state = text[close + 2];
    std::size_t pos = close + 2;
    for (int field = 3; field < 22; ++field) {
        pos = text.find(' ', pos);
        if (pos == std::string_view::npos) {
            return std::nullopt;
        }
        ++pos;
    }
    for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
        out.start_ticks = out.start_ticks * 10 + static_cast<std::uint64_t>(text[pos] - '0');
    }
    return out;
}

// The slot table can be half-written by a holder that died: drop what cannot be right.
void repair(State& s) {
    const std::uint64_t valid =
        s.header.gpu_count >= 64 ? ~0ULL : (1ULL << static_cast<unsigned>(s.header.gpu_count)) - 1;
    for (Slot& slot : s.slots) {
        if (slot.pid != 0 && (slot.gpu_mask == 0 || (slot.gpu_mask & ~valid) != 0)) {
            slot = Slot{};
        }
    }
}

Result<void> init_mutex(pthread_mutex_t* m, const std::string& path) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    const int rc = pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
        return fail(
            ErrorCode::Internal,
            fmt::format("emulator file {}: cannot set up its mutex: {}", path, errno_text(rc)));
    }
    return {};
}

// Whether the file must be written from scratch: new, or (told through on_note) one we cannot
// use that nobody uses. An error for a file that is not ours, one still in use, and any damaged
// one while attempts are believed running: re-initialising would wipe their jobs' GPU state.
Result<bool> needs_fresh_start(int fd, const EmulatorOptions& o, bool created) {
    auto found = inspect(fd, o.file);
    if (!found) {
        return tl::unexpected(found.error());
    }
    if (found->layout == Layout::Ours) {
        return false;
    }
    if (created) {
        return true;
    }
    if (o.attempts_running > 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: {}, and {} attempt(s) recorded running may "
                                "still use it: re-initialising it would lose their GPU state "
                                "(memory held, progress); stop them (end their tasks' process "
                                "groups) and start again, or move the file away to start afresh "
                                "without their state",
                                o.file, found->detail, o.attempts_running));
    }
    if (found->layout == Layout::Foreign) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: exists but is not an emulator file ({}); "
                                "remove it or choose another path",
                                o.file, found->detail));
    }
    if (anyone_attached(fd)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: {}, and it is still in use; stop its jobs (or "
                                "use another path) and retry",
                                o.file, found->detail));
    }
    if (o.on_note) {
        o.on_note(fmt::format("emulator file {}: {}; re-initialising it for {} (no attempt is "
                              "running, nobody has it open)",
                              o.file, found->detail, o.gpus.text()));
    }
    return true;
}

}  // namespace

// --- pure functions ---------------------------------------------------------------------------

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
    w.bias = std::isfinite(h.world_bias) ? std::max(0.0, h.world_bias) : 0.0;
    w.noise = std::isfinite(h.world_noise) ? std::max(0.0, h.world_noise) : 0.0;
    w.seed = h.world_seed;
    return w;
}

bool on_gpu(const Slot& s, int gpu) {
    return s.pid != 0 && ((s.gpu_mask >> static_cast<unsigned>(gpu)) & 1ULL) != 0;
}

MiB used_mib(const State& s, int gpu) {
    MiB used = 0;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu)) {
            used += slot.memory_mib;
        }
    }
    return used;
}

double summed_util(const State& s, int gpu) {
    double u = 0;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu) && slot.phase == Phase::Active) {
            u += slot.util;
        }
    }
    return u;
}

model::GpuActivity gpu_activity(const State& s, int gpu) {
    std::vector<model::Contribution> active;
    for (const Slot& slot : s.slots) {
        if (on_gpu(slot, gpu) && slot.phase == Phase::Active) {
            active.push_back({slot.util, slot.smact, slot.smocc, slot.drama, slot.speed});
        }
    }
    return model::aggregate_activity(active);
}

void derive(State& s) {
    const model::World world(world_of(s.header), sharing_of(s.header));
    const int count = std::clamp(s.header.gpu_count, 0, kMaxGpus);
    for (Slot& slot : s.slots) {
        slot.speed = slot.pid != 0 && slot.phase == Phase::Active ? 1.0 : 0.0;
    }
    // A job spanning GPUs runs in lock step: at the speed of its slowest GPU. The world knows a
    // job by its profile (fake jobs of one profile are one workload).
    std::vector<model::WorldTask> tasks;
    std::vector<Slot*> of;
    std::vector<double> speeds;
    for (int g = 0; g < count; ++g) {
        tasks.clear();
        of.clear();
        for (Slot& slot : s.slots) {
            if (on_gpu(slot, g) && slot.phase == Phase::Active) {
                const std::string key = fmt::format("{:a}|{:a}|{:a}|{:a}", slot.util, slot.smact,
                                                    slot.smocc, slot.drama);
                tasks.push_back(model::WorldTask{model::world_id(key), slot.util});
                of.push_back(&slot);
            }
        }
        speeds.assign(tasks.size(), 1.0);
        world.speeds(tasks, speeds);
        for (std::size_t i = 0; i < of.size(); ++i) {
            of[i]->speed = std::min(of[i]->speed, speeds[i]);
        }
    }
    const model::GpuType type = gpu_type_of(s.header);
    for (int g = 0; g < count; ++g) {
        s.gpus[g].power_w = model::gpu_power_w(gpu_activity(s, g), type);
    }
}

void integrate_energy(State& s, double now_s) {
    const int count = std::clamp(s.header.gpu_count, 0, kMaxGpus);
    for (int g = 0; g < count; ++g) {
        GpuState& gpu = s.gpus[g];
        // The clock goes backwards only across a reboot (the file outlived it): start afresh.
        if (now_s > gpu.updated_s) {
            gpu.energy_j += gpu.power_w * (now_s - gpu.updated_s);
        }
        gpu.updated_s = now_s;
    }
}

// --- liveness ---------------------------------------------------------------------------------

std::uint64_t process_start_ticks(pid_t pid) {
    const auto stat = read_proc_stat(pid);
    return stat ? stat->start_ticks : 0;
}

bool process_alive(pid_t pid, std::uint64_t start_ticks) {
    if (pid <= 0) {
        return false;
    }
    // EPERM means it exists but belongs to someone else: alive.
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
        return false;
    }
    const auto stat = read_proc_stat(pid);
    if (!stat) {
        return true;  // no /proc to ask (hidepid): trust kill()
    }
    if (stat->state == 'Z' || stat->state == 'X') {
        return false;
    }
    return start_ticks == 0 || stat->start_ticks == start_ticks;
}

double monotonic_seconds() {
    timespec ts = {};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// --- Locked -----------------------------------------------------------------------------------

Locked::Locked(Locked&& other) noexcept : state_(other.state_), recovered_(other.recovered_) {
    other.state_ = nullptr;
}

Locked::~Locked() {
    if (state_ != nullptr) {
        derive(*state_);
        pthread_mutex_unlock(&state_->header.mutex);
    }
}

// --- EmulatorFile -----------------------------------------------------------------------------

EmulatorFile::~EmulatorFile() {
    if (state_ != nullptr) {
        ::munmap(state_, sizeof(State));
    }
    if (fd_ >= 0) {
        ::close(fd_);  // also lets go of the OFD locks
    }
}

Result<void> EmulatorFile::map() {
    void* p = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot map it: {}", path_, errno_text(errno)));
    }
    state_ = static_cast<State*>(p);
    return {};
}

Result<std::unique_ptr<EmulatorFile>> EmulatorFile::open_for_backend(const EmulatorOptions& o) {
    if (auto ok = validate_options(o); !ok) {
        return tl::unexpected(ok.error());
    }
    auto opened = open_or_create(o.file);
    if (!opened) {
        return tl::unexpected(opened.error());
    }
    const int fd = opened->fd;
    std::unique_ptr<EmulatorFile> file(new EmulatorFile(o.file, fd));
    // Exclusive until the header is right: jobs opening meanwhile wait.
    if (auto ok = ofd_lock_or_fail(fd, kInitByte, F_WRLCK, o.file); !ok) {
        return tl::unexpected(ok.error());
    }
    auto fresh = needs_fresh_start(fd, o, opened->created);
    if (!fresh) {
        return tl::unexpected(fresh.error());
    }
    if (auto ok = *fresh ? file->initialise(o) : file->reopen(o); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = file->adopt_header(); !ok) {
        return tl::unexpected(ok.error());
    }
    ofd_lock(fd, kAttachedByte, F_RDLCK, true);
    ofd_lock(fd, kInitByte, F_UNLCK, false);
    return file;
}

// A new file; only while nobody else has it mapped (the caller checked).
Result<void> EmulatorFile::initialise(const EmulatorOptions& o) {
    // Truncating to zero first zeroes whatever an older layout left behind.
    if (::ftruncate(fd_, 0) != 0 || ::ftruncate(fd_, static_cast<off_t>(sizeof(State))) != 0) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot size it: {}", path_, errno_text(errno)));
    }
    if (auto ok = map(); !ok) {
        return ok;
    }
    Header& h = state_->header;
    if (auto ok = init_mutex(&h.mutex, path_); !ok) {
        return ok;
    }
    write_gpu_set(h, o);
    h.generation = 1;
    h.next_serial = 1;
    clear_gpus_and_slots(*state_);
    derive(*state_);
    // The prefix last: a reader that sees the magic sees a whole file.
    h.version = kVersion;
    h.size = sizeof(State);
    h.magic = kMagic;
    return {};
}

// An existing file of our layout: the same GPUs keep their jobs and energy counters; other GPUs
// replace the old ones only if no job is alive on them.
Result<void> EmulatorFile::reopen(const EmulatorOptions& o) {
    if (auto ok = map(); !ok) {
        return ok;
    }
    if (auto ok = adopt_header(); !ok) {
        return ok;
    }
    auto locked = lock(Reap::Now);  // "live" must mean alive now
    if (!locked) {
        return tl::unexpected(locked.error());
    }
    State& s = locked->state();
    if (same_gpu_set(s.header, o)) {
        // The sharing mode only changes speeds from now on; the jobs keep running.
        s.header.sharing = static_cast<std::uint32_t>(o.sharing);
        write_world(s.header, o);
        derive(s);
        return {};
    }
    if (live_jobs(s) > 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: emulates {}x{} with {} live job(s) (pids {}); "
                                "cannot switch it to {}; stop those jobs or use another path",
                                path_, s.header.gpu_count, gpu_type_of(s.header).name, live_jobs(s),
                                live_pids(s), o.gpus.text()));
    }
    if (o.on_note) {
        o.on_note(fmt::format("emulator file {}: emulated {}x{}; re-initialising it for {} (no "
                              "live job in it)",
                              path_, s.header.gpu_count, gpu_type_of(s.header).name,
                              o.gpus.text()));
    }
    write_gpu_set(s.header, o);
    ++s.header.generation;
    clear_gpus_and_slots(s);
    return {};
}

// Through the inherited descriptor, the task's processes share one open file description, and
// OFD locks belong to the description: the "attached" byte then stays held until the last of
// them has closed it (attachment is over-reported while the task lives, which only keeps a
// backend from re-initialising under it), and one process releasing "initialising" releases it
// for the others still validating. That is safe: it is released only after "attached" is taken,
// and a backend re-initialises an existing file only if nobody is attached to it.
Result<std::unique_ptr<EmulatorFile>> EmulatorFile::open_for_job(const std::string& path) {
    std::string why_not_inherited;
    int fd = inherited_fd(path, why_not_inherited);
    if (fd < 0) {
        fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        const int err = errno;
        std::string hint = fmt::format("it is created by `carma serve` with emulated GPUs and "
                                       "named in {}",
                                       kEmulatorFileEnv);
        if (err == EACCES) {
            hint = fmt::format("only the daemon's user may open it by name; `carma serve` hands "
                               "its tasks an open descriptor in {}",
                               kEmulatorFdEnv);
        }
        if (!why_not_inherited.empty()) {
            hint += "; " + why_not_inherited;
        }
        return fail(err == ENOENT ? ErrorCode::NotFound : ErrorCode::Io,
                    fmt::format("emulator file {}: cannot open it: {}; {}", path, errno_text(err),
                                hint));
    }
    std::unique_ptr<EmulatorFile> file(new EmulatorFile(path, fd));
    // Shared: waits while a backend is (re-)initialising it.
    if (auto ok = ofd_lock_or_fail(fd, kInitByte, F_RDLCK, path); !ok) {
        return tl::unexpected(ok.error());
    }
    auto found = inspect(fd, path);
    if (!found) {
        return tl::unexpected(found.error());
    }
    if (found->layout != Layout::Ours) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: not an emulator file of this CARMA version "
                                "({}); restart `carma serve` with emulated GPUs",
                                path, found->detail));
    }
    if (auto ok = file->map(); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = file->adopt_header(); !ok) {
        return tl::unexpected(ok.error());
    }
    ofd_lock(fd, kAttachedByte, F_RDLCK, true);
    ofd_lock(fd, kInitByte, F_UNLCK, false);
    return file;
}

// Takes the current generation's GPU set as this mapping's own.
Result<void> EmulatorFile::adopt_header() {
    generation_ = state_->header.generation;
    auto locked = lock();
    if (!locked) {
        return tl::unexpected(locked.error());
    }
    const Header& h = locked->state().header;
    generation_ = h.generation;
    gpu_count_ = h.gpu_count;
    type_ = gpu_type_of(h);
    if (std::string problem = header_problem(h); !problem.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: {}; remove the file once no job uses it",
                                path_, problem));
    }
    return {};
}

Result<Locked> EmulatorFile::lock(Reap reap) {
    Header& h = state_->header;
    timespec deadline = {};
    ::clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += static_cast<time_t>(kLockTimeoutS);
    int rc = pthread_mutex_clocklock(&h.mutex, CLOCK_MONOTONIC, &deadline);
    bool recovered = false;
    if (rc == EOWNERDEAD) {
        // The holder died mid-update; every derived value is recomputed below and at unlock.
        pthread_mutex_consistent(&h.mutex);
        recovered = true;
        rc = 0;
    }
    if (rc == ETIMEDOUT) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: its lock has been held for over {:.0f} s by "
                                "pid {}; if that process is stopped, continue or kill it",
                                path_, kLockTimeoutS, h.owner_pid));
    }
    if (rc != 0) {
        return fail(ErrorCode::Io,
                    fmt::format("emulator file {}: cannot take its lock: {}; remove the file once "
                                "no job uses it",
                                path_, errno_text(rc)));
    }
    Locked locked(state_, recovered);
    h.owner_pid = static_cast<std::int32_t>(::getpid());
    if (h.generation != generation_) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("emulator file {}: was re-initialised for {} GPUs by another "
                                "process since this one opened it; open it again",
                                path_, h.gpu_count));
    }
    if (recovered) {
        repair(*state_);
    }
    // Energy first, with the power of the state that held until now; then the changes.
    const double now = monotonic_seconds();
    integrate_energy(*state_, now);
    if (reap == Reap::Now || !(std::abs(now - h.reaped_s) < kReapIntervalS)) {
        reap_dead(*state_, now);
    }
    derive(*state_);
    return locked;
}

// The driver frees a dead process's memory: so do we, before anyone looks at the GPUs.
void EmulatorFile::reap_dead(State& s, double now_s) {
    s.header.reaped_s = now_s;
    for (Slot& slot : s.slots) {
        if (slot.pid != 0 && !process_alive(slot.pid, slot.start_ticks)) {
            slot = Slot{};
        }
    }
}

}  // namespace carma::device::emu
