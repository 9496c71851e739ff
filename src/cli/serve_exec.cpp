// `carma serve` in the `carma` program: it becomes carma-daemon, installed next to it. The
// daemon's libraries are linked into that program only, so every other command starts without
// loading them (src/api/unix_http.h says what they cost).

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "exec/self.h"

namespace carma::cli {

int exec_daemon(char** argv) {
    auto self = exec::this_executable();
    if (!self) {
        fmt::print(stderr, "carma: cannot find carma-daemon: {}\n", self.error().message);
        return 1;
    }
    const std::string daemon = (self->parent_path() / "carma-daemon").string();
    // Same pid and arguments: supervisors, scripts and `pkill -f 'carma serve'` see no difference.
    ::execv(daemon.c_str(), argv);
    fmt::print(stderr,
               "carma: cannot run {}: {}; carma-daemon is installed next to carma (`cmake "
               "--install`, or build the target carma-daemon)\n",
               daemon, std::strerror(errno));
    return 1;
}

Action add_serve_stub(CLI::App& app) {
    // Only for `carma --help` and typo suggestions: main() hands `carma serve ...` over before
    // anything is parsed, and `carma serve --help` lists the daemon's options.
    CLI::App* cmd = app.add_subcommand("serve", "Run the CARMA daemon (`carma serve --help`)");
    cmd->allow_extras();
    return [] { return 0; };
}

}  // namespace carma::cli
