// carma admin: maintenance of a daemon's state directory, run next to it (not through the API).
//
//   carma admin backup FILE [--state-dir D]   a consistent copy of the database, safe while the
//                                             daemon runs (SQLite's online backup)

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
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
    fmt::print("backed up {} to {}; to restore, stop the daemon and copy it over {} (moving "
               "{}-wal and {}-shm aside)\n",
               db, f.file, db, db, db);
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
    return [backup, f] {
        if (backup->parsed()) {
            return run_backup(*f);
        }
        return 2;
    };
}

}  // namespace carma::cli
