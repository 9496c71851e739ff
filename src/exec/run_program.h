#pragma once
// Runs an external program (sbatch, squeue, scontrol, nvidia-cuda-mps-control) without a shell,
// bounded in time, and returns how it ended and what it printed.
//
// Its output goes to memory files, not pipes: a program that forks a daemon (`mps-control -d`)
// leaves the daemon holding its descriptors, and a pipe would then never see EOF. It runs in its
// own process group with no signal blocked or ignored (the caller may block signals for a
// signalfd), and a timeout kills the whole group.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace carma::exec {

struct ProgramOptions {
    std::string input;      // written to its stdin, which is then closed; a few KiB at most
    double timeout_s = 60;  // then it and its process group are killed
    // Its environment ("NAME=value"); unset: this process's.
    std::optional<std::vector<std::string>> env;
    bool stderr_to_stdout = false;  // one stream, in the order written (`2>&1`)
};

struct ProgramRun {
    // The errno of a start that failed (ENOENT: no such program); then nothing ran.
    int start_error = 0;
    bool timed_out = false;  // killed after timeout_s
    int status = 0;          // waitpid's
    std::string out;
    std::string err;  // empty with stderr_to_stdout

    bool started() const { return start_error == 0; }
    // Started, finished in time and exited with status 0.
    bool succeeded() const;
    // "exited with status 2", "was killed by signal 9 (Killed)", "did not start: No such file
    // or directory", "did not finish within 60 s and was killed".
    std::string how_it_ended(double timeout_s) const;
};

// argv[0] is looked up on PATH unless it holds a '/'. The error is for what this process could
// not do (a pipe, a memory file, waiting); a program that cannot start is a ProgramRun with
// start_error.
Result<ProgramRun> run_program(const std::vector<std::string>& argv,
                               const ProgramOptions& options = {});

// The command as a shell would need it typed, for messages: squeue -h -o '%i'.
std::string command_text(const std::vector<std::string>& argv);

}  // namespace carma::exec
