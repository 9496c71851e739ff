#include "core/oom_report.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

namespace carma {

namespace {

struct Unit {
    std::string_view name;
    double mib;
};

constexpr std::array<Unit, 5> kUnits = {{
    {"bytes", 1.0 / (1024.0 * 1024.0)},
    {"KiB", 1.0 / 1024.0},
    {"MiB", 1.0},
    {"GiB", 1024.0},
    {"TiB", 1024.0 * 1024.0},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "39.00 GiB" at the start of `text`: the size in MiB (rounded up) and the characters it took.
std::optional<std::pair<MiB, std::size_t>> size_at(std::string_view text) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value,
                                           std::chars_format::fixed);
    if (ec != std::errc() || !std::isfinite(value) || value < 0) {
        return std::nullopt;
    }
    std::size_t used = static_cast<std::size_t>(end - text.data());
    if (used >= text.size() || text[used] != ' ') {
        return std::nullopt;
    }
    ++used;
    for (const Unit& unit : kUnits) {
        if (text.substr(used).starts_with(unit.name)) {
            const double mib = std::min(std::ceil(value * unit.mib - 1e-9),
                                        static_cast<double>(kMaxMemoryMib));
            return std::pair{static_cast<MiB>(mib), used + unit.name.size()};
        }
    }
    return std::nullopt;
}

// The number at the start of `text` ("0" of "0 has a total ..."), if it is one.
std::optional<int> ordinal_at(std::string_view text) {
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || value < 0 || value > 1023) {
        return std::nullopt;
    }
    return value;
}

void keep_most(std::map<int, MiB>& out, int ordinal, MiB mib) {
    auto [it, added] = out.emplace(ordinal, mib);
    if (!added) {
        it->second = std::max(it->second, mib);
    }
}

// 2.1 and later: "GPU 0 has a total capacity of ... this process has 39.00 GiB memory in use".
void read_current_form(std::string_view text, std::map<int, MiB>& out) {
    constexpr std::string_view kHeld = "this process has ";
    constexpr std::string_view kGpu = "GPU ";
    constexpr std::string_view kTotal = " has a total capac";  // "capacity", and 2.1's "capacty"
    // The "GPU N" of one message stands within a few hundred characters before its figure.
    constexpr std::size_t kMessageReach = 1000;
    for (std::size_t at = text.find(kHeld); at != std::string_view::npos;
         at = text.find(kHeld, at + 1)) {
        const auto size = size_at(text.substr(at + kHeld.size()));
        if (!size || !text.substr(at + kHeld.size() + size->second).starts_with(" memory in use")) {
            continue;
        }
        int ordinal = kUnknownOrdinal;
        const std::size_t from = at > kMessageReach ? at - kMessageReach : 0;
        const std::string_view before = text.substr(from, at - from);
        for (std::size_t g = before.rfind(kGpu); g != std::string_view::npos;
             g = g == 0 ? std::string_view::npos : before.rfind(kGpu, g - 1)) {
            const std::string_view rest = before.substr(g + kGpu.size());
            const auto n = ordinal_at(rest);
            const std::size_t digits =
                static_cast<std::size_t>(std::find_if_not(rest.begin(), rest.end(), is_digit) -
                                         rest.begin());
            if (n && rest.substr(digits).starts_with(kTotal)) {
                ordinal = *n;
                break;
            }
        }
        keep_most(out, ordinal, size->first);
    }
}

// Before 2.1: "(GPU 0; 6.00 GiB total capacity; ...; 1.24 GiB reserved in total by PyTorch)".
void read_old_form(std::string_view text, std::map<int, MiB>& out) {
    constexpr std::string_view kOpen = "(GPU ";
    constexpr std::string_view kReserved = " reserved in total by PyTorch";
    for (std::size_t at = text.find(kOpen); at != std::string_view::npos;
         at = text.find(kOpen, at + 1)) {
        std::string_view rest = text.substr(at + kOpen.size());
        const auto ordinal = ordinal_at(rest);
        const std::size_t close = rest.find(')');
        if (!ordinal || close == std::string_view::npos) {
            continue;
        }
        rest = rest.substr(0, close);
        // Its fields, "; "-separated after the ordinal.
        for (std::size_t field = rest.find("; "); field != std::string_view::npos;
             field = rest.find("; ", field + 1)) {
            const std::string_view value = rest.substr(field + 2);
            const auto size = size_at(value);
            if (size && value.substr(size->second).starts_with(kReserved)) {
                keep_most(out, *ordinal, size->first);
            }
        }
    }
}

}  // namespace

std::map<int, MiB> reported_oom_usage(std::string_view stderr_tail) {
    std::map<int, MiB> out;
    read_current_form(stderr_tail, out);
    read_old_form(stderr_tail, out);
    return out;
}

std::map<int, MiB> raise_by_reported(std::map<int, MiB> peak_per_gpu, std::span<const int> gpus,
                                     const std::map<int, MiB>& reported) {
    for (const auto& [ordinal, mib] : reported) {
        std::optional<int> gpu;
        if (ordinal == kUnknownOrdinal && gpus.size() == 1) {
            gpu = gpus[0];
        } else if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < gpus.size()) {
            gpu = gpus[static_cast<std::size_t>(ordinal)];
        }
        if (gpu) {
            keep_most(peak_per_gpu, *gpu, mib);
        }
    }
    return peak_per_gpu;
}

}  // namespace carma
