#pragma once
// `carma top`'s screen as a pure function: an answer of GET /v1/view, the terminal's size, the
// colour choice and the time go in, the screen's lines come out (no I/O), so every bar, cut and
// missing field is testable. The terminal loop is cli/commands/top_command.cpp; the styled lines
// and sections it is built of are cli/views/screen_text.h.
//
// The screen, top to bottom:
//   a header: policy, backend, the daemon's clock, how many tasks run, wait and are held, and
//     the last poll's error when the daemon did not answer
//   one block per GPU: index, name, health, the risk verdict and its rule, the warm-up lock, the
//     metric sources; a memory bar with one fill character (and colour) per task, the tasks
//     listed under it with owner and MiB; SMACT, SMOCC and DRAMA as bars with the risk filter's
//     threshold marked '|'
//   the running tasks, then the queue in scheduling order
// Each section is cut to its share of the height with a "… N more" line; every line is cut to the
// width. Text from the daemon is shown with control characters replaced by '?', so a task name
// cannot move the cursor or recolour the terminal of whoever watches.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace carma::cli {

struct TopScreen {
    std::size_t width = 80;
    std::size_t height = 24;   // lines; the frame never has more
    bool colour = false;       // ANSI colours (SGR escapes, which take no columns)
    double now = 0;            // the client's clock, unix seconds: the age of a stale view
    std::string status;        // ends the header, dimmed: "every 1s, q quits"
    // The last poll's failure; shown under the header, above the last view that came (if any).
    std::string error;
};

// The frame for `view` (an answer of GET /v1/view, or null before the first one): at most
// `screen.height` lines, each taking at most `screen.width` columns, without trailing newlines.
std::vector<std::string> top_lines(const nlohmann::json& view, const TopScreen& screen);

// The columns `line` takes on a terminal: SGR escapes none, East Asian wide characters two,
// anything else (an invalid byte too) one.
std::size_t screen_columns(std::string_view line);

}  // namespace carma::cli
