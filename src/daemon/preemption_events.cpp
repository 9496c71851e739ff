#include "daemon/preemption_events.h"

#include <string>

#include <fmt/format.h>

namespace carma::daemon {

std::string preempting_words(int number) {
    return fmt::format("attempt {} ", number);
}

StopUnderWay stop_under_way(std::span<const store::EventRow> events, int number) {
    const std::string words = preempting_words(number);
    StopUnderWay stop = StopUnderWay::None;
    for (const store::EventRow& e : events) {
        if (e.kind == kPreemptingEvent && e.message.starts_with(words)) {
            stop = StopUnderWay::Preempting;
        } else if (e.kind == "cancel-requested") {
            stop = StopUnderWay::Cancelling;
        }
    }
    return stop;
}

bool made_room_since_placed(std::span<const store::EventRow> events) {
    bool made_room = false;
    for (const store::EventRow& e : events) {
        if (e.kind == kRoomMadeEvent) {
            made_room = true;
        } else if (e.kind == "placed" || e.kind == "released") {
            made_room = false;
        }
    }
    return made_room;
}

}  // namespace carma::daemon
