#include "core/node_name.h"

#include <string>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the one rule for node names (issue 44): "." and ".." are refused, since a
// node's name becomes a directory of its attempts' remote logs; so are the empty name, names
// over 255 characters and any character outside [A-Za-z0-9._-]. Dots inside a name stay fine.
TEST(NodeNameTest, DotsAloneAndPathCharactersAreRefused) {
    for (const char* bad : {"", ".", "..", "a/b", "../n1", "n 1", "n1\n", "\xc3\xa9"}) {
        EXPECT_FALSE(valid_node_name(bad)) << bad;
    }
    for (const char* good : {"n1", "gpu-node.cluster.local", "...", ".hidden", "a..b", "N_7"}) {
        EXPECT_TRUE(valid_node_name(good)) << good;
    }
    EXPECT_TRUE(valid_node_name(std::string(255, 'n')));
    EXPECT_FALSE(valid_node_name(std::string(256, 'n')));
}

}  // namespace
}  // namespace carma
