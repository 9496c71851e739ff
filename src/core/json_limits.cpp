#include "core/json_limits.h"

#include <fmt/format.h>

namespace carma {

std::optional<std::size_t> json_too_deep_at(std::string_view text, std::size_t max_depth) {
    std::size_t depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;  // the escaped character, '"' included
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                return i;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return std::nullopt;
}

std::string json_too_deep_message(std::string_view what, std::size_t max_depth, std::size_t at) {
    return fmt::format("{} nests arrays and objects deeper than {} (at byte {}); no CARMA message "
                       "does",
                       what, max_depth, at);
}

Result<nlohmann::json> parse_json_within(std::string_view text, std::string_view what,
                                         std::size_t max_depth) {
    if (auto at = json_too_deep_at(text, max_depth)) {
        return fail(ErrorCode::InvalidArgument, json_too_deep_message(what, max_depth, *at));
    }
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return fail(ErrorCode::InvalidArgument, fmt::format("{} is not JSON: {}", what, e.what()));
    }
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
    if (value.is_array()) {
        return value.size() == 1 ? "an array of 1 item"
                                 : fmt::format("an array of {} items", value.size());
    }
    if (value.is_object()) {
        return value.size() == 1 ? "an object of 1 key"
                                 : fmt::format("an object of {} keys", value.size());
    }
    if (value.is_string()) {
        const std::string& s = value.get_ref<const std::string&>();
        if (s.size() > max_chars) {
            // Cut at a character boundary: never inside a UTF-8 sequence.
            std::size_t cut = max_chars;
            while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
                --cut;
            }
            return nlohmann::json(s.substr(0, cut) + "...")
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
    }
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace carma
