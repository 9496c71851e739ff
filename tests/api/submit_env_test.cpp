// The submitter's side of `carma submit`: --export, conda and venv resolution, the executable.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "api/submit_env.h"

namespace carma::api {
namespace {

namespace fs = std::filesystem;

TEST(ExportTest, AllNoneAndLists) {
    const EnvMap caller = {{"HOME", "/home/a"}, {"EPOCHS", "3"}, {"WANDB_API_KEY", "k"}};
    EXPECT_EQ(export_environment("ALL", caller)->vars, caller);
    EXPECT_TRUE(export_environment("NONE", caller)->vars.empty());
    EXPECT_TRUE(export_environment("none", caller)->vars.empty());
    EXPECT_EQ(export_environment("EPOCHS,MISSING", caller)->vars, (EnvMap{{"EPOCHS", "3"}}));
    EXPECT_EQ(export_environment("EPOCHS=5,LR=0.1", caller)->vars,
              (EnvMap{{"EPOCHS", "5"}, {"LR", "0.1"}}));
    auto all_plus = export_environment("ALL,EPOCHS=9", caller);
    ASSERT_TRUE(all_plus);
    EXPECT_EQ(all_plus->vars.at("EPOCHS"), "9");
    EXPECT_EQ(all_plus->vars.at("HOME"), "/home/a");
    for (const char* bad : {"", ",", "EPOCHS,ALL", "=3", "NONE,EPOCHS"}) {
        EXPECT_FALSE(export_environment(bad, caller)) << bad;
    }
}

TEST(ExportTest, WhoAndWhereAreNotExported) {
    const EnvMap caller = {{"CUDA_VISIBLE_DEVICES", "0"}, {"LD_PRELOAD", "/x.so"},
                           {"CARMA_SOCKET", "/s"},        {"CUDA_MPS_PIPE_DIRECTORY", "/p"},
                           {"CARMA_TASK_ID", "7"},
                           {"PWD", "/w"},                 {"SHLVL", "2"},
                           {"_", "/usr/bin/carma"},       {"BAD", std::string("\xff\xfe")},
                           {"KEEP", "1"}};
    auto e = export_environment("ALL", caller);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->vars, (EnvMap{{"KEEP", "1"}}));
    ASSERT_EQ(e->dropped.size(), 5u);  // PWD, SHLVL, _ and CARMA_SOCKET silently
    std::string all;
    for (const std::string& d : e->dropped) {
        all += d + "\n";
    }
    EXPECT_NE(all.find("CUDA_VISIBLE_DEVICES (CARMA sets which GPUs a task sees)"),
              std::string::npos) << all;
    EXPECT_NE(all.find("LD_PRELOAD (it would load code"), std::string::npos) << all;
    EXPECT_NE(all.find("BAD (its value is not UTF-8)"), std::string::npos) << all;
    EXPECT_NE(all.find("CARMA_TASK_ID (CARMA's own variables"), std::string::npos) << all;
    EXPECT_EQ(all.find("CARMA_SOCKET"), std::string::npos) << all;
    // Asked for by name: still not.
    EXPECT_TRUE(export_environment("LD_PRELOAD", caller)->vars.empty());
}

class CondaTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-conda-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        // The conda layout: <root>/bin/conda, <root>/envs/NAME/bin/python.
        fs::create_directories(dir_ / "root" / "bin");
        fs::create_directories(dir_ / "root" / "envs" / "tf" / "bin");
        std::ofstream(dir_ / "root" / "bin" / "conda") << "#!/bin/sh\n";
        fs::create_directories(dir_ / "home" / ".conda" / "envs" / "mine" / "bin");
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(CondaTest, NamesAreFoundWhereCondaKeepsThem) {
    const EnvMap caller = {{"CONDA_EXE", (dir_ / "root/bin/conda").string()},
                           {"HOME", (dir_ / "home").string()}};
    EXPECT_EQ(*resolve_conda("tf", caller, "/"), (dir_ / "root/envs/tf").string());
    EXPECT_EQ(*resolve_conda("base", caller, "/"), (dir_ / "root").string());
    EXPECT_EQ(*resolve_conda("mine", caller, "/"), (dir_ / "home/.conda/envs/mine").string());
    // From an active environment's prefix, without CONDA_EXE.
    const EnvMap active = {{"CONDA_PREFIX", (dir_ / "root/envs/tf").string()}};
    EXPECT_EQ(*resolve_conda("tf", active, "/"), (dir_ / "root/envs/tf").string());
    // By path, relative to the current directory.
    EXPECT_EQ(*resolve_conda("root/envs/tf", {}, dir_), (dir_ / "root/envs/tf").string());
}

TEST_F(CondaTest, MissingEnvironmentSaysWhereItLooked) {
    const EnvMap caller = {{"CONDA_EXE", (dir_ / "root/bin/conda").string()}};
    auto r = resolve_conda("torch", caller, "/");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("conda environment 'torch' not found (looked in " +
                                     (dir_ / "root/envs").string()),
              std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("conda create -n torch"), std::string::npos);
    auto p = resolve_conda("/no/such/env", caller, "/");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("conda environment /no/such/env does not exist"),
              std::string::npos)
        << p.error().message;
}

TEST_F(CondaTest, VenvNeedsItsMarks) {
    fs::create_directories(dir_ / "venv");
    std::ofstream(dir_ / "venv" / "pyvenv.cfg") << "home = /usr/bin\n";
    EXPECT_EQ(*resolve_venv("venv", dir_), (dir_ / "venv").string());
    auto r = resolve_venv("home", dir_);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("is not a Python virtual environment"), std::string::npos);
    EXPECT_NE(r.error().message.find("python3 -m venv"), std::string::npos);
}

TEST_F(CondaTest, CommandsAreFoundInThePathGiven) {
    const fs::path python = dir_ / "root/envs/tf/bin/python";
    std::ofstream(python) << "#!/bin/sh\n";
    fs::permissions(python, fs::perms::owner_all);
    const std::string path = (dir_ / "root/envs/tf/bin").string() + ":/usr/bin:/bin";
    EXPECT_EQ(*resolve_command("python", path), python.string());
    EXPECT_EQ(*resolve_command("sh", "/nonexistent:/bin"), "/bin/sh");
    EXPECT_EQ(*resolve_command("./run.sh", "/bin"), "./run.sh");
    auto r = resolve_command("no-such-program", "/usr/bin:/bin");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("command 'no-such-program' not found in your PATH "
                                     "(/usr/bin:/bin)"),
              std::string::npos)
        << r.error().message;
}

}  // namespace
}  // namespace carma::api
