#include "cli/common/json_read.h"

namespace carma::cli {

using nlohmann::json;

const json* member(const json& object, const char* key) {
    if (!object.is_object()) {
        return nullptr;
    }
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string text_of(const json& object, const char* key, const std::string& fallback) {
    const json* v = member(object, key);
    if (v == nullptr) {
        return fallback;
    }
    if (v->is_string()) {
        return v->get<std::string>();
    }
    if (v->is_boolean()) {
        return v->get<bool>() ? "yes" : "no";
    }
    return v->dump();
}

std::optional<double> number_of(const json& object, const char* key) {
    const json* v = member(object, key);
    return v != nullptr && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

std::optional<std::int64_t> integer_of(const json& object, const char* key) {
    const json* v = member(object, key);
    return v != nullptr && v->is_number_integer() ? std::optional(v->get<std::int64_t>())
                                                  : std::nullopt;
}

bool flag_of(const json& object, const char* key) {
    const json* v = member(object, key);
    return v != nullptr && v->is_boolean() && v->get<bool>();
}

const json& array_of(const json& object, const char* key) {
    static const json kEmpty = json::array();
    const json* v = member(object, key);
    return v != nullptr && v->is_array() ? *v : kEmpty;
}

const json& object_of(const json& object, const char* key) {
    static const json kEmpty = json::object();
    const json* v = member(object, key);
    return v != nullptr && v->is_object() ? *v : kEmpty;
}

}  // namespace carma::cli
