#include "cli/views/cells.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/task_ref.h"

namespace carma::cli {

namespace {


}  // namespace

std::optional<ArrayMember> array_of_task(const nlohmann::json& task) {
    if (!task.is_object()) {
        return std::nullopt;
    }
    const auto a = task.find("array");
    if (a == task.end() || !a->is_object()) {
        return std::nullopt;
    }
    const auto id = a->find("id");
    const auto index = a->find("index");
    if (id == a->end() || index == a->end() || !id->is_number_integer() ||
        !index->is_number_integer()) {
        return std::nullopt;
    }
    return ArrayMember{id->get<TaskId>(), index->get<int>()};
}

std::string task_id_text(const nlohmann::json& task, const std::string& missing) {
    if (!task.is_object() || !task.contains("id") || !task["id"].is_number_integer()) {
        return missing;
    }
    const auto id = task.find("id");
    return format_task_id(id->get<TaskId>(), array_of_task(task));
}

std::size_t display_width(std::string_view s) {
    std::size_t n = 0;
    for (char c : s) {
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    }
    return n;
}

std::string truncate(std::string_view s, std::size_t width) {
    if (display_width(s) <= width || width < 4) {
        return std::string(s);
    }
    std::size_t kept = 0;
    std::size_t i = 0;
    for (; i < s.size(); ++i) {
        const bool starts_code_point = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
        if (starts_code_point && kept++ == width - 3) {
            break;
        }
    }
    return std::string(s.substr(0, i)) + "...";
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds > kLongestTime) {
        return "-";  // a nonsense timestamp from the daemon; casting it would be undefined
    }
    const auto s = static_cast<long long>(std::max(0.0, std::floor(seconds)));
    if (s < 60) {
        return fmt::format("{}s", s);
    }
    if (s < 3600) {
        return fmt::format("{}m{:02}s", s / 60, s % 60);
    }
    if (s < 86400) {
        return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
    }
    return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

}  // namespace carma::cli
