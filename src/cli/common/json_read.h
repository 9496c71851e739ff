#pragma once
// Reading the daemon's JSON answers without trusting their shape: a newer daemon may add or drop
// fields, so a missing or odd field reads as absent ("-" in a table) instead of aborting.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace carma::cli {

// The field's value; null when `object` is not an object or the field is absent or null.
const nlohmann::json* member(const nlohmann::json& object, const char* key);
// A string as is, a boolean as yes/no, anything else as JSON; `fallback` when absent.
std::string text_of(const nlohmann::json& object, const char* key,
                    const std::string& fallback = "-");
std::optional<double> number_of(const nlohmann::json& object, const char* key);
std::optional<std::int64_t> integer_of(const nlohmann::json& object, const char* key);
bool flag_of(const nlohmann::json& object, const char* key);  // true only for true
const nlohmann::json& array_of(const nlohmann::json& object, const char* key);   // else []
const nlohmann::json& object_of(const nlohmann::json& object, const char* key);  // else {}

}  // namespace carma::cli
