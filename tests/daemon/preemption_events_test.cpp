// What a restart reads back of a fair-share preemption from the store's events
// (daemon/preemption_events.h), without a daemon.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/preemption_events.h"

namespace carma::daemon {
namespace {

store::EventRow ev(const std::string& kind, const std::string& message = "") {
    store::EventRow e;
    e.kind = kind;
    e.message = message;
    return e;
}

// This test verifies that the later of a preemption and a cancel counts for the attempt being
// stopped, and that a preemption of an earlier attempt says nothing of this one.
TEST(PreemptionEvents, TheLaterOfAStopAndACancelCounts) {
    const std::string stopping = preempting_words(2) + "stopped so that task 9 can start";
    EXPECT_EQ(stop_under_way({}, 2), StopUnderWay::None);
    EXPECT_EQ(stop_under_way(std::vector{ev("placed"), ev(kPreemptingEvent, stopping)}, 2),
              StopUnderWay::Preempting);
    EXPECT_EQ(stop_under_way(std::vector{ev(kPreemptingEvent, stopping)}, 3), StopUnderWay::None);
    EXPECT_EQ(
        stop_under_way(std::vector{ev(kPreemptingEvent, stopping), ev("cancel-requested")}, 2),
        StopUnderWay::Cancelling);
    EXPECT_EQ(
        stop_under_way(std::vector{ev("cancel-requested"), ev(kPreemptingEvent, stopping)}, 2),
        StopUnderWay::Preempting);
}

// This test verifies that a waiting task counts as having made room until it is placed again or
// released from a hold (a hold clears it), so that after a restart it stops no second task.
TEST(PreemptionEvents, MadeRoomUntilPlacedOrReleased) {
    EXPECT_FALSE(made_room_since_placed({}));
    EXPECT_TRUE(made_room_since_placed(std::vector{ev("submitted"), ev(kRoomMadeEvent)}));
    EXPECT_TRUE(made_room_since_placed(
        std::vector{ev("placed"), ev("preempted"), ev(kRoomMadeEvent), ev("nice")}));
    EXPECT_FALSE(made_room_since_placed(std::vector{ev(kRoomMadeEvent), ev("placed")}));
    EXPECT_FALSE(
        made_room_since_placed(std::vector{ev(kRoomMadeEvent), ev("held"), ev("released")}));
}

}  // namespace
}  // namespace carma::daemon
