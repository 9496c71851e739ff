#include "core/failure_reason.h"

#include <string>

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies that the reason is the line that names the error: after a Python
// traceback its last line, past blank lines, `^^^^` markers and a progress bar's earlier
// drawings; and the interpreter's own complaint about a missing script.
TEST(FailureReasonTest, TakesTheLineThatNamesTheError) {
    EXPECT_EQ(last_meaningful_line("Traceback (most recent call last):\n"
                                   "  File \"/x/train.py\", line 1, in <module>\n"
                                   "    import torch\n"
                                   "ModuleNotFoundError: No module named 'torch'\n\n"),
              "ModuleNotFoundError: No module named 'torch'");
    EXPECT_EQ(last_meaningful_line("python3: can't open file '/x/train.py': [Errno 2] No such "
                                   "file or directory\n"),
              "python3: can't open file '/x/train.py': [Errno 2] No such file or directory");
    EXPECT_EQ(last_meaningful_line("  File \"/x/t.py\", line 3, in <module>\n    x = f(y)\n"
                                   "        ^^^^^^\nValueError: bad shape\n  \n"),
              "ValueError: bad shape");
    EXPECT_EQ(last_meaningful_line("Killed\n  File \"/x/t.py\", line 3\n"), "Killed");
    EXPECT_EQ(last_meaningful_line("epoch 1: 10%\repoch 1: 50%\r\n----\n"), "epoch 1: 50%");
    EXPECT_EQ(last_meaningful_line("\x1b[31mRuntimeError\x1b[0m: CUDA error\n"),
              "RuntimeError: CUDA error");
    EXPECT_EQ(last_meaningful_line("\xe2\x95\xad\xe2\x94\x80\xe2\x95\xae\nErreur : fichier "
                                   "manquant\n\xe2\x95\xb0\xe2\x94\x80\xe2\x95\xaf\n"),
              "Erreur : fichier manquant");
}

// This test verifies that nothing is made up when stderr says nothing, and that a long line is
// cut on a character boundary.
TEST(FailureReasonTest, EmptyAndLong) {
    EXPECT_EQ(last_meaningful_line(""), "");
    EXPECT_EQ(last_meaningful_line("\n  \n^^^\n"), "");
    const std::string long_line(300, 'a');
    EXPECT_EQ(last_meaningful_line(long_line).size(), kMaxFailureReasonBytes + 3);
    std::string accents;
    for (int i = 0; i < 150; ++i) {
        accents += "\xc3\xa9";  // é, two bytes: the cut at 200 must not split one
    }
    const std::string cut = last_meaningful_line(accents);
    EXPECT_EQ(cut, accents.substr(0, kMaxFailureReasonBytes) + "...");
}

// This test verifies that a fenced task's denials are named from its stderr: a GPU device file
// it may not open, and forks past its process limit; other errors name none.
TEST(FailureReasonTest, FenceDenialsAreNamed) {
    EXPECT_NE(fence_denial("PermissionError: [Errno 1] Operation not permitted: '/dev/nvidia1'")
                  .find("GPU device file"),
              std::string::npos);
    EXPECT_NE(fence_denial("sh: fork: Resource temporarily unavailable").find("host.pids_max"),
              std::string::npos);
    EXPECT_NE(fence_denial("RuntimeError: can't start new thread").find("processes and threads"),
              std::string::npos);
    EXPECT_EQ(fence_denial("ModuleNotFoundError: No module named 'torch'"), "");
    EXPECT_EQ(fence_denial("open /etc/shadow: Operation not permitted"), "");
}

}  // namespace
}  // namespace carma
