#pragma once
// `carma top [--socket S] [--interval SECONDS] [--once]`: the daemon's live view (GET /v1/view,
// docs/api.md) full-screen in a terminal, redrawn every interval until q. The screen itself is
// cli/top_view (pure); this is the terminal around it.

#include "cli/commands.h"

namespace carma::cli {

Action add_top_command(CLI::App& app);

}  // namespace carma::cli
