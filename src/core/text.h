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

}  // namespace carma
