#include "core/array_throttle.h"

#include <algorithm>

#include <fmt/format.h>

namespace carma {

std::vector<TaskId> members_to_admit(int max_running, std::size_t active,
                                     std::span<const HeldMember> held) {
    std::vector<HeldMember> order(held.begin(), held.end());
    std::sort(order.begin(), order.end(), [](const HeldMember& a, const HeldMember& b) {
        return a.index != b.index ? a.index < b.index : a.id < b.id;
    });
    std::size_t room = order.size();
    if (max_running > 0) {
        const auto limit = static_cast<std::size_t>(max_running);
        room = active >= limit ? 0 : std::min(room, limit - active);
    }
    std::vector<TaskId> out;
    out.reserve(room);
    for (std::size_t i = 0; i < room; ++i) {
        out.push_back(order[i].id);
    }
    return out;
}

std::string throttle_reason(int max_running) {
    return fmt::format("its array runs at most {} member{} at once (--array ...%{}); waits for "
                       "one to end",
                       max_running, max_running == 1 ? "" : "s", max_running);
}

}  // namespace carma
