#include "cli/views/screen_text.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/text.h"

namespace carma::cli::screen {

namespace {

// East Asian wide and fullwidth ranges and the emoji blocks terminals draw two columns wide
// (Markus Kuhn's wcwidth). Counting an odd character too wide only leaves a blank.
bool is_wide(char32_t c) {
    static constexpr std::pair<char32_t, char32_t> kWide[] = {
        {0x1100, 0x115F},   {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},
        {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
        {0xFE30, 0xFE4F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x1F300, 0x1F64F},
        {0x1F900, 0x1F9FF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
    };
    for (const auto& [lo, hi] : kWide) {
        if (c >= lo && c <= hi) {
            return true;
        }
    }
    return false;
}

std::size_t columns_of(char32_t c) {
    return !unsafe_on_terminal(c) && is_wide(c) ? 2 : 1;  // an unsafe one is shown as '?'
}

}  // namespace

// ---- text measured in terminal columns ---------------------------------------------------

std::size_t columns(std::string_view s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char cp = decode_utf8(s, i);
        n += columns_of(cp.value);
        i += cp.bytes;
    }
    return n;
}

std::string cut(std::string_view s, std::size_t cols) {
    if (columns(s) <= cols) {
        return std::string(s);
    }
    const std::size_t room = cols >= 4 ? cols - 3 : cols;
    std::string out;
    std::size_t used = 0;
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char cp = decode_utf8(s, i);
        const std::size_t w = columns_of(cp.value);
        if (used + w > room) {
            break;
        }
        out.append(s.substr(i, cp.bytes));
        used += w;
        i += cp.bytes;
    }
    return cols >= 4 ? out + "..." : out;
}

std::string pad(std::string_view s, std::size_t cols, bool right) {
    const std::string fill(cols - std::min(cols, columns(s)), ' ');
    return right ? fill + std::string(s) : std::string(s) + fill;
}

std::vector<std::string> wrap(std::string_view text, std::size_t width, std::size_t max_lines) {
    std::vector<std::string> lines;
    std::string line;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t end = text.find(' ', start);
        if (end == std::string_view::npos) {
            end = text.size();
        }
        const std::string_view word = text.substr(start, end - start);
        if (!line.empty() && columns(line) + 1 + columns(word) > width) {
            lines.push_back(line);
            line.clear();
        }
        if (!line.empty()) {
            line += ' ';
        }
        line += word;
        start = end + 1;
    }
    lines.push_back(line);
    if (lines.size() > max_lines) {
        std::string rest;
        for (std::size_t i = max_lines - 1; i < lines.size(); ++i) {
            if (!rest.empty()) {
                rest += ' ';
            }
            rest += lines[i];
        }
        lines.resize(max_lines - 1);
        lines.push_back(rest);
    }
    for (std::string& l : lines) {
        l = cut(l, width);
    }
    return lines;
}

// ---- styled lines --------------------------------------------------------------------------

Line& Line::add(std::string_view text, const char* style) {
    spans_.push_back({printable(text), style});
    return *this;
}

std::size_t Line::columns() const {
    std::size_t n = 0;
    for (const Span& s : spans_) {
        n += screen::columns(s.text);
    }
    return n;
}

std::string Line::render(std::size_t width, bool colour) const {
    std::string out;
    std::size_t used = 0;
    for (const Span& span : spans_) {
        std::string piece;
        for (std::size_t i = 0; i < span.text.size();) {
            const Utf8Char cp = decode_utf8(span.text, i);
            const std::size_t w = columns_of(cp.value);
            if (used + w > width) {
                break;
            }
            piece.append(span.text, i, cp.bytes);
            used += w;
            i += cp.bytes;
        }
        if (piece.empty()) {
            continue;
        }
        if (colour && *span.style != '\0') {
            out += fmt::format("\033[{}m{}\033[0m", span.style, piece);
        } else {
            out += piece;
        }
    }
    if (!colour) {
        while (!out.empty() && out.back() == ' ') {
            out.pop_back();
        }
    }
    return out;
}

// ---- sections ------------------------------------------------------------------------------

std::size_t Section::demand() const {
    std::size_t n = fixed.size();
    for (const auto& item : items) {
        n += item.size();
    }
    return n;
}

std::vector<Line> Section::fit(std::size_t n) const {
    std::vector<Line> out;
    if (n == 0) {
        return out;
    }
    const bool all = demand() <= n;
    for (const Line& f : fixed) {
        if (all || out.size() + 1 < n) {
            out.push_back(f);
        }
    }
    std::size_t shown = 0;
    if (out.size() == fixed.size()) {
        for (const auto& item : items) {
            if (!all && out.size() + item.size() + 1 > n) {
                break;
            }
            out.insert(out.end(), item.begin(), item.end());
            ++shown;
        }
    }
    if (shown < items.size()) {
        const std::size_t more = items.size() - shown;
        out.push_back(Line().add(fmt::format("\u2026 {} more {}", more, more == 1 ? one : many),
                                 kDim));
    }
    return out;
}

std::vector<std::vector<Line>> share_lines(const std::vector<Section>& sections,
                                           std::size_t lines) {
    std::vector<std::size_t> order(sections.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return sections[a].demand() < sections[b].demand();
    });
    std::vector<std::vector<Line>> out(sections.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
        const Section& s = sections[order[k]];
        out[order[k]] = s.fit(std::min(s.demand(), lines / (order.size() - k)));
        lines -= out[order[k]].size();
    }
    return out;
}

}  // namespace carma::cli::screen
