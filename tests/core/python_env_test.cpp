// Activating a conda environment or a venv the way their activate scripts do.

#include <gtest/gtest.h>

#include "core/python_env.h"

namespace carma {
namespace {

std::string get(const EnvList& env, const std::string& name) {
    for (const auto& [k, v] : env) {
        if (k == name) {
            return v;
        }
    }
    return "<unset>";
}

TEST(PythonEnvTest, NothingToActivate) {
    const EnvList env = {{"PATH", "/usr/bin:/bin"}, {"PYTHONHOME", "/x"}};
    EXPECT_EQ(activate_python_env(env, "", ""), env);
}

TEST(PythonEnvTest, CondaEnvironmentByItsPrefix) {
    const EnvList env = activate_python_env({{"PATH", "/usr/bin:/bin"}},
                                            "/home/a/miniconda3/envs/tf", "");
    EXPECT_EQ(get(env, "PATH"), "/home/a/miniconda3/envs/tf/bin:/usr/bin:/bin");
    EXPECT_EQ(get(env, "CONDA_PREFIX"), "/home/a/miniconda3/envs/tf");
    EXPECT_EQ(get(env, "CONDA_DEFAULT_ENV"), "tf");
    EXPECT_EQ(get(env, "CONDA_SHLVL"), "1");
    EXPECT_EQ(get(env, "CONDA_PROMPT_MODIFIER"), "(tf) ");
    EXPECT_EQ(get(activate_python_env({{"PATH", "/bin"}}, "/opt/conda", ""), "CONDA_DEFAULT_ENV"),
              "base");
}

TEST(PythonEnvTest, TheEnvironmentActiveAtSubmitGivesWay) {
    // Submitted from a shell with `base` active: its bin leaves PATH, the asked one comes first.
    const EnvList env = activate_python_env(
        {{"PATH", "/opt/conda/bin:/usr/bin:/opt/conda/envs/tf/bin"}, {"CONDA_PREFIX", "/opt/conda"}},
        "/opt/conda/envs/tf", "");
    EXPECT_EQ(get(env, "PATH"), "/opt/conda/envs/tf/bin:/usr/bin");
    EXPECT_EQ(get(env, "CONDA_PREFIX"), "/opt/conda/envs/tf");
}

TEST(PythonEnvTest, VirtualEnvironment) {
    const EnvList env = activate_python_env(
        {{"PATH", "/old/venv/bin:/usr/bin"}, {"VIRTUAL_ENV", "/old/venv"}, {"PYTHONHOME", "/x"}},
        "", "/home/a/proj/.venv");
    EXPECT_EQ(get(env, "PATH"), "/home/a/proj/.venv/bin:/usr/bin");
    EXPECT_EQ(get(env, "VIRTUAL_ENV"), "/home/a/proj/.venv");
    EXPECT_EQ(get(env, "VIRTUAL_ENV_PROMPT"), "(.venv) ");
    EXPECT_EQ(get(env, "PYTHONHOME"), "<unset>");
}

}  // namespace
}  // namespace carma
