#include "core/controls.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the spellings a time limit may take and that each mistake is named.
TEST(ControlsTest, TimeLimits) {
    const std::vector<std::pair<const char*, double>> good = {
        {"45s", 45},        {"90m", 5400},         {"2h", 7200},   {"1h30m", 5400},
        {"2d", 172800},     {"1d12h", 129600},     {"2H", 7200},   {"10:00", 600},
        {"01:30:00", 5400}, {"1-00:00:00", 86400}, {" 3h ", 10800},
    };
    for (const auto& [text, seconds] : good) {
        auto v = parse_time_limit(text);
        ASSERT_TRUE(v) << text << ": " << v.error().message;
        EXPECT_DOUBLE_EQ(*v, seconds) << text;
    }
    for (const auto& [text, why] : std::vector<std::pair<const char*, const char*>>{
             {"", "empty"},
             {"2x", "needs a unit"},
             {"h", "not a duration"},
             {"0s", "is zero"},
             {"400d", "longer than a year"},
             {"1:75", "not a valid clock time"},
             {"-5m", "not a duration"}}) {
        auto v = parse_time_limit(text);
        ASSERT_FALSE(v) << text;
        EXPECT_NE(v.error().message.find(why), std::string::npos) << v.error().message;
        EXPECT_NE(v.error().message.find("HH:MM:SS"), std::string::npos) << v.error().message;
    }
}

// This test verifies every time format sbatch's --time takes, read as sbatch reads it: a bare
// number is minutes (`-t 100` was refused before), "days-hours" is days and hours.
TEST(ControlsTest, TimeLimitsAsSbatchWritesThem) {
    const std::vector<std::pair<const char*, double>> good = {
        {"100", 6000},                 // minutes
        {"90:30", 5430},               // minutes:seconds
        {"2:00:00", 7200},             // hours:minutes:seconds
        {"2-12", 216000},              // days-hours
        {"1-2:30", 95400},             // days-hours:minutes
        {"1-02:30:15", 95415},         // days-hours:minutes:seconds
    };
    for (const auto& [text, seconds] : good) {
        auto v = parse_time_limit(text);
        ASSERT_TRUE(v) << text << ": " << v.error().message;
        EXPECT_DOUBLE_EQ(*v, seconds) << text;
    }
    for (const auto& [text, why] : std::vector<std::pair<const char*, const char*>>{
             {"0", "is zero"},
             {"1.5", "MINUTES"},
             {"2-25", "not a valid clock time"},
             {"x-2", "not a valid clock time"},
             {"600000", "longer than a year"}}) {
        auto v = parse_time_limit(text);
        ASSERT_FALSE(v) << text;
        EXPECT_NE(v.error().message.find(why), std::string::npos) << v.error().message;
    }
}

// This test verifies array index sets: ranges, steps, lists, order, and the limits.
TEST(ControlsTest, ArrayIndices) {
    EXPECT_EQ(*parse_array_indices("0-3"), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(*parse_array_indices("0-20:5"), (std::vector<int>{0, 5, 10, 15, 20}));
    EXPECT_EQ(*parse_array_indices("7,1,3-4,3"), (std::vector<int>{1, 3, 4, 7}));
    EXPECT_EQ(*parse_array_indices("5"), (std::vector<int>{5}));
    for (const auto& [text, why] : std::vector<std::pair<const char*, const char*>>{
             {"", "is empty"},
             {"3-1", "ends before it starts"},
             {"a-b", "not an index"},
             {"0-9:0", "step"},
             {"0-20000", "more than 10000 members"},
             {"2000000", "index above"},
             {"1,,2", "not an index"}}) {
        auto v = parse_array_indices(text);
        ASSERT_FALSE(v) << text;
        EXPECT_NE(v.error().message.find(why), std::string::npos) << v.error().message;
    }
}

// This test verifies that a time limit is written in its largest whole unit, in a form the
// parser reads back to the same seconds: events and messages say the limit as it was typed.
TEST(TimeLimitText, LargestWholeUnitAndReadBack) {
    EXPECT_EQ(format_time_limit(7200), "2h");
    EXPECT_EQ(format_time_limit(5400), "90m");
    EXPECT_EQ(format_time_limit(45), "45s");
    EXPECT_EQ(format_time_limit(0), "0s");
    EXPECT_EQ(format_time_limit(2 * 86400), "2d");
    for (double s : {7200.0, 5400.0, 45.0, 90061.0, 172800.0}) {
        auto back = parse_time_limit(format_time_limit(s));
        ASSERT_TRUE(back) << s;
        EXPECT_EQ(*back, s);
    }
}

}  // namespace
}  // namespace carma
