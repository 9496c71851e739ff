#pragma once
// A task's dependencies as JSON, [{"type": "afterok", "task": "12_3"}]: the shape of
// tasks.spec_json and of the API's task object alike. Rows written before dependencies had
// types hold "after": [ids], each an afterok on that task.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dependency.h"

namespace carma::store {

inline nlohmann::json dependencies_to_json(const std::vector<Dependency>& dependencies) {
    nlohmann::json out = nlohmann::json::array();
    for (const Dependency& d : dependencies) {
        if (d.type == DependencyType::Singleton) {
            out.push_back({{"type", std::string(to_string(d.type))}});
            continue;
        }
        out.push_back({{"type", std::string(to_string(d.type))}, {"task", format_task_ref(d.on)}});
    }
    return out;
}

// One element as dependencies_to_json writes it; nullopt when it is not one.
inline std::optional<Dependency> dependency_from_json(const nlohmann::json& j) {
    if (j.is_object() && j.size() == 1 && j.value("type", "") == "singleton") {
        return Dependency{DependencyType::Singleton, TaskRef{}};
    }
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("task") ||
        !j["task"].is_string()) {
        return std::nullopt;
    }
    const auto type = parse_dependency_type(j["type"].get<std::string>());
    auto ref = parse_task_ref(j["task"].get<std::string>());
    if (!type || !ref) {
        return std::nullopt;
    }
    return Dependency{*type, *ref};
}

}  // namespace carma::store
