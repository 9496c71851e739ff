// `carma submit SCRIPT` (issue 45): which file is a batch script, its interpreter, its leading
// #SBATCH lines as sbatch reads them, and --gres.

#include "cli/commands/batch_script.h"

#include <gtest/gtest.h>

#include "cli/commands/task_flags.h"

namespace carma::cli {
namespace {

// This test verifies sbatch's rule: directives are read up to the first command, blank lines
// and comments between them allowed, a trailing comment left out; later #SBATCH lines are
// comments.
TEST(BatchScriptTest, DirectivesStopAtTheFirstCommand) {
    const std::string text =
        "#!/bin/bash\n"
        "#SBATCH -J sweep\n"
        "\n"
        "# resources\n"
        "#SBATCH --gres=gpu:2 --time=1:00:00   # an hour\n"
        "#SBATCH -o \"logs/%x %j.out\"\n"
        "#SBATCHX not one\n"
        "echo start\n"
        "#SBATCH --mem=1GiB\n";
    auto s = read_batch_script(text, "train.sbatch");
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->interpreter, (std::vector<std::string>{"/bin/bash"}));
    ASSERT_EQ(s->directives.size(), 3u);
    EXPECT_EQ(s->directives[0].line, 2);
    EXPECT_EQ(s->directives[0].words, (std::vector<std::string>{"-J", "sweep"}));
    EXPECT_EQ(s->directives[1].words,
              (std::vector<std::string>{"--gres=gpu:2", "--time=1:00:00"}));
    EXPECT_EQ(s->directives[2].words, (std::vector<std::string>{"-o", "logs/%x %j.out"}));
}

// This test verifies the interpreter: the #! line's program and its one argument, bash without
// one; and which files are scripts.
TEST(BatchScriptTest, InterpreterAndWhichFilesAreScripts) {
    auto env = read_batch_script("#!/usr/bin/env python3\nprint(1)\n", "t.py");
    ASSERT_TRUE(env);
    EXPECT_EQ(env->interpreter, (std::vector<std::string>{"/usr/bin/env", "python3"}));
    auto bare = read_batch_script("echo hi\n", "run.sh");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->interpreter, (std::vector<std::string>{"bash"}));
    EXPECT_FALSE(bare->has_shebang);
    // No run bit needed, as sbatch: a shell script's name or a #! line is enough.
    EXPECT_TRUE(is_batch_script("run.sh", *bare, false));
    EXPECT_TRUE(is_batch_script("t.py", *env, false));
    // An executable without directives stays a command; with them it is a script.
    EXPECT_FALSE(is_batch_script("t.py", *env, true));
    auto with = read_batch_script("#!/bin/sh\n#SBATCH -t 5\ntrue\n", "job");
    ASSERT_TRUE(with);
    EXPECT_TRUE(is_batch_script("job", *with, true));
    // Neither runnable nor a script: the caller gives chmod advice.
    auto data = read_batch_script("x = 1\n", "train.py");
    ASSERT_TRUE(data);
    EXPECT_FALSE(is_batch_script("train.py", *data, false));
    EXPECT_EQ(directive_option("--partition=gpu"), "--partition");
    EXPECT_EQ(directive_option("-pgpu"), "-p");
}

// This test verifies sbatch's --gres: gpu:N counts N GPUs, a type or another resource is named
// as not used, a bad count is refused.
TEST(BatchScriptTest, GresGpus) {
    std::vector<std::string> notes;
    EXPECT_EQ(*parse_gres_flag("gpu:2", notes), 2);
    EXPECT_TRUE(notes.empty());
    EXPECT_EQ(*parse_gres_flag("gpu", notes), 1);
    EXPECT_EQ(*parse_gres_flag("gpu:a100:3", notes), 3);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("a100"), std::string::npos);
    notes.clear();
    EXPECT_EQ(*parse_gres_flag("gpu:1,nvme:1", notes), 1);
    EXPECT_EQ(notes.size(), 1u);
    EXPECT_FALSE(parse_gres_flag("gpu:a100:x", notes));
    EXPECT_FALSE(parse_gres_flag("nvme:1", notes));
}

}  // namespace
}  // namespace carma::cli
