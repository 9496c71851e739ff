#pragma once
// sbatch's batch scripts as `carma submit SCRIPT` reads them (issue 45): which file is one, the
// interpreter that runs it, and its leading `#SBATCH` lines, split into the words that
// submit_command.cpp hands to the same option parser as the command line. Pure: the caller reads
// the file.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma::cli {

// One `#SBATCH` line: its line number (from 1) and its words ("--time=1:00:00", "-J", "x"), a
// trailing `# comment` left out.
struct ScriptDirective {
    int line = 0;
    std::vector<std::string> words;
};

struct BatchScript {
    // The argv before the script's path: the #! line's interpreter and its one argument, as the
    // kernel reads it; `bash` when the script has none.
    std::vector<std::string> interpreter;
    bool has_shebang = false;
    std::vector<ScriptDirective> directives;
};

// As sbatch: directives are the `#SBATCH` lines before the first line that is neither blank nor
// a comment; later ones are plain comments. `source` names the script in errors.
Result<BatchScript> read_batch_script(std::string_view text, std::string_view source);

// Whether `carma submit FILE` submits FILE as a batch script rather than runs it as a command:
// it has `#SBATCH` lines, or it cannot run by itself (no run bit) but reads as a script (a #!
// line, or a shell script's name). An executable without directives stays a command (the same
// run either way).
bool is_batch_script(std::string_view file_name, const BatchScript& script, bool executable);

// The option named by a directive's first word, as typed without its value: "--partition" for
// "--partition=gpu", "-p" for "-pgpu" or "-p".
std::string directive_option(std::string_view word);

}  // namespace carma::cli
