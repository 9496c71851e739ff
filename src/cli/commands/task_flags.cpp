#include "cli/commands/task_flags.h"

#include <string_view>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::cli {

Result<MiB> parse_mem_flag(const std::string& text) {
    // A bare number on the command line is a guess at the unit (12 = 12 MiB, nothing a training
    // task needs); the paper writes GB for 1,000 MiB, so units are spelled out.
    const std::string_view m = trim(text);
    if (!m.empty() && m.find_first_not_of("0123456789.") == std::string_view::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--mem {}: give a unit: {}GiB, {}MiB, or {}GB (= {} x 1,000 MiB, "
                                "as the CARMA paper writes)",
                                text, m, m, m, m));
    }
    auto mib = parse_memory(text);
    if (!mib) {
        return fail(mib.error().code, "--mem: " + mib.error().message);
    }
    return *mib;
}

Result<int> check_gpus_flag(int gpus) {
    if (gpus < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gpus must be at least 1 (got {}); every task gets whole GPUs",
                                gpus));
    }
    return gpus;
}

}  // namespace carma::cli
