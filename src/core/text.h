#pragma once
// Small text helpers shared by the parsers of names (policies, estimators, units), and the one
// sanitiser of text shown on a terminal.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
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

// ---- text shown on a terminal ----------------------------------------------------------------

// One character of UTF-8 text: its code point and length in bytes. An invalid, overlong or cut
// sequence is one byte of kInvalidCodePoint.
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

struct Utf8Char {
    char32_t value;
    std::size_t bytes;
};

// The character at s[i] (i < s.size()).
inline Utf8Char decode_utf8(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        return {b0, 1};
    }
    std::size_t n = 0;
    char32_t v = 0;
    if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        v = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        v = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        v = b0 & 0x07;
    } else {
        return {kInvalidCodePoint, 1};
    }
    if (i + n > s.size()) {
        return {kInvalidCodePoint, 1};
    }
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) {
            return {kInvalidCodePoint, 1};
        }
        v = (v << 6) | (b & 0x3F);
    }
    static constexpr std::array<char32_t, 5> kSmallest = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kSmallest[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        return {kInvalidCodePoint, 1};
    }
    return {v, n};
}

// Offset of the first byte that breaks UTF-8, or npos. nlohmann's parser passes such bytes
// through inside strings, so a body from a client is checked before it is parsed.
inline std::size_t invalid_utf8_at(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char c = decode_utf8(s, i);
        if (c.value == kInvalidCodePoint) {
            return i;
        }
        i += c.bytes;
    }
    return std::string_view::npos;
}

// Unicode's format characters (general category Cf, Unicode 15.0: the table of
// unicodedata.category() of Python's Unicode 14 plus the Egyptian format controls
// U+13439-1343F that 15.0 added). Invisible, and many reorder text (bidi marks and isolates,
// U+061C), hide it (tag characters U+E0020-E007F) or stand for what follows (U+FFF9-FFFB).
inline constexpr std::array<std::pair<char32_t, char32_t>, 21> kFormatCharacters = {{
    {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},
    {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x180E, 0x180E},
    {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},
    {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
    {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
    {0xE0020, 0xE007F},
}};

inline bool format_character(char32_t c) {
    for (const auto& [lo, hi] : kFormatCharacters) {
        if (c >= lo && c <= hi) {
            return true;
        }
    }
    return false;
}

// Private use (U+E000-F8FF and planes 15 and 16): no meaning a reader can know, and terminals
// and fonts give them their own (icons, or nothing).
inline bool private_use(char32_t c) {
    return (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xF0000 && c <= 0x10FFFD);
}

// What must not reach a terminal as is: C0 and C1 controls and DEL (escape sequences start
// there: a window title, a clipboard write, clearing the screen), bytes that are not UTF-8, the
// line and paragraph separators, every format character (invisible; many reorder or hide text)
// and every private-use character.
inline bool unsafe_on_terminal(char32_t c) {
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == kInvalidCodePoint ||
           c == 0x2028 || c == 0x2029 || format_character(c) || private_use(c);
}

// Text from the daemon (task names, commands, environments, messages, user and node names,
// errors that quote them: other users' own text) as every command prints it: each character
// unsafe_on_terminal() becomes one '?', so it cannot drive the reader's terminal nor break a
// table's line; all else is kept. `keep_newlines` keeps '\n' (for a message of several lines).
// JSON output and a task's own log do not pass here.
inline std::string printable(std::string_view s, bool keep_newlines = false) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char c = decode_utf8(s, i);
        if (unsafe_on_terminal(c.value) && !(keep_newlines && c.value == '\n')) {
            out += '?';
        } else {
            out.append(s.substr(i, c.bytes));
        }
        i += c.bytes;
    }
    return out;
}

// What a peer sent, quoted in an error message: printable ASCII as is, every other byte as \xNN
// (so the message is valid UTF-8 and can travel back as a JSON string), at most `max` bytes of
// it and "..." when it went on.
inline std::string escaped_bytes(std::string_view s,
                                 std::size_t max = std::string_view::npos) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const char ch : s.substr(0, max)) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c < 0x7f) {
            out += ch;
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    if (s.size() > max) {
        out += "...";
    }
    return out;
}

// Shell quoting, for commands shown to a user or written into a script: plain words as they
// are, anything else in single quotes, so that it can be pasted back into a terminal.
inline std::string shell_quote(std::string_view word) {
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./=:,+@%") == std::string_view::npos;
    if (plain) {
        return std::string(word);
    }
    std::string out = "'";
    for (char c : word) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// The text of an errno value ("No such file or directory").
inline std::string errno_text(int err) {
    const char* text = strerrordesc_np(err);  // unlike strerror, safe with other threads
    return text != nullptr ? std::string(text) : "unknown error " + std::to_string(err);
}

// At most `max_bytes` of `s`, cut at the start of a UTF-8 character, never inside one (a cut
// character would be replaced, or refused by the JSON writer).
inline std::string utf8_prefix(std::string_view s, std::size_t max_bytes) {
    if (s.size() <= max_bytes) {
        return std::string(s);
    }
    std::size_t end = max_bytes;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) {  // 10xxxxxx
        --end;
    }
    return std::string(s.substr(0, end));
}

// `s` whole when it fits in `max_bytes`; else its utf8_prefix with `mark` after it, to show that
// something was cut (events, failure reasons).
inline std::string shortened(std::string_view s, std::size_t max_bytes,
                             std::string_view mark = "\u2026") {
    if (s.size() <= max_bytes) {
        return std::string(s);
    }
    return utf8_prefix(s, max_bytes) + std::string(mark);
}

}  // namespace carma
