#include "api/query.h"

#include <charconv>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>

namespace carma::api {

namespace {

// Long or binary garbage is not echoed back whole.
std::string shown(std::string_view text) {
    std::string out;
    for (char c : text.substr(0, 40)) {
        out += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    return text.size() > 40 ? out + "..." : out;
}

}  // namespace

namespace {

// A number of type T within [min, max]: integers and decimals are read and refused alike.
template <typename T>
Result<T> ranged_param(std::string_view name, std::optional<std::string_view> text, T min, T max,
                       T fallback, const char* kind) {
    if (!text) {
        return fallback;
    }
    T value{};
    const char* end = text->data() + text->size();
    const auto [ptr, ec] = [&] {
        if constexpr (std::is_floating_point_v<T>) {
            return std::from_chars(text->data(), end, value, std::chars_format::fixed);
        } else {
            return std::from_chars(text->data(), end, value);
        }
    }();
    bool finite = true;
    if constexpr (std::is_floating_point_v<T>) {
        finite = std::isfinite(value);
    }
    if (text->empty() || ec == std::errc::invalid_argument || ptr != end || !finite) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("query parameter {}='{}' is not {}; give one from {} to {}", name,
                                shown(*text), kind, min, max));
    }
    if (ec == std::errc::result_out_of_range || value < min || value > max) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("query parameter {}={} is out of range; give one from {} to {}",
                                name, shown(*text), min, max));
    }
    return value;
}

}  // namespace

Result<std::int64_t> integer_param(std::string_view name, std::optional<std::string_view> text,
                                   std::int64_t min, std::int64_t max, std::int64_t fallback) {
    return ranged_param(name, text, min, max, fallback, "a whole number");
}

Result<std::string> word_param(std::string_view name, std::optional<std::string_view> text,
                               std::initializer_list<std::string_view> words,
                               std::string_view fallback) {
    if (!text) {
        return std::string(fallback);
    }
    for (std::string_view w : words) {
        if (*text == w) {
            return std::string(w);
        }
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("query parameter {}='{}' is not one of: {}", name, shown(*text),
                            fmt::join(words, ", ")));
}

Result<bool> flag_param(std::string_view name, std::optional<std::string_view> text) {
    if (!text) {
        return false;
    }
    if (text->empty() || *text == "1" || *text == "true" || *text == "yes") {
        return true;
    }
    if (*text == "0" || *text == "false" || *text == "no") {
        return false;
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("query parameter {}='{}' is not a yes/no switch; give 1 or 0",
                            name, shown(*text)));
}

Result<double> number_param(std::string_view name, std::optional<std::string_view> text,
                            double min, double max, double fallback) {
    return ranged_param(name, text, min, max, fallback, "a number");
}

Result<std::string> text_param(std::string_view name, std::optional<std::string_view> text,
                               std::size_t max_bytes) {
    if (!text) {
        return std::string();
    }
    if (text->empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("query parameter {} is empty; leave it out or give a value", name));
    }
    if (text->size() > max_bytes) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("query parameter {}='{}' is longer than {} bytes", name,
                                shown(*text), max_bytes));
    }
    for (char c : *text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("query parameter {}='{}' holds a control character", name,
                                    shown(*text)));
        }
    }
    return std::string(*text);
}

Result<std::vector<std::string>> list_param(std::string_view name,
                                            std::optional<std::string_view> text) {
    std::vector<std::string> out;
    if (!text) {
        return out;
    }
    std::string_view rest = *text;
    while (true) {
        const std::size_t comma = rest.find(',');
        const std::string_view word = rest.substr(0, comma);
        if (word.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("query parameter {}='{}' has an empty item; give words "
                                    "separated by single commas",
                                    name, shown(*text)));
        }
        out.emplace_back(word);
        if (comma == std::string_view::npos) {
            return out;
        }
        rest.remove_prefix(comma + 1);
    }
}

}  // namespace carma::api
