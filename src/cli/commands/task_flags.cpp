#include "cli/commands/task_flags.h"

#include <optional>
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

Result<int> parse_gres_flag(std::string_view text, std::vector<std::string>& notes) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--gres {}: {}; write gpu:N (e.g. --gres=gpu:2), or CARMA's -g N",
                                text, why));
    };
    std::optional<int> gpus;
    for (const std::string& item : split_list(text, ',')) {
        const std::vector<std::string> parts = split_list(trim(item), ':');
        if (parts.empty() || parts.front().empty()) {
            return bad("has an empty resource");
        }
        if (parts.front() != "gpu") {
            notes.push_back(fmt::format("--gres {}: CARMA schedules GPUs, cores and memory only; "
                                        "left out",
                                        item));
            continue;
        }
        if (parts.size() > 3) {
            return bad(fmt::format("'{}' is not gpu[:TYPE][:N]", item));
        }
        int n = 1;
        const std::string& last = parts.back();
        const bool counted = parts.size() > 1 && !last.empty() &&
                             last.find_first_not_of("0123456789") == std::string::npos;
        if (counted) {
            if (last.size() > 4) {
                return bad(fmt::format("'{}' asks for too many GPUs", item));
            }
            n = std::stoi(last);
        } else if (parts.size() == 3) {
            return bad(fmt::format("'{}' has the count '{}', which is not a whole number", item,
                                   last));
        }
        if (parts.size() == 3 || (parts.size() == 2 && !counted)) {
            notes.push_back(fmt::format("--gres {}: the GPU type '{}' is not used; CARMA chooses "
                                        "among the server's GPUs itself (`carma gpus`)",
                                        item, parts[1]));
        }
        gpus = gpus.value_or(0) + n;
    }
    if (!gpus) {
        return bad("asks for no GPU");
    }
    return check_gpus_flag(*gpus);
}

}  // namespace carma::cli
