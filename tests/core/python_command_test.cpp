#include "core/python_command.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

std::optional<std::string> script(std::vector<std::string> argv) {
    return python_script(argv);
}

// This test verifies which file a Python command line runs, past the interpreter's options, and
// that module, code and stdin runs have none.
TEST(PythonCommandTest, FindsTheScript) {
    EXPECT_EQ(script({"python3", "train.py", "--lr", "3"}), "train.py");
    EXPECT_EQ(script({"/opt/conda/bin/python3.11", "-u", "-W", "ignore", "t.py"}), "t.py");
    EXPECT_EQ(script({"python", "-OO", "-Xdev", "a/b.py"}), "a/b.py");
    EXPECT_EQ(script({"python", "-X", "dev", "--", "x.py"}), "x.py");
    EXPECT_EQ(script({"python3", "-m", "torch.distributed.run", "t.py"}), std::nullopt);
    EXPECT_EQ(script({"python3", "-uc", "print(1)"}), std::nullopt);
    EXPECT_EQ(script({"python3", "-"}), std::nullopt);
    EXPECT_EQ(script({"python3"}), std::nullopt);
    EXPECT_EQ(script({"torchrun", "t.py"}), std::nullopt);
    EXPECT_EQ(script({"python3-config", "--libs"}), std::nullopt);
    EXPECT_TRUE(is_python_interpreter("/usr/bin/python3.12"));
    EXPECT_FALSE(is_python_interpreter("pythonista"));
}

// This test verifies the name a task gets from its script.
TEST(PythonCommandTest, Stem) {
    EXPECT_EQ(script_stem("/home/alice/exp/train.py"), "train");
    EXPECT_EQ(script_stem("run"), "run");
    EXPECT_EQ(script_stem("v1.2/fine.tune.py"), "fine.tune");
    EXPECT_EQ(script_stem(".hidden"), ".hidden");
}

}  // namespace
}  // namespace carma
