#include "core/node_name.h"

#include <algorithm>

namespace carma {

bool valid_node_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxNodeNameLength || name == "." || name == "..") {
        return false;
    }
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
    });
}

}  // namespace carma
