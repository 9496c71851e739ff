#pragma once
// Small text helpers shared by the parsers of names (policies, estimators, units).

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

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

// `text` cut at every `sep` (PATH-like lists); empty pieces are kept, callers skip them.
inline std::vector<std::string> split_list(std::string_view text, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t at = text.find(sep, start);
        out.emplace_back(
            text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
        if (at == std::string_view::npos) {
            break;
        }
        start = at + 1;
    }
    return out;
}

// Levenshtein distance, to suggest what a typo meant.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The candidate nearest to `word`, if it is a near miss (at most two edits); else empty.
inline std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_distance = 3;
    for (const std::string& c : candidates) {
        const std::size_t d = edit_distance(word, c);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

}  // namespace carma
