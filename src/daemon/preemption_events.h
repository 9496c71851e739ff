#pragma once
// What the store's events say of a fair-share preemption (daemon_preempt.cpp), read back after
// a restart: the daemon keeps no other record of a stop under way, of the waiting task it was
// for, or of what it cost. The rules are pure; the two reads at the end ask the store for the
// newest events that decide, in SQL, however many events a task has (a restart once read only
// a task's oldest 10,000 and missed any stop recorded after them).

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/task.h"
#include "store/records.h"

namespace carma::store {
class Store;
}

namespace carma::daemon {

// On the attempt being stopped ("attempt N stopped ... so that task H of U can start"), written
// before the stop is sent.
inline constexpr const char* kPreemptingEvent = "preempting";
// On the waiting task an attempt is being stopped for; its message ends with what the stop
// cost (room_made_words).
inline constexpr const char* kRoomMadeEvent = "room-made";
// On a waiting task that ended or was held without starting after a stop was made for it: its
// owner was charged what the stop cost (core/preemption_budget.h).
inline constexpr const char* kPreemptionChargedEvent = "preemption-charged";
// On a waiting task for which no stop was made because its user's stops are spent.
inline constexpr const char* kPreemptionBudgetEvent = "preemption-budget";

// Whether attempt `number` of a task was being preempted or cancelled when the daemon stopped,
// from the newest preempting event of that attempt and the newest cancel request: the later of
// the two counts (a cancel during the stop wins).
enum class StopUnderWay { None, Preempting, Cancelling };
StopUnderWay stop_under_way(const std::optional<store::EventRow>& preempting,
                            const std::optional<store::EventRow>& cancel);

// The kinds that make or clear a waiting task's room: room-made, then placed or released.
const std::vector<std::string>& room_kinds();
// Whether a waiting task already had an attempt stopped for it since it was last placed or
// released, from the newest of its room_kinds events. A task stops one attempt until it starts
// (or the stopped task would backfill its own place and be stopped again); a restart must not
// let it stop a second one.
bool made_room_since_placed(const std::optional<store::EventRow>& newest_room_event);

// How the preempting event's message begins for attempt `number`.
std::string preempting_words(int number);
// The room-made event's message: attempt `number` of task `victim` of `victim_user` is being
// stopped, and `lost_gpu_s` of its work are lost.
std::string room_made_words(int number, TaskId victim, const std::string& victim_user,
                            double lost_gpu_s);
// The GPU-seconds a room-made message says were lost; none in a message without them (written
// before issue 44).
std::optional<double> lost_gpu_s_in(const std::string& room_made_message);

// The store's side: attempt `number` of `task` as stop_under_way reads it, and the task's
// room-made event when it is the newest of its room_kinds (none when the store cannot say).
StopUnderWay stop_recorded(store::Store& store, TaskId task, int number);
std::optional<store::EventRow> room_made_recorded(store::Store& store, TaskId task);

}  // namespace carma::daemon
