// carma admin: maintenance of a daemon's state directory, run next to it (not through the API).
//
//   carma admin backup FILE [--state-dir D]   a consistent copy of the database, safe while the
//                                             daemon runs (SQLite's online backup)
//   carma admin restore FILE [--state-dir D]  puts such a copy back, the daemon stopped
//                                             (daemon/admin_restore.h)

#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "daemon/admin_restore.h"
#include "daemon/config.h"
#include "store/store.h"

namespace carma::cli {

namespace {

struct AdminFlags {
    std::string state_dir;
    std::string file;
};

int run_backup(const AdminFlags& f) {
    const std::string dir = f.state_dir.empty() ? daemon::default_state_dir() : f.state_dir;
    const std::string db = dir + "/carma.db";
    if (auto r = store::Store::backup(db, f.file); !r) {
        throw std::runtime_error(r.error().message);
    }
    fmt::print("backed up {} to {}; to restore it, stop the daemon and run `carma admin restore "
               "{}{}`\n",
               db, f.file, f.state_dir.empty() ? "" : "--state-dir " + f.state_dir + " ", f.file);
    return 0;
}

std::string attempt_list(const std::vector<AttemptDir>& attempts) {
    std::string out;
    for (const AttemptDir& a : attempts) {
        out += fmt::format("{}{}/{}", out.empty() ? "" : ", ", a.task, a.number);
    }
    return out;
}

int run_restore(const AdminFlags& f) {
    const std::string dir = f.state_dir.empty() ? daemon::default_state_dir() : f.state_dir;
    auto r = daemon::restore_state_dir(dir, f.file);
    if (!r) {
        throw std::runtime_error(r.error().message);
    }
    fmt::print("restored {} into {}: {} task(s) running in it are re-attached when the daemon "
               "starts\n",
               f.file, r->database, r->running);
    if (!r->moved.empty()) {
        fmt::print("moved the replaced {} to {}\n", fmt::join(r->moved, ", "), r->aside);
    }
    if (!r->newer.empty()) {
        fmt::print("attempts that ran after the backup, kept in {}/attempts as records (task/"
                   "attempt): {}\n",
                   r->aside, attempt_list(r->newer));
    }
    if (!r->stopped.empty()) {
        fmt::print("of those, stopped because the backup does not know them: {}\n",
                   attempt_list(r->stopped));
    }
    for (const std::string& w : r->warnings) {
        fmt::print(stderr, "carma: warning: {}\n", w);
    }
    fmt::print("task ids continue after {}; start the daemon (`systemctl start carma`)\n",
               r->last_id);
    return 0;
}

}  // namespace

Action add_admin_command(CLI::App& app) {
    auto f = std::make_shared<AdminFlags>();
    CLI::App* admin = app.add_subcommand("admin", "Maintain a daemon's state directory");
    admin->require_subcommand(1);
    CLI::App* backup =
        admin->add_subcommand("backup", "Copy the database consistently, even while the daemon runs");
    backup->add_option("FILE", f->file, "The new file to write (never overwritten)")->required();
    backup->add_option("--state-dir", f->state_dir,
                       "State directory (default /var/lib/carma as root, else "
                       "$XDG_STATE_HOME/carma)");
    CLI::App* restore = admin->add_subcommand(
        "restore", "Put a backup in place of the database, the daemon stopped");
    restore->add_option("FILE", f->file, "A backup made by `carma admin backup`")->required();
    restore->add_option("--state-dir", f->state_dir,
                        "State directory (default /var/lib/carma as root, else "
                        "$XDG_STATE_HOME/carma)");
    return [backup, restore, f] {
        if (backup->parsed()) {
            return run_backup(*f);
        }
        if (restore->parsed()) {
            return run_restore(*f);
        }
        return 2;
    };
}

}  // namespace carma::cli
