#include "device/proc_names.h"

#include <fstream>
#include <string>

#include <fmt/format.h>

namespace carma::device {

namespace {

constexpr std::string_view kMpsServer = "nvidia-cuda-mps-server";
constexpr std::string_view kMpsCommPrefix = "nvidia-cuda-mps";

// The text up to the first NUL or newline of /proc/PID/NAME; empty when it cannot be read.
std::string read_first_field(int pid, const char* name) {
    std::ifstream in(fmt::format("/proc/{}/{}", pid, name), std::ios::binary);
    std::string field;
    if (!in || !std::getline(in, field, '\0')) {
        return {};
    }
    if (const auto newline = field.find('\n'); newline != std::string::npos) {
        field.resize(newline);  // comm ends with one
    }
    return field;
}

}  // namespace

bool is_mps_server_name(std::string_view argv0, std::string_view comm) {
    const auto slash = argv0.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
    return base == kMpsServer || comm.starts_with(kMpsCommPrefix);
}

bool is_mps_server_process(int pid) {
    if (pid <= 0) {
        return false;
    }
    return is_mps_server_name(read_first_field(pid, "cmdline"), read_first_field(pid, "comm"));
}

}  // namespace carma::device
