#pragma once
// `carma nodes`: the nodes whose agents report to the daemon (GET /v1/nodes), and giving up a
// node whose agent has gone silent (POST /v1/nodes/lost; root or the daemon's user).
//
//   carma nodes [--json] [--socket S]
//   carma nodes lost NAME [--socket S]

#include "cli/commands.h"

namespace carma::cli {

Action add_nodes_command(CLI::App& app);

}  // namespace carma::cli
