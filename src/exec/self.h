#pragma once
// Where the running carma executable lives: carma-shim and carma-fakejob are installed next to it.

#include <filesystem>

#include "core/result.h"

namespace carma::exec {

// The absolute path of the running executable (/proc/self/exe); the error says why not.
Result<std::filesystem::path> this_executable();

}  // namespace carma::exec
