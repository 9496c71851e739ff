// Fingerprints of tasks: what counts as the same command and as the same family.

#include <gtest/gtest.h>

#include "core/fingerprint.h"

namespace carma {
namespace {

using Argv = std::vector<std::string>;

// This test verifies the hash against FNV-1a's published test vectors.
TEST(FingerprintTest, Fnv1aVectors) {
    EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
    EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
    EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

// This test verifies that the exact key changes with the owner, any argument and the GPU count,
// and only with them; and that it is 16 hex digits.
TEST(FingerprintTest, ExactIsOwnerArgvAndGpus) {
    const Argv cmd = {"python", "train.py", "--lr", "0.1"};
    const TaskFingerprint base = fingerprint_task(1000, cmd, 1);
    EXPECT_EQ(base.exact.size(), 16u);
    EXPECT_EQ(base.exact.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(fingerprint_task(1000, cmd, 1).exact, base.exact);
    EXPECT_NE(fingerprint_task(1001, cmd, 1).exact, base.exact);
    EXPECT_NE(fingerprint_task(1000, cmd, 2).exact, base.exact);
    EXPECT_NE(fingerprint_task(1000, {"python", "train.py", "--lr", "0.2"}, 1).exact, base.exact);
    // Argument boundaries count: "a b" is not "a" "b", and "" is an argument.
    EXPECT_NE(fingerprint_task(1000, {"x", "a b"}, 1).exact,
              fingerprint_task(1000, {"x", "a", "b"}, 1).exact);
    EXPECT_NE(fingerprint_task(1000, {"x"}, 1).exact, fingerprint_task(1000, {"x", ""}, 1).exact);
    EXPECT_NE(canonical_exact(1, {"ab"}, 1), canonical_exact(1, {"a", "b"}, 1));
}

// This test verifies the explicit environment's key: the order variables were given in does not
// matter, values and names do, none adds nothing (keys of runs from before it counted stay), and
// it changes the exact key but not the family.
TEST(FingerprintTest, ExplicitEnvironmentChangesTheExactKeyOnly) {
    using Vars = std::vector<std::pair<std::string, std::string>>;
    EXPECT_EQ(env_key({}), "");
    const std::string one = env_key(Vars{{"EPOCHS", "1"}, {"SEED", "7"}});
    EXPECT_EQ(one.size(), 16u);
    EXPECT_EQ(env_key(Vars{{"SEED", "7"}, {"EPOCHS", "1"}}), one);
    EXPECT_NE(env_key(Vars{{"EPOCHS", "90"}, {"SEED", "7"}}), one);
    EXPECT_NE(env_key(Vars{{"EPOCHS", "1"}, {"SEEDS", "7"}}), one);
    EXPECT_NE(env_key(Vars{{"EPOCHS", "17"}}), env_key(Vars{{"EPOCHS", "1"}, {"7", ""}}));
    const Argv cmd = {"python", "train.py"};
    const TaskFingerprint plain = fingerprint_task(1000, cmd, 1);
    EXPECT_EQ(fingerprint_task(1000, cmd, 1, "").exact, plain.exact);
    const TaskFingerprint with = fingerprint_task(1000, cmd, 1, one);
    EXPECT_NE(with.exact, plain.exact);
    EXPECT_EQ(with.family, plain.family);
}

// This test verifies that the family is owner + program + script + GPU count (issue 19, item
// 7): other arguments do not change it; another script, owner or GPU count does. A run on one
// GPU says little about what the same script needs per GPU on four.
TEST(FingerprintTest, FamilyIsOwnerProgramScriptAndGpus) {
    const TaskFingerprint a = fingerprint_task(1000, {"python", "train.py", "--lr", "0.1"}, 1);
    const TaskFingerprint b =
        fingerprint_task(1000, {"/usr/bin/python3.11", "./train.py", "--lr", "0.2"}, 1);
    EXPECT_NE(a.exact, b.exact);
    EXPECT_EQ(a.family, b.family);
    EXPECT_NE(fingerprint_task(1000, {"python", "train.py", "--lr", "0.1"}, 2).family, a.family);
    EXPECT_NE(fingerprint_task(1000, {"python", "eval.py"}, 1).family, a.family);
    EXPECT_NE(fingerprint_task(1001, {"python", "train.py"}, 1).family, a.family);
    EXPECT_NE(fingerprint_task(1000, {"torchrun", "train.py"}, 1).family, a.family);
}

// This test verifies that carma-fakejob's profile is part of its family (issue 19, item 7):
// fake jobs of different profiles are different workloads, of one profile with other run
// times the same.
TEST(FingerprintTest, FakeJobProfileIsItsScript) {
    const CommandFamily f = command_family(
        {"/opt/carma/bin/carma-fakejob", "--profile", "resnet3", "--duration-s", "60"});
    EXPECT_EQ(f.program, "carma-fakejob");
    EXPECT_EQ(f.script, "--profile resnet3");
    EXPECT_EQ(command_family({"carma-fakejob", "--duration-s", "9", "--profile=vgg"}).script,
              "--profile vgg");
    const auto family = [](const std::vector<std::string>& argv) {
        return fingerprint_task(1000, argv, 1).family;
    };
    EXPECT_NE(family({"carma-fakejob", "--profile", "resnet3"}),
              family({"carma-fakejob", "--profile", "vgg"}));
    EXPECT_EQ(family({"carma-fakejob", "--profile", "vgg", "--duration-s", "60"}),
              family({"carma-fakejob", "--duration-s", "30", "--profile", "vgg"}));
}

struct FamilyCase {
    const char* what;
    Argv argv;
    const char* program;
    const char* script;
};

// This test verifies how the program and the script are found in common command lines.
TEST(FingerprintTest, ProgramAndScript) {
    const FamilyCase cases[] = {
        {"interpreter and script", {"python3", "exp/train.py", "--bs", "64"}, "python",
         "exp/train.py"},
        {"module", {"python", "-u", "-m", "pkg.train", "--bs", "64"}, "python", "-m pkg.train"},
        {"launcher", {"torchrun", "--nproc_per_node", "4", "train.py"}, "torchrun", "train.py"},
        {"shell script", {"bash", "run.sh", "3"}, "bash", "run.sh"},
        {"script run directly", {"/home/a/exp/train.py", "--lr", "1"}, "train.py",
         "/home/a/exp/train.py"},
        {"env prefix", {"/usr/bin/env", "-u", "X", "CUDA_LAUNCH_BLOCKING=1", "python", "t.py"},
         "python", "t.py"},
        {"shell line", {"/bin/sh", "-c", "cd exp && OMP=1 python 'my train.py' --e 3"}, "python",
         "my train.py"},
        {"inline code", {"python", "-c", "import x; x.run('a.py')"}, "python", ""},
        {"compiled trainer", {"./trainer", "--config", "big"}, "trainer", ""},
        {"option values are not scripts", {"python", "--config=a.py", "b.py"}, "python", "b.py"},
        {"empty", {}, "", ""},
    };
    for (const FamilyCase& c : cases) {
        const CommandFamily f = command_family(c.argv);
        EXPECT_EQ(f.program, c.program) << c.what;
        EXPECT_EQ(f.script, c.script) << c.what;
    }
}

}  // namespace
}  // namespace carma
