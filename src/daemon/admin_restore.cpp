#include "daemon/admin_restore.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/text.h"
#include "exec/launch.h"
#include "store/restore.h"
#include "store/store.h"

namespace carma::daemon {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDbFiles[] = {"carma.db", "carma.db-wal", "carma.db-shm"};

std::optional<long> positive_number(const std::string& name) {
    long value = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
    if (ec != std::errc() || ptr != name.data() + name.size() || name.empty() || value <= 0) {
        return std::nullopt;
    }
    return value;
}

// attempts/<task>/<number>; anything else there is not an attempt and stays.
std::vector<AttemptDir> attempt_dirs(const fs::path& attempts) {
    std::vector<AttemptDir> out;
    std::error_code ec;
    for (const auto& task : fs::directory_iterator(attempts, ec)) {
        const auto id = positive_number(task.path().filename().string());
        if (!id || !task.is_directory()) {
            continue;
        }
        std::error_code inner;
        for (const auto& attempt : fs::directory_iterator(task.path(), inner)) {
            const auto n = positive_number(attempt.path().filename().string());
            if (n && attempt.is_directory()) {
                out.push_back({*id, static_cast<int>(*n)});
            }
        }
    }
    return out;
}

// A directory of its own for what the restore replaces: restore-YYYYmmdd-HHMMSS[-N].
Result<fs::path> make_aside_dir(const fs::path& state) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int n = 0; n < 100; ++n) {
        const fs::path dir =
            state / (n == 0 ? fmt::format("restore-{}", stamp) : fmt::format("restore-{}-{}", stamp, n));
        if (::mkdir(dir.c_str(), 0700) == 0) {
            return dir;
        }
        if (errno != EEXIST) {
            return fail(ErrorCode::Io, fmt::format("cannot create {}: {}", dir.string(),
                                                   errno_text(errno)));
        }
    }
    return fail(ErrorCode::Io,
                fmt::format("cannot find a free name restore-{}-N in {}", stamp, state.string()));
}

Result<void> move_path(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    fs::rename(from, to, ec);
    if (ec) {
        return fail(ErrorCode::Io, fmt::format("cannot move {} to {}: {}", from.string(),
                                               to.string(), ec.message()));
    }
    return {};
}

pid_t shim_pid_of(const fs::path& dir) {
    pid_t pid = 0;
    std::ifstream(dir / "shim.pid") >> pid;
    return pid;
}

// Stops the attempts that still run; returns those that did. Each gets its shim's SIGTERM
// (the shim stops the task as on a cancel and records the end in exit.json); whatever still runs
// after `wait_s` is killed.
std::vector<AttemptDir> stop_running(const fs::path& attempts, const std::vector<AttemptDir>& dirs,
                                     double wait_s, std::vector<std::string>& warnings) {
    std::vector<std::pair<AttemptDir, exec::LaunchHandle>> live;
    for (const AttemptDir& a : dirs) {
        const std::string dir =
            (attempts / std::to_string(a.task) / std::to_string(a.number)).string();
        exec::LaunchHandle h{shim_pid_of(dir), dir, ""};
        if (exec::read_exit(dir) || !exec::shim_alive(h)) {
            continue;
        }
        if (auto r = exec::request_stop(h); !r) {
            warnings.push_back(r.error().message);
        }
        live.emplace_back(a, h);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    auto running = [&] {
        for (const auto& [a, h] : live) {
            if (exec::shim_alive(h)) {
                return true;
            }
        }
        return false;
    };
    while (running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::vector<AttemptDir> out;
    for (const auto& [a, h] : live) {
        out.push_back(a);
        if (!exec::shim_alive(h)) {
            continue;
        }
        if (auto pgid = exec::task_pgid(h.attempt_dir); pgid && *pgid > 1) {
            ::kill(-*pgid, SIGKILL);
        }
        ::kill(h.shim_pid, SIGKILL);
        warnings.push_back(fmt::format("task {} attempt {} did not end within {:.0f} s of its "
                                       "SIGTERM and was killed; it has no exit.json",
                                       a.task, a.number, wait_s));
    }
    return out;
}

}  // namespace

Result<RestoreReport> restore_state_dir(const std::string& state_dir, const std::string& backup,
                                        double stop_wait_s) {
    const fs::path state = state_dir;
    std::error_code ec;
    if (!fs::is_directory(state, ec)) {
        return fail(ErrorCode::NotFound,
                    fmt::format("no state directory {}; give the daemon's with --state-dir",
                                state_dir));
    }
    // The daemon's own lock: held, a daemon runs here; taken, none can start until we are done.
    const std::string lock_path = (state / "daemon.lock").string();
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) {
        return fail(ErrorCode::Io, fmt::format("cannot open {}: {}", lock_path, errno_text(errno)));
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{lock_fd};
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        std::string holder;
        std::ifstream(lock_path) >> holder;
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the carma daemon{} is running on {}; stop it first "
                                "(`systemctl stop carma`), then restore",
                                holder.empty() ? "" : " (pid " + holder + ")", state_dir));
    }

    // Nothing is touched before the backup is known to be good.
    auto contents = store::read_backup(backup);
    if (!contents) {
        return tl::unexpected(contents.error());
    }
    RestoreReport report;
    report.database = (state / "carma.db").string();
    report.running = contents->running;
    const fs::path attempts = state / "attempts";
    RestoreInput input;
    input.backup_attempts = contents->attempts;
    input.backup_last_id = contents->last_id;
    input.on_disk = attempt_dirs(attempts);
    if (fs::exists(report.database, ec)) {
        if (auto last = store::last_task_id(report.database)) {
            input.current_last_id = *last;
        } else {
            report.warnings.push_back(fmt::format(
                "{}; task ids continue after those of the backup and of attempts/ only",
                last.error().message));
        }
    }
    const RestorePlan plan = plan_restore(input);
    report.newer = plan.newer;
    report.last_id = plan.last_id;

    // The new database is made complete beside the old one and renamed into place last: a
    // restore that fails half-way leaves the daemon a database, never none.
    const std::string incoming = report.database + ".restoring";
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::remove(incoming + suffix, ec);  // a restore that died before
    }
    auto made = store::Store::backup(backup, incoming);
    if (made) {
        made = store::raise_last_task_id(incoming, plan.last_id);
    }
    if (!made) {
        fs::remove(incoming, ec);
        return tl::unexpected(made.error());
    }

    report.stopped = stop_running(attempts, plan.newer, stop_wait_s, report.warnings);
    auto aside = make_aside_dir(state);
    if (!aside) {
        return tl::unexpected(aside.error());
    }
    report.aside = aside->string();
    for (const char* name : kDbFiles) {
        if (fs::exists(state / name, ec)) {
            if (auto r = move_path(state / name, *aside / name); !r) {
                return tl::unexpected(r.error());
            }
            report.moved.emplace_back(name);
        }
    }
    if (auto r = move_path(incoming, report.database); !r) {
        return tl::unexpected(r.error());
    }
    for (const AttemptDir& a : plan.newer) {
        const fs::path rel =
            fs::path("attempts") / std::to_string(a.task) / std::to_string(a.number);
        if (auto r = move_path(state / rel, *aside / rel); !r) {
            return tl::unexpected(r.error());
        }
        fs::remove(attempts / std::to_string(a.task), ec);  // only when now empty
    }
    return report;
}

}  // namespace carma::daemon
