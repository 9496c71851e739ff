#pragma once
// sbatch's --output/--error file names: "train-%j.out", "sweep-%A_%a.log". The codes CARMA fills
// are %j (the task's id), %A (its array's id; its own id outside an array), %a (its index in the
// array; 0 outside one), %x (its name), %u (its owner) and %% (a '%'); a number between '%' and
// the letter pads with zeros ("%4a" -> 0007), as sbatch does. Pure.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/task_id.h"

namespace carma {

// What the codes stand for in one task.
struct OutputNames {
    TaskId id = 0;
    std::optional<ArrayMember> array;
    std::string name;
    std::string user;
};

// Refuses an empty pattern, an unknown code, a '%' at the end and a NUL, naming the problem.
// `option` names the option in the message ("--output").
Result<void> check_output_pattern(std::string_view pattern, std::string_view option);
// The pattern with its codes filled; call check_output_pattern first.
std::string expand_output_pattern(std::string_view pattern, const OutputNames& names);

// Where an attempt's stdout and stderr are also written: the patterns filled and made absolute
// against the workdir; "" = not copied. With only --output, stderr goes there too, as sbatch
// does; with only --error, only stderr is copied.
struct OutputFiles {
    std::string stdout_path;
    std::string stderr_path;
};
OutputFiles output_files(std::string_view output, std::string_view error,
                         const OutputNames& names, std::string_view workdir);

// The directory each copy goes into, checked at submit (a missing one would fail the task only
// at launch, after its wait): the pattern's directory part (before its last '/'; the workdir
// when it has none) filled with the name and user and made absolute against the workdir. A
// directory part with %j, %A or %a, known only once the task is stored, is left out; so is a
// second pattern with the same directory.
struct OutputDirectory {
    std::string option;   // "--output" or "--error"
    std::string pattern;  // as given
    std::string dir;
};
std::vector<OutputDirectory> output_directories(std::string_view output, std::string_view error,
                                                std::string_view name, std::string_view user,
                                                std::string_view workdir);

}  // namespace carma
