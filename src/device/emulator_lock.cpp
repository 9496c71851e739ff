// The locked read-modify-write of the emulator state (emulator_file.h): taking the robust mutex
// (repairing what a holder that died left), integrating energy and freeing the slots of jobs
// that died before anyone looks, and deriving speeds and power again when the holder lets go.
// With the process liveness that freeing rests on.

#include "device/emulator_file.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::device::emu {

namespace {

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

}  // namespace

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

// --- EmulatorFile::lock -----------------------------------------------------------------------

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
