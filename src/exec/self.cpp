#include "exec/self.h"

#include <fmt/format.h>

namespace carma::exec {

Result<std::filesystem::path> this_executable() {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot find the running executable (/proc/self/exe: {})",
                                ec.message()));
    }
    return exe;
}

}  // namespace carma::exec
