#include "core/task_ref.h"

#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the three ways to name tasks (12, 12_3, 12_*), read and written back, and
// that anything else is refused with the three spellings.
TEST(TaskRefTest, ReadsAndWritesIdsMembersAndArrays) {
    EXPECT_EQ(*parse_task_ref("12"), (TaskRef{12, std::nullopt, false}));
    EXPECT_EQ(*parse_task_ref("106_5"), (TaskRef{106, 5, false}));
    EXPECT_EQ(*parse_task_ref("106_*"), (TaskRef{106, std::nullopt, true}));
    for (const char* word : {"12", "106_5", "106_*", "7_0"}) {
        EXPECT_EQ(format_task_ref(*parse_task_ref(word)), word);
    }
    for (const char* word : {"", "0", "-1", "x", "12_", "_3", "12_x", "12_3_4", "12_-1",
                             "99999999999999999999", "12_99999999999"}) {
        auto r = parse_task_ref(word);
        ASSERT_FALSE(r) << word;
        EXPECT_NE(r.error().message.find("12_3"), std::string::npos) << r.error().message;
    }
}

// This test verifies the one way views write ids: a lone task by its id, an array member as
// ARRAY_INDEX, an array's listed members as squeue's ARRAY_[ranges].
TEST(TaskRefTest, ViewsWriteIdsOneWay) {
    EXPECT_EQ(format_task_id(12, std::nullopt), "12");
    EXPECT_EQ(format_task_id(140, ArrayMember{138, 2}), "138_2");
    const std::vector<std::int64_t> indices = {0, 1, 2, 3, 7, 9, 10};
    EXPECT_EQ(format_array_ids(138, indices), "138_[0-3,7,9-10]");
    const std::vector<std::int64_t> one = {5};
    EXPECT_EQ(format_array_ids(138, one), "138_5");
}

}  // namespace
}  // namespace carma
