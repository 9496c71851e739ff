#pragma once
// Private to src/exec/: what the files behind exec/launch.h (launch.cpp, attempt_files.cpp,
// attempt_control.cpp) and carma-shim share. Callers outside src/exec/ use exec/launch.h.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/result.h"
#include "core/text.h"
#include "exec/sys_fail.h"

namespace carma::exec {

inline std::string attempt_file(const std::string& dir, std::string_view name) {
    return dir + "/" + std::string(name);
}

// --- small files (attempt_files.cpp) ---------------------------------------------------------

std::optional<std::string> read_small_file(const std::string& path);
bool exists(const std::string& path);
std::optional<pid_t> parse_pid(std::string_view text);
std::optional<pid_t> read_pid_file(const std::string& path);

// --- the shim's process (attempt_control.cpp) ------------------------------------------------

std::string normalized_path(const std::string& path);
bool process_gone(pid_t pid);
bool is_our_shim(pid_t pid, const std::string& attempt_dir);

}  // namespace carma::exec
