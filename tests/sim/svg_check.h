#pragma once
// Checks on the report's HTML and SVG for tests: the SVG charts of a page, the boxes their text
// labels take (font size x 0.6 per character, the rule the charts lay out by) and whether two
// overlap, and whether the page's tags are balanced.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace carma::test_support {

// Every <svg>...</svg> of a page, in order.
inline std::vector<std::string> svgs_of(const std::string& html) {
    std::vector<std::string> out;
    for (std::size_t pos = html.find("<svg"); pos != std::string::npos;
         pos = html.find("<svg", pos + 1)) {
        const std::size_t end = html.find("</svg>", pos);
        if (end == std::string::npos) {
            break;
        }
        out.push_back(html.substr(pos, end + 6 - pos));
    }
    return out;
}

inline std::optional<std::string> attribute(const std::string& attrs, const std::string& name) {
    const std::regex re("(^|\\s)" + name + "=\"([^\"]*)\"");
    std::smatch m;
    if (std::regex_search(attrs, m, re)) {
        return m[2].str();
    }
    return std::nullopt;
}

// The text as a browser shows it: the entities html_escape writes, decoded.
inline std::string decode_entities(std::string s) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
        for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + 1)) {
            s.replace(p, from.size(), to);
        }
    }
    return s;
}

inline std::size_t code_points(const std::string& s) {
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

struct Box {
    double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    std::string text;
};

inline bool intersects(const Box& a, const Box& b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// The box of every <text> of one SVG: width 0.6 x font size per character, from the baseline up
// one font size and down a quarter of one; rotated (-90 degrees) labels stand upright.
inline std::vector<Box> text_boxes(const std::string& svg, const std::string& only_class = "") {
    double root_font = 12;
    if (const auto root = svg.substr(0, svg.find('>')); auto fs = attribute(root, "font-size")) {
        root_font = std::stod(*fs);
    }
    static const std::regex text_re("<text([^>]*)>([^<]*)</text>");
    std::vector<Box> out;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text_re);
         it != std::sregex_iterator(); ++it) {
        const std::string attrs = (*it)[1].str();
        if (!only_class.empty() && attribute(attrs, "class") != only_class) {
            continue;
        }
        const std::string text = decode_entities((*it)[2].str());
        const double fs =
            attribute(attrs, "font-size") ? std::stod(*attribute(attrs, "font-size")) : root_font;
        const double x = std::stod(attribute(attrs, "x").value_or("0"));
        const double y = std::stod(attribute(attrs, "y").value_or("0"));
        const double w = static_cast<double>(code_points(text)) * fs * 0.6;
        const std::string anchor = attribute(attrs, "text-anchor").value_or("start");
        const double shift = anchor == "middle" ? w / 2 : anchor == "end" ? w : 0;
        Box b;
        b.text = text;
        if (attribute(attrs, "transform").value_or("").find("rotate(-90") != std::string::npos) {
            b.x0 = x - fs;
            b.x1 = x + fs / 4;
            b.y0 = y - w + shift;
            b.y1 = y + shift;
        } else {
            b.x0 = x - shift;
            b.x1 = x - shift + w;
            b.y0 = y - fs;
            b.y1 = y + fs / 4;
        }
        out.push_back(b);
    }
    return out;
}

// "'a' overlaps 'b'" for every overlapping pair of text boxes of one SVG.
inline std::vector<std::string> overlapping_labels(const std::string& svg) {
    const std::vector<Box> boxes = text_boxes(svg);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
        for (std::size_t j = i + 1; j < boxes.size(); ++j) {
            if (intersects(boxes[i], boxes[j])) {
                out.push_back("'" + boxes[i].text + "' overlaps '" + boxes[j].text + "'");
            }
        }
    }
    return out;
}

// The first problem with the nesting of a page's tags, or nullopt when every tag that is not
// void or self-closed is closed in order. Comments, the doctype and the text of <style> are
// skipped.
inline std::optional<std::string> tag_balance_error(const std::string& html) {
    static const std::vector<std::string> kVoid = {"meta", "br",  "img",    "input", "link", "hr",
                                                   "col",  "wbr", "source", "area",  "base"};
    std::vector<std::string> open;
    std::size_t pos = 0;
    while ((pos = html.find('<', pos)) != std::string::npos) {
        if (html.compare(pos, 4, "<!--") == 0) {
            pos = html.find("-->", pos);
            continue;
        }
        const std::size_t end = html.find('>', pos);
        if (end == std::string::npos) {
            return "a tag is not closed at offset " + std::to_string(pos);
        }
        std::string tag = html.substr(pos + 1, end - pos - 1);
        pos = end + 1;
        if (tag.empty() || tag[0] == '!') {
            continue;
        }
        const bool closing = tag[0] == '/';
        const bool self_closed = tag.back() == '/';
        std::string name = tag.substr(closing ? 1 : 0);
        name = name.substr(0, name.find_first_of(" \t\n/"));
        if (closing) {
            if (open.empty() || open.back() != name) {
                return "</" + name + "> closes <" +
                       (open.empty() ? std::string("nothing") : open.back()) + ">";
            }
            open.pop_back();
        } else if (!self_closed && std::find(kVoid.begin(), kVoid.end(), name) == kVoid.end()) {
            open.push_back(name);
            if (name == "style") {
                pos = html.find("</style>", pos);
            }
        }
    }
    if (!open.empty()) {
        return "<" + open.back() + "> is never closed";
    }
    return std::nullopt;
}

}  // namespace carma::test_support
