#pragma once
// Small text helpers shared by the parsers of names (policies, estimators, units).

#include <cctype>
#include <string>
#include <string_view>

namespace carma {

// ASCII lower case; names CARMA accepts are ASCII.
inline std::string to_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

// Without leading and trailing white space.
inline std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
        s.remove_suffix(1);
    }
    return s;
}

}  // namespace carma
