// The small text helpers of core/text.h that messages and scripts are built with.

#include <cerrno>

#include <gtest/gtest.h>

#include "core/text.h"

namespace carma {
namespace {

// This test verifies that shell quoting leaves plain words alone and quotes anything a shell
// would read otherwise, single quotes included.
TEST(ShellQuote, PlainWordsStayAndTheRestIsSingleQuoted) {
    EXPECT_EQ(shell_quote("plain-word_1.2:3,4@x%y"), "plain-word_1.2:3,4@x%y");
    EXPECT_EQ(shell_quote("two words"), "'two words'");
    EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
    EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
    EXPECT_EQ(shell_quote(""), "''");
}

// This test verifies that an errno value reads as its description, and an unknown one as its
// number.
TEST(ErrnoText, KnownAndUnknownValues) {
    EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
    EXPECT_EQ(errno_text(99999), "unknown error 99999");
}

// This test verifies the one cut of text at a byte limit: never inside a UTF-8 character, whole
// when it fits, and with the mark after a cut only.
TEST(Utf8Cut, CutsAtCharacterStartsAndMarksTheCut) {
    const std::string word = "na\xc3\xafve";  // "naïve": ï is two bytes, at 2 and 3
    EXPECT_EQ(utf8_prefix(word, 100), word);
    EXPECT_EQ(utf8_prefix(word, 3), "na") << "not half of the ï";
    EXPECT_EQ(utf8_prefix(word, 4), "na\xc3\xaf");
    EXPECT_EQ(utf8_prefix(word, 0), "");
    EXPECT_EQ(shortened(word, 6), word);
    EXPECT_EQ(shortened(word, 3), "na\u2026");
    EXPECT_EQ(shortened(word, 3, "..."), "na...");
}

}  // namespace
}  // namespace carma
