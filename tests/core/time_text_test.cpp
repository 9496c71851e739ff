#include "core/time_text.h"

#include <cmath>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies the spans people write, alone and summed.
TEST(TimeTextTest, ParsesDurations) {
    struct Case {
        const char* text;
        double seconds;
    };
    const Case cases[] = {{"90s", 90},        {"15m", 900},     {"2h", 7200},
                          {"3d", 259200},     {"1w", 604800},   {"1.5h", 5400},
                          {"1h30m", 5400},    {" 2d ", 172800}, {"0s", 0}};
    for (const Case& c : cases) {
        auto got = parse_duration(c.text);
        ASSERT_TRUE(got) << c.text << ": " << got.error().message;
        EXPECT_DOUBLE_EQ(*got, c.seconds) << c.text;
    }
}

// This test verifies that a span is written in its largest whole unit and reads back the same.
TEST(TimeTextTest, FormatsDurationsThatReadBack) {
    EXPECT_EQ(format_duration(7 * 86400), "7d");
    EXPECT_EQ(format_duration(1.5 * 86400), "36h");
    EXPECT_EQ(format_duration(5400), "90m");
    EXPECT_EQ(format_duration(45), "45s");
    EXPECT_EQ(format_duration(0), "0s");
    EXPECT_EQ(format_duration(0.5), "0.5s");
    for (double s : {604800.0, 129600.0, 5400.0, 61.0, 0.5, 3723.0}) {
        auto back = parse_duration(format_duration(s));
        ASSERT_TRUE(back) << s;
        EXPECT_DOUBLE_EQ(*back, s);
    }
}

// This test verifies that a span without a unit, with an unknown unit or negative is refused
// with what to write instead.
TEST(TimeTextTest, RefusesBadDurations) {
    for (const char* bad : {"", "90", "2x", "h", "-2h", "2h30", "1..5h", "2 h"}) {
        auto got = parse_duration(bad);
        ASSERT_FALSE(got) << bad;
        EXPECT_EQ(got.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(got.error().message.find("2h"), std::string::npos) << got.error().message;
    }
}

// This test verifies UTC civil times against known unix times, leap days included.
TEST(TimeTextTest, UnixFromUtc) {
    EXPECT_EQ(unix_from_utc(CivilTime{1970, 1, 1, 0, 0, 0, true}), 0);
    EXPECT_EQ(unix_from_utc(CivilTime{2000, 3, 1, 0, 0, 0, true}), 951868800);
    EXPECT_EQ(unix_from_utc(CivilTime{2024, 2, 29, 12, 0, 0, true}), 1709208000);
    EXPECT_EQ(unix_from_utc(CivilTime{2026, 11, 29, 10, 0, 5, true}), 1795946405);
}

// A fixed zone two hours east of UTC, so local readings are checked without the machine's zone.
std::optional<double> utc_plus_two(const CivilTime& c) {
    CivilTime utc = c;
    utc.utc = true;
    return unix_from_utc(utc) - 7200;
}

// This test verifies the three ways of giving --since: a unix time, an ISO date or time (local
// unless it ends in Z) and how long ago.
TEST(TimeTextTest, ParsesTimePoints) {
    const double now = 1795946405;  // 2026-11-29T10:00:05Z
    struct Case {
        const char* text;
        double want;
    };
    const Case cases[] = {
        {"1764441600", 1764441600},
        {"1764441600.5", 1764441600.5},
        {"2026-11-29T10:00:05Z", now},
        {"2026-11-29 10:00:05z", now},
        {"2026-11-29T10:00Z", now - 5},
        {"2026-11-29Z", now - 36005},
        {"2026-11-29T12:00:05", now},  // local = UTC+2
        {"2026-11-29", now - 36005 - 7200},
        {"2h", now - 7200},
        {"3d", now - 3 * 86400},
        {"1h30m", now - 5400},
    };
    for (const Case& c : cases) {
        auto got = parse_time_point(c.text, now, utc_plus_two);
        ASSERT_TRUE(got) << c.text << ": " << got.error().message;
        EXPECT_DOUBLE_EQ(*got, c.want) << c.text;
    }
}

// This test verifies that impossible dates, malformed times and words are refused, the message
// saying what may be written.
TEST(TimeTextTest, RefusesBadTimePoints) {
    for (const char* bad : {"", "yesterday", "2026-13-01", "2026-02-30", "2026-11-29T25:00",
                            "2026-11-29T10", "2026-11-29T10:00:05+02:00", "2026/11/29", "-5",
                            "12:00"}) {
        auto got = parse_time_point(bad, 1e9, utc_plus_two);
        ASSERT_FALSE(got) << bad;
        EXPECT_EQ(got.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(got.error().message.find("2026-11-29"), std::string::npos)
            << got.error().message;
    }
    // A zone that cannot place the time: the message says to use UTC.
    auto no_zone = parse_time_point("2026-11-29", 1e9, [](const CivilTime&) {
        return std::optional<double>();
    });
    ASSERT_FALSE(no_zone);
    EXPECT_NE(no_zone.error().message.find("Z"), std::string::npos);
}

// This test verifies that durations are shown in the unit their magnitude reads best in: a
// five-minute window in minutes (it read "0.07 h"), a day in hours, half a minute in seconds.
TEST(TimeTextTest, DurationUnitFollowsTheLargestFigure) {
    EXPECT_EQ(duration_unit_for(0).symbol, "s");
    EXPECT_EQ(duration_unit_for(30).symbol, "s");
    EXPECT_EQ(duration_unit_for(119.9).symbol, "s");
    EXPECT_EQ(duration_unit_for(120).symbol, "min");
    EXPECT_EQ(duration_unit_for(300).symbol, "min");
    EXPECT_DOUBLE_EQ(duration_unit_for(300).seconds, 60);
    EXPECT_EQ(duration_unit_for(300).word, "minutes");
    EXPECT_EQ(duration_unit_for(7199).symbol, "min");
    EXPECT_EQ(duration_unit_for(7200).symbol, "h");
    EXPECT_EQ(duration_unit_for(86400).word, "hours");
    EXPECT_DOUBLE_EQ(duration_unit_for(86400).seconds, 3600);
    EXPECT_EQ(duration_unit_for(std::nan("")).symbol, "s");
}

}  // namespace
}  // namespace carma
