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

std::string GpuSet::text() const {
    return nodes > 0 ? fmt::format("{}x{}x{}", nodes, per_node(), type.name)
                     : fmt::format("{}x{}", count, type.name);
}

std::string GpuSet::node_of(int gpu) const {
    return nodes > 0 ? fmt::format("n{}", gpu / per_node() + 1) : std::string();
}

namespace {

constexpr int kMaxGpus = 1024;

// `text` as a whole number 1..kMaxGpus; 0 when it is not one.
int count_of(std::string_view text) {
    int value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool ok = ec == std::errc() && ptr == text.data() + text.size() && value >= 1 &&
                    value <= kMaxGpus;
    return ok ? value : 0;
}

}  // namespace

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
                    fmt::format("GPUs '{}' must look like 4xA100-40GB (count x type) or "
                                "16x4xA100-40GB (nodes x GPUs per node x type); types: {}",
                                text, known()));
    }
    const std::string_view after = text.substr(x + 1);
    // Digits then an 'x' after the first 'x': "16x4xA100-40GB", nodes first. Type names do not
    // start with a digit, so "4xA100-40GB" never reads as one.
    std::size_t digits = 0;
    while (digits < after.size() && std::isdigit(static_cast<unsigned char>(after[digits])) != 0) {
        ++digits;
    }
    const bool per_node = digits > 0 && digits < after.size() &&
                          (after[digits] == 'x' || after[digits] == 'X');
    const int first = count_of(text.substr(0, x));
    if (first == 0) {
        return fail(ErrorCode::InvalidArgument,
                    per_node ? fmt::format("GPUs '{}': the node count before the first 'x' must "
                                           "be 1..{}",
                                           text, kMaxGpus)
                             : fmt::format("GPUs '{}': the count before 'x' must be 1..{}", text,
                                           kMaxGpus));
    }
    GpuSet set;
    set.count = first;
    std::string_view name = after;
    if (per_node) {
        const int each = count_of(after.substr(0, digits));
        if (each == 0) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("GPUs '{}': the GPUs per node, between the two 'x', must be "
                                    "1..{}",
                                    text, kMaxGpus));
        }
        if (first * each > kMaxGpus) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("GPUs '{}': {} nodes x {} GPUs is {} GPUs; at most {} in all",
                                    text, first, each, first * each, kMaxGpus));
        }
        set.nodes = first;
        set.count = first * each;
        name = after.substr(digits + 1);
    }
    for (const GpuType& t : known_gpu_types()) {
        if (t.name.size() == name.size()) {
            bool same = true;
            for (std::size_t i = 0; i < name.size(); ++i) {
                same = same && std::toupper(static_cast<unsigned char>(name[i])) ==
                                   std::toupper(static_cast<unsigned char>(t.name[i]));
            }
            if (same) {
                set.type = t;
                return set;
            }
        }
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("GPUs '{}': unknown GPU type '{}'; known: {}", text, name, known()));
}

}  // namespace carma::model
