// Opening and attaching to the emulator file (emulator_file.h): the backend creates,
// re-attaches to or re-initialises it, a job attaches through its inherited descriptor or the
// path, and two byte-range locks keep either from mapping a header that is being written.

#include "device/emulator_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/text.h"
#include "device/emulator_layout.h"

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

// --- opening and re-initialising --------------------------------------------------------------

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

}  // namespace carma::device::emu
