#pragma once
// An attempt's per-GPU peak as JSON, {"0": 13236, "1": 13180}: GPU index -> the most its
// processes held there. The shape of attempts.peak_mib_json, history.peak_json and the API's
// attempts alike.

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/units.h"

namespace carma::store {

inline nlohmann::json peak_to_json(const std::map<int, MiB>& peak) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [gpu, mib] : peak) {
        j[std::to_string(gpu)] = mib;
    }
    return j;
}

}  // namespace carma::store
