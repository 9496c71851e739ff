#include "core/dependency.h"

#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

using enum DependencyType;

// This test verifies sbatch's --dependency as CARMA reads it: the three types, several ids per
// type, several types joined by ',', array members and whole arrays.
TEST(DependencyTest, ReadsSbatchSpellings) {
    auto d = parse_dependency_spec("afterok:12:13,afterany:14_2,afternotok:15_*");
    ASSERT_TRUE(d) << d.error().message;
    const std::vector<Dependency> want = {{AfterOk, {12, std::nullopt, false}},
                                          {AfterOk, {13, std::nullopt, false}},
                                          {AfterAny, {14, 2, false}},
                                          {AfterNotOk, {15, std::nullopt, true}}};
    EXPECT_EQ(*d, want);
    EXPECT_EQ(format_dependency(want[2]), "afterany:14_2");
    EXPECT_EQ((*parse_dependency_spec("AfterOK:7"))[0].type, AfterOk);
    // --after: CARMA's spelling of afterok, ':' or ',' between ids.
    EXPECT_EQ(*parse_after_list("12:13_1"),
              (std::vector<Dependency>{{AfterOk, {12, std::nullopt, false}}, {AfterOk, {13, 1, false}}}));
    EXPECT_EQ(parse_after_list("12,13")->size(), 2u);
    // Slurm's singleton names no task; the daemon resolves it at submit.
    auto single = parse_dependency_spec("afterok:12,singleton");
    ASSERT_TRUE(single) << single.error().message;
    ASSERT_EQ(single->size(), 2u);
    EXPECT_EQ((*single)[1].type, DependencyType::Singleton);
    EXPECT_EQ(format_dependency((*single)[1]), "singleton");
    EXPECT_EQ(describe_waiting(*single), "waits for task(s) 12 to succeed");
}

// This test verifies that what CARMA does not do is refused, naming it and what it takes.
TEST(DependencyTest, RefusesWhatItDoesNotDo) {
    for (const auto& [text, why] : std::vector<std::pair<const char*, const char*>>{
             {"", "is empty"},
             {"afterok", "without a task id"},
             {"afterok:x", "not a task"},
             {"afterok:12?afterany:13", "'?'"},
             {"singleton:12", "singleton takes none"},
             {"after:12", "afterany waits"},
             {"aftercorr:12", "'aftercorr'"},
             {"afterok:12+30", "delay"}}) {
        auto d = parse_dependency_spec(text);
        ASSERT_FALSE(d) << text;
        EXPECT_NE(d.error().message.find(why), std::string::npos) << d.error().message;
        EXPECT_NE(d.error().message.find("afternotok"), std::string::npos) << d.error().message;
    }
    EXPECT_FALSE(parse_after_list(""));
    EXPECT_FALSE(parse_after_list("12:x"));
}

// This test verifies what the ends of the named tasks mean for each type: afterok needs every
// one to succeed and is never satisfied once one did not; afterany needs every one ended;
// afternotok needs every one ended and one unsuccessful, and is never satisfied when all
// succeeded.
TEST(DependencyTest, JudgesEachType) {
    using enum TargetEnd;
    using enum DependencyVerdict;
    const std::vector<TargetEnd> running = {Succeeded, NotYet};
    const std::vector<TargetEnd> ok = {Succeeded, Succeeded};
    const std::vector<TargetEnd> one_failed = {Succeeded, Unsuccessful, NotYet};
    const std::vector<TargetEnd> ended_badly = {Succeeded, Unsuccessful};

    EXPECT_EQ(judge_dependency(AfterOk, running).verdict, Waiting);
    EXPECT_EQ(judge_dependency(AfterOk, ok).verdict, Satisfied);
    const DependencyJudgement never = judge_dependency(AfterOk, one_failed);
    EXPECT_EQ(never.verdict, Never);
    EXPECT_EQ(never.decided_by, 1u);

    EXPECT_EQ(judge_dependency(AfterAny, running).verdict, Waiting);
    EXPECT_EQ(judge_dependency(AfterAny, one_failed).verdict, Waiting);
    EXPECT_EQ(judge_dependency(AfterAny, ended_badly).verdict, Satisfied);

    EXPECT_EQ(judge_dependency(AfterNotOk, one_failed).verdict, Waiting);
    EXPECT_EQ(judge_dependency(AfterNotOk, ended_badly).verdict, Satisfied);
    EXPECT_EQ(judge_dependency(AfterNotOk, ok).verdict, Never);
}

// This test verifies the message of a task that waits: each type's tasks in one clause.
TEST(DependencyTest, SaysWhatItWaitsFor) {
    const std::vector<Dependency> deps = {{AfterOk, {12, std::nullopt, false}},
                                          {AfterAny, {14, 2, false}},
                                          {AfterOk, {13, std::nullopt, true}},
                                          {AfterNotOk, {15, std::nullopt, false}}};
    EXPECT_EQ(describe_waiting(deps),
              "waits for task(s) 12, 13_* to succeed; 14_2 to end; 15 to end without succeeding");
}

}  // namespace
}  // namespace carma
