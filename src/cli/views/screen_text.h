#pragma once
// The pieces of a full-screen terminal view (`carma top`, cli/views/top_view): text measured in
// terminal columns, lines of styled spans cut to a width, and sections that share the screen's
// height. Pure, like the views built of them.
//
// cells.h counts code points, which is right for the CLI's tables on a pipe; a full-screen view
// must not wrap, so here a wide character counts two; nothing the daemon sends reaches the
// terminal but through printable() (core/text.h).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace carma::cli::screen {

// ---- text measured in terminal columns ---------------------------------------------------

std::size_t columns(std::string_view s);

// At most `cols` columns of `s`, ending in "..." when cut (as cells.h's truncate; no mark under
// 4 columns).
std::string cut(std::string_view s, std::size_t cols);

std::string pad(std::string_view s, std::size_t cols, bool right);

// Words over lines of `width` columns, at most `max_lines`; what does not fit ends in "...".
std::vector<std::string> wrap(std::string_view text, std::size_t width, std::size_t max_lines);

// ---- styled lines --------------------------------------------------------------------------

// SGR parameters; empty: the terminal's default.
inline constexpr const char* kPlain = "";
inline constexpr const char* kBold = "1";
inline constexpr const char* kTitle = "1;7";
inline constexpr const char* kDim = "2";
inline constexpr const char* kGood = "32";
inline constexpr const char* kWarn = "33";
inline constexpr const char* kBad = "1;31";

class Line {
public:
    Line& add(std::string_view text, const char* style = kPlain);

    std::size_t columns() const;

    // Cut to `width` columns; with `colour`, each styled span between its SGR and a reset.
    std::string render(std::size_t width, bool colour) const;

private:
    struct Span {
        std::string text;
        const char* style;
    };
    std::vector<Span> spans_;
};

// A part of the screen that can be cut: its fixed lines (title, column headers) come first, then
// as many whole items (a GPU's block, a task's row) as fit, then "… N more".
struct Section {
    std::vector<Line> fixed;
    std::vector<std::vector<Line>> items;
    const char* one = "";   // the noun for one item
    const char* many = "";  // for several

    std::size_t demand() const;
    std::vector<Line> fit(std::size_t n) const;
};

// Shares `lines` among the sections: the smallest are met first, what they leave goes to the
// others in equal shares, and what a section cannot use (its items come whole) to the next ones.
std::vector<std::vector<Line>> share_lines(const std::vector<Section>& sections, std::size_t lines);

}  // namespace carma::cli::screen
