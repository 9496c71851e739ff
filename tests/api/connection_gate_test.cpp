// Connection slots of the TCP and web listeners: authentication before resources (issue 18).

#include <vector>

#include <gtest/gtest.h>

#include "api/connection_gate.h"

namespace carma::api {
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
    ASSERT_TRUE(gate.promote(viewer));
    EXPECT_TRUE(viewer.authenticated);
    EXPECT_EQ(gate.authenticated(), 1u);
    EXPECT_EQ(gate.unauthenticated(), 3u);

    ConnectionGate::Ticket second = gate.enter(8);
    ASSERT_TRUE(gate.promote(second));
    ConnectionGate::Ticket third = gate.enter(9);
    EXPECT_FALSE(gate.promote(third)) << "two authenticated slots at most";
    EXPECT_FALSE(third.authenticated);

    gate.leave(viewer);
    EXPECT_EQ(gate.authenticated(), 1u);
    EXPECT_TRUE(gate.promote(third));
    for (const ConnectionGate::Ticket& t : slow) {
        gate.leave(t);  // evicted or not, leaving is safe
    }
    gate.leave(second);
    gate.leave(third);
    EXPECT_EQ(gate.authenticated(), 0u);
    EXPECT_EQ(gate.unauthenticated(), 0u);
    EXPECT_EQ(gate.evicted(), 57u);
}

}  // namespace
}  // namespace carma::api
