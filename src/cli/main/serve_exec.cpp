// `carma serve` and `carma admin` in the `carma` program: they become carma-daemon, installed next
// to it. The daemon's libraries (cpp-httplib and what it pulls in, spdlog, SQLite) are linked into
// that program only, so every other command starts without loading them: each shared library
// costs a command about a millisecond to load (src/api/unix_http.h).

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

bool runs_in_daemon(const char* command) {
    const std::string c = command;
    return c == "serve" || c == "admin" || c == "agent" || c == "node-key";
}

Action add_daemon_stubs(CLI::App& app) {
    // Only for `carma --help` and typo suggestions: main() hands `carma serve ...` and
    // `carma admin ...` over before anything is parsed; their --help lists their options.
    app.add_subcommand("serve", "Run the CARMA daemon (`carma serve --help`)")->allow_extras();
    app.add_subcommand("admin", "Maintain a daemon's state directory (`carma admin --help`)")
        ->allow_extras();
    app.add_subcommand("agent", "Run on a node for a CARMA server (`carma agent --help`)")
        ->allow_extras();
    app.add_subcommand("node-key",
                       "Print one node's agent key from the server's token (`carma node-key --help`)")
        ->allow_extras();
    return [] { return 0; };
}

}  // namespace carma::cli
