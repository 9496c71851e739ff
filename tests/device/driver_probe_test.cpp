// The probe `--gpus auto` asks before it may choose emulated GPUs (device/backend_choice.h): whether an
// NVIDIA driver is meant to be on this machine. The tests give it a directory of their own as
// the root and a stub for dlopen, so the answer does not depend on the machine they run on.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "device/backend_choice.h"
#include "device/dcgm.h"
#include "device/nvml.h"

#ifndef CARMA_FAKE_NVML_PATH
#error "CARMA_FAKE_NVML_PATH must name the fake NVML library"
#endif

namespace carma::device {
namespace {

namespace fs = std::filesystem;

class DriverProbeTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-driver-probe-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        root_ = tmpl;
        probe_.root = root_;
        probe_.loads = [this](const std::string& name) { return loadable_ == name; };
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
        ::unsetenv(kNvmlLibraryEnv);
        ::unsetenv(kDcgmLibraryEnv);
        ::unsetenv("FAKE_NVML_FAIL_INIT");
    }

    std::string root_;
    std::string loadable_;  // the one library name the stub says loads
    DriverProbe probe_;
};

// This test verifies that nothing found means no driver is meant to be here.
TEST_F(DriverProbeTest, NothingFoundMeansNoDriver) {
    EXPECT_EQ(nvidia_driver_expected(probe_), "");
}

// This test verifies each sign on its own: the control device, the driver's /proc directory,
// libnvidia-ml.so.1 loading, and a library named by either variable (loaded or not).
TEST_F(DriverProbeTest, EachSignMeansADriver) {
    fs::create_directories(root_ + "/dev");
    std::ofstream(root_ + "/dev/nvidiactl") << "";
    EXPECT_EQ(nvidia_driver_expected(probe_), "/dev/nvidiactl exists");
    fs::remove(root_ + "/dev/nvidiactl");

    fs::create_directories(root_ + "/proc/driver/nvidia");
    EXPECT_EQ(nvidia_driver_expected(probe_), "/proc/driver/nvidia exists");
    fs::remove_all(root_ + "/proc");
    EXPECT_EQ(nvidia_driver_expected(probe_), "");

    loadable_ = "libnvidia-ml.so.1";
    EXPECT_EQ(nvidia_driver_expected(probe_), "libnvidia-ml.so.1 loads");
    loadable_.clear();

    probe_.nvml_library = "/opt/nvidia/libnvidia-ml.so.550";  // need not load: it is named
    EXPECT_NE(nvidia_driver_expected(probe_).find("CARMA_NVML_LIBRARY names"), std::string::npos);
    probe_.nvml_library.clear();
    probe_.dcgm_library = "libdcgm.so.4";
    EXPECT_NE(nvidia_driver_expected(probe_).find("CARMA_DCGM_LIBRARY names"), std::string::npos);
}

// This test verifies the choice itself: with no sign of a driver `auto` takes emulated GPUs and
// marks them so; with /dev/nvidiactl present and an NVML that fails to initialise it refuses,
// naming NVML's error and what to do.
TEST_F(DriverProbeTest, AutoChoosesEmulatedOnlyWithoutADriver) {
    // The backends must fail here whatever this machine has: the libraries cannot be found.
    ::setenv(kNvmlLibraryEnv, "libnvidia-ml-absent.so.1", 1);
    ::setenv(kDcgmLibraryEnv, "libdcgm-absent.so.4", 1);
    BackendChoice c;
    c.gpus = "auto";
    c.state_dir = root_;
    auto chosen = open_backend(c, 0, probe_);
    ASSERT_TRUE(chosen) << chosen.error().message;
    EXPECT_EQ((*chosen)->name(), "emulated:4xA100-40GB");
    ASSERT_FALSE((*chosen)->gpus().empty());
    EXPECT_TRUE((*chosen)->gpus()[0].emulated);
    chosen->reset();

    fs::create_directories(root_ + "/dev");
    std::ofstream(root_ + "/dev/nvidiactl") << "";
    ::setenv(kNvmlLibraryEnv, CARMA_FAKE_NVML_PATH, 1);
    ::setenv("FAKE_NVML_FAIL_INIT", "rm-mismatch", 1);
    auto refused = open_backend(c, 0, probe_);
    ASSERT_FALSE(refused) << (*refused)->name();
    const std::string& why = refused.error().message;
    EXPECT_NE(why.find("/dev/nvidiactl exists"), std::string::npos) << why;
    EXPECT_NE(why.find("nvmlInit_v2: Driver/library version mismatch (NVML error 18)"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("reboot"), std::string::npos) << why;
    EXPECT_NE(why.find("--gpus emulated"), std::string::npos) << why;
}

}  // namespace
}  // namespace carma::device
