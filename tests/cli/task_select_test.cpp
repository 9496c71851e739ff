#include "cli/commands/task_select.h"

#include "cli/commands/client_common.h"

#include <gtest/gtest.h>

namespace carma::cli {
namespace {

using nlohmann::json;

json listed() {
    return json::parse(R"([
        {"id": 3, "user": "ana", "state": "running", "array": null},
        {"id": 4, "user": "ana", "state": "queued", "array": {"id": 4, "index": 0}},
        {"id": 5, "user": "ana", "state": "queued", "array": {"id": 4, "index": 1}},
        {"id": 6, "user": "bo", "state": "held", "array": {"id": 4, "index": 2}},
        {"id": 7, "user": "bo", "state": "queued"}
    ])");
}

// What is sent to the daemon, as written.
std::vector<std::string> pick(std::vector<std::string> words,
                              std::vector<std::string> users = {},
                              std::vector<std::string> states = {}) {
    TaskFilter f;
    for (const std::string& w : words) {
        f.refs.push_back(*parse_task_ref(w));
    }
    f.users = std::move(users);
    f.states = std::move(states);
    std::vector<std::string> out;
    for (const TaskRef& r : select_tasks(listed(), f)) {
        out.push_back(format_task_ref(r));
    }
    return out;
}

using Words = std::vector<std::string>;

// This test verifies how ids, array members, whole arrays, users and states select tasks.
TEST(TaskSelectTest, Selects) {
    EXPECT_EQ(pick({"3", "7"}), (Words{"3", "7"}));
    EXPECT_EQ(pick({"4_*"}), (Words{"4", "5", "6"}));
    EXPECT_EQ(pick({"4_1"}), (Words{"5"}));
    EXPECT_EQ(pick({}, {"ana"}), (Words{"3", "4", "5"}));
    EXPECT_EQ(pick({}, {}, {"queued"}), (Words{"4", "5", "7"}));
    EXPECT_EQ(pick({"4_*"}, {"bo"}), (Words{"6"}));
    EXPECT_EQ(pick({"4_1"}, {"bo"}), (Words{}));
    EXPECT_EQ(pick({}, {"bo"}, {"held", "queued"}), (Words{"6", "7"}));
    // A finished task or member is not listed: it goes to the daemon as written, which answers
    // for it.
    EXPECT_EQ(pick({"1", "3", "9_2"}), (Words{"3", "1", "9_2"}));
    EXPECT_TRUE(pick({"9_*"}).empty());
}

// This test verifies that an ordinary user's bulk operation without ids or --user acts on the
// user's own tasks (`carma cancel --state queued` as bo errored on ana's), while root's keeps
// meaning everyone's, and naming others (ids, --user) is left as written.
TEST(TaskSelectTest, OrdinaryUsersBulkOperationsAreTheirOwn) {
    TaskFilter by_state{{}, {}, {"queued"}};
    TaskFilter as_root = by_state;
    default_to_own_tasks(by_state, false, "bo");
    EXPECT_EQ(by_state.users, (Words{"bo"}));
    Words picked;
    for (const TaskRef& r : select_tasks(listed(), by_state)) {
        picked.push_back(format_task_ref(r));
    }
    EXPECT_EQ(picked, (Words{"7"}));
    default_to_own_tasks(as_root, true, "root");
    EXPECT_TRUE(as_root.users.empty());

    TaskFilter named_user{{}, {"ana"}, {"queued"}};
    default_to_own_tasks(named_user, false, "bo");
    EXPECT_EQ(named_user.users, (Words{"ana"}));
    TaskFilter named_ids{{*parse_task_ref("4_*")}, {}, {}};
    default_to_own_tasks(named_ids, false, "bo");
    EXPECT_TRUE(named_ids.users.empty());
}

// This test verifies that malformed ids and an empty selection are refused
// with what to write instead.
TEST(TaskSelectTest, Refuses) {
    for (const char* word : {"", "x", "0", "12_", "12_x", "-3", "12_*_1"}) {
        auto r = parse_task_ref(word);
        ASSERT_FALSE(r) << word;
        EXPECT_NE(r.error().message.find("12_*"), std::string::npos);
    }
    auto none = check_filter(TaskFilter{});
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message.find("--user"), std::string::npos);
    EXPECT_TRUE(needs_task_list(TaskFilter{{*parse_task_ref("4_*")}, {}, {}}));
    EXPECT_FALSE(needs_task_list(TaskFilter{{*parse_task_ref("4")}, {}, {}}));
    // A member goes to the daemon, which knows 4_1 (GET /v1/tasks/4_1).
    EXPECT_FALSE(needs_task_list(TaskFilter{{*parse_task_ref("4_1")}, {}, {}}));
}

// This test verifies that a bulk cancel names a refused task once: before, `carma cancel --user
// bob` printed "task 2: task 2 belongs to bob; ...".
TEST(TaskSelectTest, FailureLineNamesTheTaskOnce) {
    EXPECT_EQ(task_failure_line(TaskRef::of(2), "task 2 belongs to bob; only its owner or root may "
                                                "cancel it"),
              "task 2 belongs to bob; only its owner or root may cancel it");
    EXPECT_EQ(task_failure_line(TaskRef::of(2), "the daemon is busy"),
              "task 2: the daemon is busy");
    EXPECT_EQ(task_failure_line(TaskRef::of(2), "task 21 belongs to bob"),
              "task 2: task 21 belongs to bob");
}

// This test verifies that `carma logs -f` says why the attempt before ended where it starts the
// next one's log: before, it printed "--- attempt 2 ---" and left the out-of-memory crash
// unsaid.
TEST(TaskSelectTest, AttemptSeparatorSaysWhyThePreviousEnded) {
    const json task = json::parse(R"({"id": 5, "name": "train", "attempt_list": [
        {"number": 1, "outcome": "out-of-memory"}, {"number": 2, "outcome": ""}]})");
    EXPECT_EQ(attempt_separator(task, 2),
              "--- attempt 2 of task 5 (train) (attempt 1 ran out of GPU memory; relaunched on "
              "idle GPUs) ---");
    EXPECT_EQ(attempt_separator(json::parse(R"({"id": 5, "name": "train"})"), 2),
              "--- attempt 2 of task 5 (train) ---");
}

}  // namespace
}  // namespace carma::cli
