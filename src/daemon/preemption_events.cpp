#include "daemon/preemption_events.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "store/store.h"

namespace carma::daemon {

namespace {

// What precedes the lost GPU-seconds in a room-made message.
constexpr std::string_view kLostMarker = "(fair share): ";

}  // namespace

std::string preempting_words(int number) {
    return fmt::format("attempt {} ", number);
}

std::string room_made_words(int number, TaskId victim, const std::string& victim_user,
                            double lost_gpu_s) {
    return fmt::format(
        "{}of task {} of {} is being stopped so that this task can start {}{:.1f} GPU-s of its "
        "work are lost, charged to this task's owner if this task is cancelled or held before "
        "it starts",
        preempting_words(number), victim, victim_user, kLostMarker, lost_gpu_s);
}

std::optional<double> lost_gpu_s_in(const std::string& message) {
    const std::size_t at = message.rfind(kLostMarker);
    if (at == std::string::npos) {
        return std::nullopt;
    }
    const std::string rest = message.substr(at + kLostMarker.size());
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str() || !std::isfinite(v) || v < 0 ||
        !std::string_view(end).starts_with(" GPU-s")) {
        return std::nullopt;
    }
    return v;
}

StopUnderWay stop_under_way(const std::optional<store::EventRow>& preempting,
                            const std::optional<store::EventRow>& cancel) {
    if (preempting && (!cancel || preempting->id > cancel->id)) {
        return StopUnderWay::Preempting;
    }
    return cancel ? StopUnderWay::Cancelling : StopUnderWay::None;
}

const std::vector<std::string>& room_kinds() {
    static const std::vector<std::string> kinds = {kRoomMadeEvent, "placed", "released"};
    return kinds;
}

bool made_room_since_placed(const std::optional<store::EventRow>& newest_room_event) {
    return newest_room_event && newest_room_event->kind == kRoomMadeEvent;
}

StopUnderWay stop_recorded(store::Store& store, TaskId task, int number) {
    const std::vector<std::string> preempting{kPreemptingEvent};
    const std::vector<std::string> cancel{"cancel-requested"};
    auto stop = store.last_event(task, preempting, preempting_words(number));
    auto cancelled = store.last_event(task, cancel);
    if (!stop || !cancelled) {
        return StopUnderWay::None;
    }
    return stop_under_way(*stop, *cancelled);
}

std::optional<store::EventRow> room_made_recorded(store::Store& store, TaskId task) {
    auto newest = store.last_event(task, room_kinds());
    if (!newest || !made_room_since_placed(*newest)) {
        return std::nullopt;
    }
    return **newest;
}

}  // namespace carma::daemon
