#pragma once
// The data files compiled into the binary (data/traces/*.csv, data/workloads.csv), by the name
// users type: "t1", "t2", "mix-90", "heavy-60", "workloads"; and the measured pairs of
// data/calibration/ ("calibration/lucid-pairs", "calibration/lucid-bins") for model/world.h.

#include <optional>
#include <string_view>
#include <vector>

namespace carma::data {

struct EmbeddedFile {
    std::string_view name;
    std::string_view content;
};

const std::vector<EmbeddedFile>& embedded_files();

inline std::optional<std::string_view> embedded(std::string_view name) {
    for (const EmbeddedFile& f : embedded_files()) {
        if (f.name == name) {
            return f.content;
        }
    }
    return std::nullopt;
}

}  // namespace carma::data
