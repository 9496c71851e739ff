#pragma once
// `carma report [--socket S] [--since T] [--until T] DIR`: the HTML report of the daemon's own
// history (sim/report.h, the page `carma simulate --report` writes), from one GET /v1/timeline.

#include "cli/commands.h"

namespace carma::cli {

Action add_report_command(CLI::App& app);

}  // namespace carma::cli
