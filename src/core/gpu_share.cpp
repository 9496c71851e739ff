#include "core/gpu_share.h"

#include <algorithm>
#include <cmath>
#include <charconv>

#include <fmt/format.h>

namespace carma {

namespace {

Result<int> share_error(std::string_view text, std::string_view why) {
    return fail(ErrorCode::InvalidArgument,
                fmt::format("GPU share '{}' {}; write a fraction of one GPU above 0 and below 1, "
                            "such as 0.5 or 0.25 (for whole GPUs use --gpus N)",
                            text, why));
}

Result<int> share_milli(double share, std::string_view text) {
    if (!std::isfinite(share)) {
        return share_error(text, "is not a number");
    }
    if (share <= 0 || share >= 1) {
        return share_error(text, share <= 0 ? "is not above 0" : "is not below 1");
    }
    const double milli = share * kMilliPerGpu;
    const double rounded = std::round(milli);
    if (std::abs(milli - rounded) > 1e-6 || rounded < 1) {
        return share_error(text, "is finer than a thousandth of a GPU");
    }
    return static_cast<int>(rounded);
}

}  // namespace

Result<int> gpu_share_milli(double share) {
    return share_milli(share, fmt::format("{}", share));
}

Result<int> parse_gpu_share(std::string_view text) {
    std::string_view number = text;
    double scale = 1;
    if (number.ends_with('%')) {
        number.remove_suffix(1);
        scale = 0.01;
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size()) {
        return share_error(text, "is not a number");
    }
    return share_milli(value * scale, text);
}

std::string format_gpu_share(int milli) {
    return fmt::format("{}", static_cast<double>(milli) / kMilliPerGpu);
}

int reserved_share_milli(const GpuView& gpu) {
    int sum = 0;
    for (const ResidentView& r : gpu.residents) {
        sum += r.gpu_milli;
    }
    return sum;
}

namespace {

bool holds_whole_task(const GpuView& gpu) {
    return std::any_of(gpu.residents.begin(), gpu.residents.end(),
                       [](const ResidentView& r) { return r.gpu_milli == 0; });
}

bool holds_share_task(const GpuView& gpu) {
    return std::any_of(gpu.residents.begin(), gpu.residents.end(),
                       [](const ResidentView& r) { return r.gpu_milli > 0; });
}

// Processes on it that no resident accounts for: another program's, which reserve the lot.
bool holds_others(const GpuView& gpu) {
    return gpu.foreign_mib > 0 || (gpu.has_processes && gpu.residents.empty());
}

}  // namespace

namespace {

enum class ShareConflict { None, WholeBesideShares, ShareBesideWhole, ShareBesideOthers, Full };

ShareConflict share_conflict(const TaskSpec& task, const GpuView& gpu) {
    if (task.gpus == 0) {
        return ShareConflict::None;
    }
    if (task.gpu_milli == 0) {
        return holds_share_task(gpu) ? ShareConflict::WholeBesideShares : ShareConflict::None;
    }
    if (holds_whole_task(gpu)) {
        return ShareConflict::ShareBesideWhole;
    }
    if (holds_others(gpu)) {
        return ShareConflict::ShareBesideOthers;
    }
    return reserved_share_milli(gpu) + task.gpu_milli > kMilliPerGpu ? ShareConflict::Full
                                                                        : ShareConflict::None;
}

}  // namespace

bool share_blocks(const TaskSpec& task, const GpuView& gpu) {
    return share_conflict(task, gpu) != ShareConflict::None;
}

std::optional<std::string> share_refusal(const TaskSpec& task, const GpuView& gpu) {
    switch (share_conflict(task, gpu)) {
        case ShareConflict::None: return std::nullopt;
        case ShareConflict::WholeBesideShares:
            return fmt::format("{} of it is reserved by --gpu-share tasks, which a whole-GPU task "
                               "cannot join",
                               format_gpu_share(reserved_share_milli(gpu)));
        case ShareConflict::ShareBesideWhole:
            return "a whole-GPU task runs there; a --gpu-share task shares only with other shares";
        case ShareConflict::ShareBesideOthers:
            return "processes CARMA did not start use it; a --gpu-share task needs its share free";
        case ShareConflict::Full:
            return fmt::format("{} of it is reserved by other shares; {} more would pass the whole "
                               "GPU",
                               format_gpu_share(reserved_share_milli(gpu)),
                               format_gpu_share(task.gpu_milli));
    }
    return std::nullopt;
}

bool shares_conflict(const TaskSpec& a, const TaskSpec& b, const GpuView& gpu) {
    if (a.gpus == 0 || b.gpus == 0) {
        return false;
    }
    if ((a.gpu_milli == 0) != (b.gpu_milli == 0)) {
        return true;
    }
    return a.gpu_milli > 0 &&
           reserved_share_milli(gpu) + a.gpu_milli + b.gpu_milli > kMilliPerGpu;
}

bool shared_by_shares(const TaskSpec& task, const GpuView& gpu) {
    return task.gpu_milli > 0 && !gpu.residents.empty() && !holds_whole_task(gpu) &&
           !holds_others(gpu);
}

int mps_thread_percentage(int milli) {
    return std::clamp((milli + 9) / 10, 1, 100);
}

Result<int> parse_active_thread_percentage(std::string_view text) {
    double percent = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), percent);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(percent) ||
        percent <= 0 || percent > 100) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}='{}' is not a percentage above 0 and at most 100 (the share "
                                "of the SMs an MPS client may use, such as 50)",
                                kMpsThreadPercentageEnv, text));
    }
    return std::max(1, static_cast<int>(std::lround(percent * 10)));
}

}  // namespace carma
