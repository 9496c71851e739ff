#include "core/task_ref.h"

#include <charconv>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace carma {

namespace {

std::optional<std::int64_t> whole(std::string_view s) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) {
        return std::nullopt;
    }
    return v;
}

}  // namespace

Result<TaskRef> parse_task_ref(std::string_view word) {
    auto bad = [&] {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("'{}' is not a task: write an id (12), an array member (12_3) or "
                                "a whole array (12_*)",
                                word));
    };
    TaskRef ref;
    const std::size_t under = word.find('_');
    const auto id = whole(word.substr(0, under));
    if (!id || *id < 1) {
        return bad();
    }
    ref.id = *id;
    if (under == std::string_view::npos) {
        return ref;
    }
    const std::string_view rest = word.substr(under + 1);
    if (rest == "*") {
        ref.whole_array = true;
        return ref;
    }
    const auto index = whole(rest);
    if (!index || *index > std::numeric_limits<int>::max()) {
        return bad();
    }
    ref.array_index = static_cast<int>(*index);
    return ref;
}

std::string format_task_ref(const TaskRef& ref) {
    if (ref.whole_array) {
        return fmt::format("{}_*", ref.id);
    }
    return ref.array_index ? fmt::format("{}_{}", ref.id, *ref.array_index)
                           : fmt::format("{}", ref.id);
}

std::string format_task_id(TaskId id, const std::optional<ArrayMember>& array) {
    return array ? fmt::format("{}_{}", array->id, array->index) : fmt::format("{}", id);
}

std::string format_array_ids(TaskId array_id, std::span<const std::int64_t> sorted) {
    if (sorted.size() == 1) {
        return fmt::format("{}_{}", array_id, sorted.front());
    }
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) {
            ++j;
        }
        parts.push_back(j == i ? fmt::format("{}", sorted[i])
                               : fmt::format("{}-{}", sorted[i], sorted[j]));
        i = j + 1;
    }
    return fmt::format("{}_[{}]", array_id, fmt::join(parts, ","));
}

}  // namespace carma
