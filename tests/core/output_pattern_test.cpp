#include "core/output_pattern.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies sbatch's file-name codes as CARMA fills them, for an array member and for
// a lone task, with zero padding and %%.
TEST(OutputPatternTest, FillsSbatchCodes) {
    const OutputNames member{140, ArrayMember{138, 2}, "sweep", "alice"};
    EXPECT_EQ(expand_output_pattern("out-%j.log", member), "out-140.log");
    EXPECT_EQ(expand_output_pattern("%x/%A_%a.%u", member), "sweep/138_2.alice");
    EXPECT_EQ(expand_output_pattern("r%4a-%%j", member), "r0002-%j");
    const OutputNames lone{12, std::nullopt, "train", "bob"};
    EXPECT_EQ(expand_output_pattern("%A-%a-%j", lone), "12-0-12");
    EXPECT_EQ(expand_output_pattern("plain.txt", lone), "plain.txt");
}

// This test verifies that a pattern CARMA cannot fill is refused, naming the option and code.
TEST(OutputPatternTest, RefusesUnknownCodes) {
    EXPECT_TRUE(check_output_pattern("a-%j-%A_%a-%x-%u-%%.out", "--output"));
    EXPECT_TRUE(check_output_pattern("%05j", "--output"));
    for (const auto& [text, why] : std::vector<std::pair<const char*, const char*>>{
             {"", "is empty"},
             {"out-%N.log", "%N"},
             {"out-%", "unfinished"},
             {"out-%12", "unfinished"},
             {"%99j", "pads"}}) {
        auto r = check_output_pattern(text, "--error");
        ASSERT_FALSE(r) << text;
        EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("--error"), std::string::npos) << r.error().message;
    }
}

// This test verifies where an attempt's copies go: relative names against the workdir, stderr
// with stdout when only --output is given (as sbatch), only stderr with only --error.
TEST(OutputPatternTest, FilesOfAnAttempt) {
    const OutputNames lone{12, std::nullopt, "train", "bob"};
    const OutputFiles both = output_files("logs/%j.out", "", lone, "/home/bob/exp");
    EXPECT_EQ(both.stdout_path, "/home/bob/exp/logs/12.out");
    EXPECT_EQ(both.stderr_path, "/home/bob/exp/logs/12.out");
    const OutputFiles split = output_files("/tmp/o-%j", "../e-%j", lone, "/home/bob/exp");
    EXPECT_EQ(split.stdout_path, "/tmp/o-12");
    EXPECT_EQ(split.stderr_path, "/home/bob/e-12");
    const OutputFiles err = output_files("", "e.log", lone, "/w");
    EXPECT_EQ(err.stdout_path, "");
    EXPECT_EQ(err.stderr_path, "/w/e.log");
    EXPECT_EQ(output_files("", "", lone, "/w").stderr_path, "");
}

// This test verifies which directories are checked at submit: each pattern's directory part,
// filled with what is known before the task is stored, absolute against the workdir; a part
// that needs the id is left out, and one directory is checked once.
TEST(OutputPatternTest, DirectoriesCheckedAtSubmit) {
    auto dirs = [](std::string_view o, std::string_view e) {
        std::vector<std::string> out;
        for (const OutputDirectory& d : output_directories(o, e, "train", "alice", "/home/alice/exp")) {
            out.push_back(d.option + " " + d.dir);
        }
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(dirs("logs/%x-%j.out", ""), (V{"--output /home/alice/exp/logs"}));
    EXPECT_EQ(dirs("/root/out.log", ""), (V{"--output /root"}));
    EXPECT_EQ(dirs("out-%j.log", ""), (V{"--output /home/alice/exp"}));
    EXPECT_EQ(dirs("%x/%u/a.out", "../err/%x.err"),
              (V{"--output /home/alice/exp/train/alice", "--error /home/alice/err"}));
    EXPECT_EQ(dirs("logs/a.out", "logs/a.err"), (V{"--output /home/alice/exp/logs"}));
    EXPECT_EQ(dirs("run-%j/a.out", "%A_%a/b.err"), V{});  // known once stored
    EXPECT_EQ(dirs("", ""), V{});
}

}  // namespace
}  // namespace carma
