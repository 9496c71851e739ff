// The NODESxGPUSxTYPE form of a GPU set: "16x4xA100-40GB" is 16 nodes of 4 GPUs.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/gpu_type.h"

namespace carma::model {
namespace {

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// This test verifies that nodes x GPUs per node x type parses, names nodes n1.. in GPU order
// and prints back, and that the one-server form keeps no node names.
TEST(GpuSetNodesTest, ParsesNodesTimesGpus) {
    auto set = parse_gpu_set("16x4xA100-40GB");
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_EQ(set->count, 64);
    EXPECT_EQ(set->nodes, 16);
    EXPECT_EQ(set->per_node(), 4);
    EXPECT_EQ(set->type.name, "A100-40GB");
    EXPECT_EQ(set->text(), "16x4xA100-40GB");
    EXPECT_EQ(set->node_of(0), "n1");
    EXPECT_EQ(set->node_of(3), "n1");
    EXPECT_EQ(set->node_of(4), "n2");
    EXPECT_EQ(set->node_of(63), "n16");

    auto one = parse_gpu_set("1X8xh100-80gb");
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_EQ(one->count, 8);
    EXPECT_EQ(one->nodes, 1);
    EXPECT_EQ(one->text(), "1x8xH100-80GB");
    EXPECT_EQ(one->node_of(7), "n1");

    auto server = parse_gpu_set("4xA100-40GB");
    ASSERT_TRUE(server);
    EXPECT_EQ(server->nodes, 0);
    EXPECT_EQ(server->per_node(), 4);
    EXPECT_EQ(server->node_of(2), "");
    EXPECT_EQ(parse_gpu_set("32x32xA100-40GB")->count, 1024);
}

// This test verifies that each mistake in the nodes form gets an error that quotes the text and
// names the part at fault.
TEST(GpuSetNodesTest, ErrorsNameThePart) {
    const std::vector<std::pair<const char*, std::vector<std::string>>> table = {
        {"0x4xA100-40GB", {"'0x4xA100-40GB'", "node count", "1..1024"}},
        {"16x0xA100-40GB", {"'16x0xA100-40GB'", "GPUs per node", "1..1024"}},
        {"16x2000xA100-40GB", {"GPUs per node", "1..1024"}},
        {"64x32xA100-40GB", {"64 nodes x 32 GPUs is 2048 GPUs", "at most 1024"}},
        {"16x4xB200", {"unknown GPU type 'B200'", "A100-40GB"}},
        {"16x4x", {"unknown GPU type ''"}},
        {"4x16", {"unknown GPU type '16'"}},
        {"x4xA100-40GB", {"16x4xA100-40GB", "4xA100-40GB"}},
    };
    for (const auto& [text, parts] : table) {
        SCOPED_TRACE(text);
        auto parsed = parse_gpu_set(text);
        ASSERT_FALSE(parsed);
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
        for (const std::string& part : parts) {
            EXPECT_TRUE(contains(parsed.error().message, part))
                << "'" << part << "' not in: " << parsed.error().message;
        }
    }
}

}  // namespace
}  // namespace carma::model
