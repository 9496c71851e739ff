// The environment an attempt starts with and its MPS memory limits (daemon/task_environment.h),
// without a daemon.

#include <algorithm>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/task_environment.h"

namespace carma::daemon {
namespace {

using testing::Contains;
using testing::Key;
using testing::Not;
using testing::Pair;

store::TaskRow task_of(const std::string& user) {
    store::TaskRow t;
    t.id = 42;
    t.user = user;
    return t;
}

// The last value of each variable: what a process started with the list sees.
std::map<std::string, std::string> as_map(const EnvList& env) {
    std::map<std::string, std::string> m;
    for (const auto& [k, v] : env) {
        m[k] = v;
    }
    return m;
}

TEST(TaskEnvironment, DeclaredFirstThenAccountDefaultsThenWhatCarmaSets) {
    store::TaskRow t = task_of("alice");
    t.env = {{"PATH", "/opt/bin"}, {"CUDA_VISIBLE_DEVICES", "0"}, {"CARMA_TASK_ID", "7"},
             {"CUDA_MPS_PIPE_DIRECTORY", "/elsewhere"}, {"HOME", "/scratch/alice"}};
    AttemptPlace place;
    place.gpu_uuids = {"GPU-a", "GPU-b"};
    place.attempt = 2;
    place.home = "/home/alice";
    place.shell = "/bin/zsh";
    place.backend_env = {{"CARMA_EMULATOR_FILE", "/state/emulator.json"}};
    const EnvList env = task_environment(t, place);
    const auto m = as_map(env);
    EXPECT_EQ(m.at("PATH"), "/opt/bin");           // declared wins over the default
    EXPECT_EQ(m.at("HOME"), "/scratch/alice");     // declared wins over the account
    EXPECT_EQ(m.at("SHELL"), "/bin/zsh");          // the account fills what was left out
    EXPECT_EQ(m.at("USER"), "alice");
    EXPECT_EQ(m.at("LOGNAME"), "alice");
    // Where it runs and who it is are CARMA's, whatever was declared, each set once.
    EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
    EXPECT_EQ(m.at("CARMA_TASK_ID"), "42");
    EXPECT_EQ(m.at("CARMA_ATTEMPT"), "2");
    EXPECT_EQ(m.at("CARMA_EMULATOR_FILE"), "/state/emulator.json");
    EXPECT_EQ(std::count_if(env.begin(), env.end(),
                            [](const auto& kv) { return kv.first == "CUDA_VISIBLE_DEVICES"; }),
              1);
    EXPECT_THAT(m, Not(Contains(Key("CUDA_MPS_PIPE_DIRECTORY"))));  // no --mps
    EXPECT_THAT(m, Not(Contains(Key("CARMA_TIME_SCALE"))));         // real time
    EXPECT_THAT(m, Not(Contains(Key("CARMA_ARRAY_ID"))));
}

TEST(TaskEnvironment, WithoutAnAccountThePathDefaultsAndNoHomeIsMadeUp) {
    const auto m = as_map(task_environment(task_of("1234"), AttemptPlace{}));
    EXPECT_EQ(m.at("PATH"), kDefaultPath);
    EXPECT_THAT(m, Not(Contains(Key("HOME"))));
    EXPECT_THAT(m, Not(Contains(Key("SHELL"))));
}

TEST(TaskEnvironment, ArrayMembersAndTimeScaleAreSaid) {
    store::TaskRow t = task_of("bob");
    t.spec.array = ArrayMember{40, 3};
    AttemptPlace place;
    place.time_scale = 60;
    const auto m = as_map(task_environment(t, place));
    EXPECT_EQ(m.at("CARMA_ARRAY_ID"), "40");
    EXPECT_EQ(m.at("CARMA_ARRAY_INDEX"), "3");
    EXPECT_EQ(m.at("CARMA_TIME_SCALE"), "60");
}

TEST(TaskEnvironment, AVenvGoesFirstOnPath) {
    store::TaskRow t = task_of("carol");
    t.spec.venv = "/home/carol/venv";
    const auto m = as_map(task_environment(t, AttemptPlace{}));
    EXPECT_EQ(m.at("VIRTUAL_ENV"), "/home/carol/venv");
    EXPECT_EQ(m.at("PATH").rfind("/home/carol/venv/bin:", 0), 0u) << m.at("PATH");
}

TEST(TaskEnvironment, AnMpsClientGetsItsControlDaemonAndLimits) {
    AttemptPlace place;
    place.mps_pipe_dir = "/state/mps/0";
    place.mps_limits = {MpsMemLimit{"0", 12288}};
    const EnvList env = task_environment(task_of("dave"), place);
    EXPECT_THAT(env, Contains(Pair("CUDA_MPS_PIPE_DIRECTORY", "/state/mps/0")));
    EXPECT_THAT(as_map(env), Contains(Key("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")));
}

TEST(TaskEnvironment, ATaskOutsideMpsIsPointedWhereNoControlDaemonRuns) {
    AttemptPlace place;
    place.mps_off_dir = "/state/no-mps";
    const auto m = as_map(task_environment(task_of("erin"), place));
    EXPECT_EQ(m.at("CUDA_MPS_PIPE_DIRECTORY"), "/state/no-mps");
    EXPECT_THAT(m, Not(Contains(Key("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"))));
}

TEST(MpsMemoryLimits, NeedPlusMarginPerOrdinalSaturatingAtTheGpusMemory) {
    TaskSpec spec;
    spec.memory.declared_mib = 10000;
    PolicySpec policy;
    policy.knowledge = MemoryKnowledge::None;  // what the user declared
    const auto limits =
        mps_memory_limits(spec, policy, Estimator::Horus, false, {40000, 11000}, 2048);
    ASSERT_EQ(limits.size(), 2u);
    EXPECT_EQ(limits[0], (MpsMemLimit{"0", 12048}));
    EXPECT_EQ(limits[1], (MpsMemLimit{"1", 11000}));  // need + margin past the GPU: the GPU
}

TEST(MpsMemoryLimits, NoneForARecoveredAttemptOrAnUnknownNeed) {
    TaskSpec spec;
    spec.memory.declared_mib = 10000;
    PolicySpec policy;
    policy.knowledge = MemoryKnowledge::None;
    EXPECT_TRUE(mps_memory_limits(spec, policy, Estimator::Horus, true, {40000}, 2048).empty());
    EXPECT_TRUE(
        mps_memory_limits(TaskSpec{}, policy, Estimator::Horus, false, {40000}, 2048).empty());
}

}  // namespace
}  // namespace carma::daemon
