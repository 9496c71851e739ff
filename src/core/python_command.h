#pragma once
// The script a `python train.py ...` command runs. A missing script is the commonest reason a
// task fails at once (`can't open file ...`, exit code 2), so submit checks it before queueing,
// and the task is named after it ("train"), not after the interpreter ("python3"). Pure.

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace carma {

// Whether `program` (a path or a name) is a Python interpreter: python, python3, python3.11, ...
bool is_python_interpreter(std::string_view program);

// The script `argv` runs, as Python reads its command line: the first argument after the
// interpreter's own options (-u, -O, -W arg, -X arg, ...). Nothing when argv is not a Python
// interpreter's, or when it runs no file: -m MODULE, -c CODE, '-' (stdin), or no argument.
std::optional<std::string> python_script(std::span<const std::string> argv);

// "train" for "/home/alice/exp/train.py": the name a task gets when it is given none.
std::string script_stem(std::string_view script);

}  // namespace carma
