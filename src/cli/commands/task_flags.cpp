#include "cli/commands/task_flags.h"

#include <string_view>

#include <fmt/format.h>

#include "core/host.h"
#include "core/text.h"

namespace carma::cli {

Result<MiB> parse_mem_flag(const std::string& text, std::string_view flag) {
    // A bare number on the command line is a guess at the unit (12 = 12 MiB, nothing a training
    // task needs); the paper writes GB for 1,000 MiB, so units are spelled out.
    const std::string_view m = trim(text);
    if (!m.empty() && m.find_first_not_of("0123456789.") == std::string_view::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} {}: give a unit: {}GiB, {}MiB, or {}GB (= {} x 1,000 MiB, "
                                "as the CARMA paper writes)",
                                flag, text, m, m, m, m));
    }
    auto mib = parse_memory(text);
    if (!mib) {
        return fail(mib.error().code, fmt::format("{}: {}", flag, mib.error().message));
    }
    return *mib;
}

Result<int> check_gpus_flag(int gpus) {
    if (gpus < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gpus must be 0 (a CPU-only task) or more (got {})", gpus));
    }
    return gpus;
}

Result<int> check_cpus_flag(int cpus) {
    if (cpus < 1 || cpus > kMaxCpusPerTask) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--cpus-per-task must be a number of cores from 1 to {} (got {})",
                                kMaxCpusPerTask, cpus));
    }
    return cpus;
}

}  // namespace carma::cli
