#pragma once
// A client's bytes in what the server says: white space trimmed, hexadecimal digits read, and a
// piece of a request quoted in a message (core/text.h escaped_bytes).
// For the parser of heads (request_parser.cpp) and of chunked bodies (chunked_decoder.cpp).

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace carma::http {

inline bool control_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
}

// Without the spaces and tabs around it (HTTP's optional white space).
inline std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// The value of a hexadecimal digit; -1 for any other byte.
inline int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

}  // namespace carma::http
