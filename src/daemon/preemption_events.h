#pragma once
// What the store's events say of a fair-share preemption (daemon_preempt.cpp), read back after
// a restart: the daemon keeps no other record of a stop under way or of the waiting task it was
// for. Pure.

#include <span>
#include <string>

#include "store/records.h"

namespace carma::daemon {

// On the attempt being stopped ("attempt N stopped ... so that task H of U can start"), written
// before the stop is sent.
inline constexpr const char* kPreemptingEvent = "preempting";
// On the waiting task an attempt is being stopped for.
inline constexpr const char* kRoomMadeEvent = "room-made";

// Whether attempt `number` of a task was being preempted or cancelled when the daemon stopped,
// from the task's events, oldest first: the later of the two counts (a cancel during the stop
// wins).
enum class StopUnderWay { None, Preempting, Cancelling };
StopUnderWay stop_under_way(std::span<const store::EventRow> events, int number);

// Whether a waiting task already had an attempt stopped for it since it was last placed or
// released, from its events, oldest first. A task stops one attempt until it starts (or the
// stopped task would backfill its own place and be stopped again); a restart must not let it
// stop a second one.
bool made_room_since_placed(std::span<const store::EventRow> events);

// How the preempting event's message begins for attempt `number`.
std::string preempting_words(int number);

}  // namespace carma::daemon
