#include "core/csv.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that a header, rows, comments and blank lines are read.
TEST(CsvTest, ReadsHeaderAndRows) {
    auto t = parse_csv("a,b\n# comment\n1, x \n\n2,y\r\n", "test.csv");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->header, (std::vector<std::string>{"a", "b"}));
    ASSERT_EQ(t->rows.size(), 2u);
    EXPECT_EQ(t->rows[0][1], "x");
    EXPECT_EQ(t->rows[1][1], "y");
    EXPECT_EQ(t->line_numbers[0], 3);
    EXPECT_EQ(t->column("b"), 1);
    EXPECT_EQ(t->column("c"), -1);
}

// This test verifies that bad CSV is reported with the source and line.
TEST(CsvTest, ReportsBadRowsWithLine) {
    auto short_row = parse_csv("a,b\n1\n", "trace.csv");
    ASSERT_FALSE(short_row);
    EXPECT_NE(short_row.error().message.find("trace.csv line 2"), std::string::npos);
    auto quoted = parse_csv("a\n\"x\"\n", "q.csv");
    ASSERT_FALSE(quoted);
    EXPECT_NE(quoted.error().message.find("quoted"), std::string::npos);
    EXPECT_FALSE(parse_csv("", "empty.csv"));

    auto t = parse_csv("n\nabc\n", "num.csv");
    ASSERT_TRUE(t);
    auto n = csv_number(*t, 0, 0, "num.csv");
    ASSERT_FALSE(n);
    EXPECT_NE(n.error().message.find("column 'n' must be a number, got 'abc'"), std::string::npos);
}

}  // namespace
}  // namespace carma
