// What a restart reads back of a fair-share preemption from the store's events
// (daemon/preemption_events.h): the pure rules, and the reads of a real store with more events
// than a restart once looked at (it read a task's oldest 10,000).

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/preemption_events.h"
#include "store/store.h"

namespace carma::daemon {
namespace {

store::EventRow ev(std::int64_t id, const std::string& kind, const std::string& message = "") {
    store::EventRow e;
    e.id = id;
    e.kind = kind;
    e.message = message;
    return e;
}

// This test verifies that the later of a preemption and a cancel counts for the attempt being
// stopped.
TEST(PreemptionEvents, TheLaterOfAStopAndACancelCounts) {
    const std::string stopping = preempting_words(2) + "stopped so that task 9 can start";
    EXPECT_EQ(stop_under_way(std::nullopt, std::nullopt), StopUnderWay::None);
    EXPECT_EQ(stop_under_way(ev(2, kPreemptingEvent, stopping), std::nullopt),
              StopUnderWay::Preempting);
    EXPECT_EQ(stop_under_way(ev(2, kPreemptingEvent, stopping), ev(3, "cancel-requested")),
              StopUnderWay::Cancelling);
    EXPECT_EQ(stop_under_way(ev(4, kPreemptingEvent, stopping), ev(3, "cancel-requested")),
              StopUnderWay::Preempting);
}

// This test verifies that a waiting task counts as having made room until it is placed again or
// released from a hold, from the newest of those events, and that the room-made message carries
// what the stop cost, read back as written.
TEST(PreemptionEvents, MadeRoomUntilPlacedOrReleased) {
    EXPECT_FALSE(made_room_since_placed(std::nullopt));
    EXPECT_TRUE(made_room_since_placed(ev(1, kRoomMadeEvent)));
    EXPECT_FALSE(made_room_since_placed(ev(2, "placed")));
    EXPECT_FALSE(made_room_since_placed(ev(2, "released")));
    const std::string words = room_made_words(3, 17, "alice", 123.45);
    EXPECT_TRUE(words.starts_with("attempt 3 of task 17 of alice is being stopped")) << words;
    ASSERT_TRUE(lost_gpu_s_in(words)) << words;
    EXPECT_NEAR(*lost_gpu_s_in(words), 123.45, 0.051);
    EXPECT_FALSE(
        lost_gpu_s_in("attempt 1 of task 2 of bob is being stopped so that this task "
                      "can start (fair share)"))
        << "a message written before the cost was recorded";
}

class PreemptionEventsStore : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "carma-preempt-events-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        auto opened = store::Store::open(dir_ + "/carma.db");
        ASSERT_TRUE(opened) << opened.error().message;
        store_ = std::move(*opened);
    }
    void TearDown() override {
        store_.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    // `n` events of `kind` on `task`, in one transaction.
    void flood(TaskId task, const std::string& kind, int n) {
        std::vector<store::EventRow> rows(static_cast<std::size_t>(n));
        for (store::EventRow& e : rows) {
            e.time = 1000;
            e.task = task;
            e.kind = kind;
            e.message = "waiting";
        }
        ASSERT_TRUE(store_->add_events(rows));
    }
    void add(TaskId task, const std::string& kind, const std::string& message = "") {
        ASSERT_TRUE(store_->add_event(store::EventRow{0, 2000, task, kind, message}));
    }

    std::string dir_;
    std::unique_ptr<store::Store> store_;
};

// This test verifies that a restart reads the stop under way and the room a waiting task made
// from the newest events, behind 12,000 older ones: a stop recorded after a task's first 10,000
// events was missed, so a restarted daemon let the waiting task stop a second attempt and did
// not queue the stopped one again.
TEST_F(PreemptionEventsStore, ReadsTheNewestEventsBehindMoreThanTenThousand) {
    constexpr TaskId kHead = 7, kVictim = 8;
    ASSERT_NO_FATAL_FAILURE(flood(kHead, "placed", 12000));
    ASSERT_NO_FATAL_FAILURE(flood(kVictim, "cancel-requested", 12000));
    EXPECT_FALSE(room_made_recorded(*store_, kHead));
    EXPECT_EQ(stop_recorded(*store_, kVictim, 2), StopUnderWay::Cancelling);

    ASSERT_NO_FATAL_FAILURE(add(kVictim, kPreemptingEvent, preempting_words(2) + "stopped"));
    ASSERT_NO_FATAL_FAILURE(add(kHead, kRoomMadeEvent, room_made_words(2, kVictim, "bob", 60)));
    ASSERT_NO_FATAL_FAILURE(add(kHead, "nice", "nice 5"));
    const auto room = room_made_recorded(*store_, kHead);
    ASSERT_TRUE(room) << "the room made after 12,000 events was missed";
    EXPECT_NEAR(lost_gpu_s_in(room->message).value_or(-1), 60, 0.051);
    EXPECT_EQ(stop_recorded(*store_, kVictim, 2), StopUnderWay::Preempting);
    EXPECT_EQ(stop_recorded(*store_, kVictim, 3), StopUnderWay::Cancelling)
        << "a preemption of attempt 2 says nothing of attempt 3";

    ASSERT_NO_FATAL_FAILURE(add(kHead, "placed"));
    EXPECT_FALSE(room_made_recorded(*store_, kHead));
    ASSERT_NO_FATAL_FAILURE(add(kVictim, "cancel-requested"));
    EXPECT_EQ(stop_recorded(*store_, kVictim, 2), StopUnderWay::Cancelling);
}

// This test verifies the read of the window's stops after a restart: every room-made event at
// or after the time asked, of any task, and nothing older or of another kind.
TEST_F(PreemptionEventsStore, ListsTheStopsOfTheWindow) {
    ASSERT_TRUE(store_->add_event(store::EventRow{0, 100, 1, kRoomMadeEvent, "old"}));
    ASSERT_TRUE(store_->add_event(store::EventRow{0, 500, 2, kRoomMadeEvent, "recent"}));
    ASSERT_TRUE(store_->add_event(store::EventRow{0, 600, 3, "placed", "other"}));
    ASSERT_TRUE(store_->add_event(store::EventRow{0, 700, 4, kRoomMadeEvent, "newest"}));
    const std::vector<std::string> kinds{kRoomMadeEvent};
    auto since = store_->events_since(400, kinds, 100);
    ASSERT_TRUE(since) << since.error().message;
    ASSERT_EQ(since->size(), 2u);
    EXPECT_EQ((*since)[0].task, 2);
    EXPECT_EQ((*since)[1].task, 4);
}

}  // namespace
}  // namespace carma::daemon
