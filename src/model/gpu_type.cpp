#include "model/gpu_type.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "model/constants.h"

namespace carma::model {

const std::vector<GpuType>& known_gpu_types() {
    // Power limits of the SXM parts; usable memory = CUDA-visible total. Only the A100-40GB is
    // calibrated (the paper's testbed); the others scale memory and power limits only.
    static const std::vector<GpuType> types = {
        {"A100-40GB", kA100_40GB_UsableMiB, kA100IdlePowerW, kA100MaxPowerW},
        {"A100-80GB", 81050, kA100IdlePowerW, 400.0},
        {"H100-80GB", 81080, 70.0, 700.0},
        {"H200-141GB", 143140, 75.0, 700.0},
    };
    return types;
}

std::string GpuSet::text() const { return fmt::format("{}x{}", count, type.name); }

Result<GpuSet> parse_gpu_set(std::string_view text) {
    auto known = [] {
        std::string names;
        for (const GpuType& t : known_gpu_types()) {
            names += (names.empty() ? "" : ", ") + t.name;
        }
        return names;
    };
    const std::size_t x = text.find_first_of("xX");
    if (x == std::string_view::npos || x == 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("GPUs '{}' must look like 4xA100-40GB (count x type; types: {})",
                                text, known()));
    }
    int count = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + x, count);
    if (ec != std::errc() || ptr != text.data() + x || count < 1 || count > 1024) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("GPUs '{}': the count before 'x' must be 1..1024", text));
    }
    std::string_view name = text.substr(x + 1);
    for (const GpuType& t : known_gpu_types()) {
        if (t.name.size() == name.size()) {
            bool same = true;
            for (std::size_t i = 0; i < name.size(); ++i) {
                same = same && std::toupper(static_cast<unsigned char>(name[i])) ==
                                   std::toupper(static_cast<unsigned char>(t.name[i]));
            }
            if (same) {
                return GpuSet{count, t};
            }
        }
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("GPUs '{}': unknown GPU type '{}'; known: {}", text, name, known()));
}

}  // namespace carma::model
