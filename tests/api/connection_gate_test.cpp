// Connection slots of the API's listeners: authentication before resources, and idle
// connections that make room (issue 18).

#include <vector>

#include <gtest/gtest.h>

#include "http/connection_gate.h"

namespace carma::http {
namespace {

// This test verifies that connections without credentials are dropped oldest first to make
// room, so an authenticated viewer always gets a slot; authenticated ones have their own limit.
TEST(ConnectionGateTest, UnauthenticatedConnectionsMakeRoomOldestFirst) {
    std::vector<int> evicted;
    ConnectionGate gate(4, 2, [&](int fd) { evicted.push_back(fd); });
    std::vector<ConnectionGate::Ticket> slow;
    for (int fd = 100; fd < 160; ++fd) {  // 60 slow connections without a token
        slow.push_back(gate.enter(fd));
    }
    EXPECT_EQ(gate.unauthenticated(), 4u);
    ASSERT_EQ(evicted.size(), 56u);
    EXPECT_EQ(evicted.front(), 100);  // the one that waited longest went first
    EXPECT_EQ(evicted.back(), 155);

    ConnectionGate::Ticket viewer = gate.enter(7);
    EXPECT_EQ(evicted.back(), 156) << "the viewer's connection took the oldest one's place";
    ASSERT_TRUE(gate.promote(viewer, 7));
    EXPECT_TRUE(viewer.authenticated());
    EXPECT_EQ(gate.authenticated(), 1u);
    EXPECT_EQ(gate.unauthenticated(), 3u);

    ConnectionGate::Ticket second = gate.enter(8);
    ASSERT_TRUE(gate.promote(second, 8));
    ConnectionGate::Ticket third = gate.enter(9);
    EXPECT_FALSE(gate.promote(third, 9)) << "two authenticated slots, both in a request";
    EXPECT_FALSE(third.authenticated());

    gate.set_idle(viewer, true);  // between two requests
    ConnectionGate::Ticket fourth = gate.enter(10);
    EXPECT_TRUE(gate.promote(fourth, 10)) << "the idle one made room";
    EXPECT_EQ(evicted.back(), 7);
    gate.leave(viewer);  // its thread saw the shutdown
    EXPECT_EQ(gate.authenticated(), 2u);
    for (const ConnectionGate::Ticket& t : slow) {
        gate.leave(t);  // evicted or not, leaving is safe
    }
    gate.leave(second);
    gate.leave(third);
    gate.leave(fourth);
    EXPECT_EQ(gate.authenticated(), 0u);
    EXPECT_EQ(gate.unauthenticated(), 0u);
    EXPECT_EQ(gate.evicted(), 58u);
}

// This test verifies the cap per identity (the agents' port's per-node cap): an identity at its
// cap is refused without taking anyone else's slot, other identities are not, a connection that
// leaves makes room for its identity, and one whose request names another identity moves.
TEST(ConnectionGateTest, OneIdentityCannotTakeEveryAuthenticatedSlot) {
    std::vector<int> evicted;
    ConnectionGate gate(8, 6, [&](int fd) { evicted.push_back(fd); }, 2);
    using P = ConnectionGate::Promotion;
    std::vector<ConnectionGate::Ticket> slow;
    for (int fd = 10; fd < 15; ++fd) {
        slow.push_back(gate.enter(fd));
    }
    EXPECT_EQ(gate.promote(slow[0], 10, "n1"), P::Promoted);
    EXPECT_EQ(gate.promote(slow[1], 11, "n1"), P::Promoted);
    EXPECT_EQ(gate.promote(slow[2], 12, "n1"), P::IdentityFull);
    EXPECT_FALSE(slow[2].authenticated());
    EXPECT_EQ(gate.of_identity("n1"), 2u);
    EXPECT_EQ(gate.authenticated(), 2u);
    EXPECT_TRUE(evicted.empty());
    EXPECT_EQ(gate.promote(slow[3], 13, "n2"), P::Promoted) << "another node has its own";
    EXPECT_EQ(gate.promote(slow[0], 10, "n1"), P::Promoted) << "its next request, same node";
    EXPECT_EQ(gate.of_identity("n1"), 2u);

    gate.leave(slow[1]);
    EXPECT_EQ(gate.of_identity("n1"), 1u);
    EXPECT_EQ(gate.promote(slow[2], 12, "n1"), P::Promoted) << "the one that left made room";
    // A request on slow[0] that names n2 moves the connection to n2's count.
    EXPECT_EQ(gate.promote(slow[0], 10, "n2"), P::Promoted);
    EXPECT_EQ(gate.of_identity("n1"), 1u);
    EXPECT_EQ(gate.of_identity("n2"), 2u);
    EXPECT_EQ(gate.promote(slow[4], 14, "n2"), P::IdentityFull);
    for (const ConnectionGate::Ticket& t : slow) {
        gate.leave(t);
    }
    EXPECT_EQ(gate.of_identity("n1"), 0u);
    EXPECT_EQ(gate.of_identity("n2"), 0u);
    EXPECT_EQ(gate.authenticated(), 0u);
}

// This test verifies that a full pool gives a newcomer the place of the connection idle longest,
// and refuses it only when every connection is in a request.
TEST(SlotPoolTest, NewcomersTakeThePlaceOfTheIdlest) {
    std::vector<int> evicted;
    SlotPool pool(3, [&](int fd) { evicted.push_back(fd); });
    const auto a = pool.take(1);
    const auto b = pool.take(2);
    const auto c = pool.take(3);
    ASSERT_TRUE(a && b && c);
    EXPECT_FALSE(pool.take(4)) << "all three are in a request";
    pool.set_idle(*b, true);
    pool.set_idle(*a, true);  // idle since later than b
    const auto d = pool.take(4);
    ASSERT_TRUE(d);
    EXPECT_EQ(evicted, std::vector<int>{2});
    pool.set_idle(*a, false);  // a request came on it
    EXPECT_FALSE(pool.take(5));
    pool.give_back(*a);
    EXPECT_TRUE(pool.take(5));
    EXPECT_EQ(pool.taken(), 3u);
    EXPECT_EQ(pool.evicted(), 1u);
}

}  // namespace
}  // namespace carma::http
