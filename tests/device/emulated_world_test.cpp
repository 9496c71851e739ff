// Emulated GPUs under a world (model/world.h): fake jobs run at the world's speeds, which every
// process attached to the emulator file reads from its header.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "device/emulated.h"
#include "device/emulated_job.h"

namespace carma::device {
namespace {

namespace fs = std::filesystem;

const JobProfile kHeavy{0.90, 0.85, 0.30, 0.20};
const JobProfile kMedium{0.60, 0.50, 0.25, 0.40};

// This test verifies that a biased world slows every collocated emulated job by 1 + F against
// the device model and leaves a job alone at full speed; that reopening the file with another
// world changes the live jobs' speeds; and that the measured world is not the model.
TEST(EmulatedWorldTest, JobsRunAtTheWorldsSpeeds) {
    std::string pattern = (fs::temp_directory_path() / "carma-emu-world-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    const std::string file = pattern + "/emulated-gpus";
    EmulatorOptions o;
    o.gpus = *model::parse_gpu_set("2xA100-40GB");
    o.file = file;
    o.world = model::WorldConfig{model::WorldKind::Model, 0.5, 0, 1};
    auto backend = open_emulated(o);
    ASSERT_TRUE(backend) << backend.error().message;
    auto heavy = JobHandle::attach(file, "0", kHeavy);
    auto medium = JobHandle::attach(file, "0", kMedium);
    auto alone = JobHandle::attach(file, "1", kHeavy);
    ASSERT_TRUE(heavy && medium && alone);
    for (JobHandle* job : {&*heavy, &*medium, &*alone}) {
        ASSERT_TRUE(job->set_active(true));
    }
    const model::SlowdownParams p = model::slowdown_params(model::SharingMode::Mps);
    EXPECT_DOUBLE_EQ(*heavy->current_speed(), model::task_speed(0.9, 1.5, p) / 1.5);
    EXPECT_DOUBLE_EQ(*medium->current_speed(), model::task_speed(0.6, 1.5, p) / 1.5);
    EXPECT_DOUBLE_EQ(*alone->current_speed(), 1.0);

    o.world = model::WorldConfig{};  // the daemon restarted with the plain model
    auto again = open_emulated(o);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_DOUBLE_EQ(*heavy->current_speed(), model::task_speed(0.9, 1.5, p));

    o.world = model::WorldConfig{model::WorldKind::Measured, 0, 0, 1};
    auto measured = open_emulated(o);
    ASSERT_TRUE(measured) << measured.error().message;
    EXPECT_NE(*heavy->current_speed(), model::task_speed(0.9, 1.5, p));
    EXPECT_GT(*heavy->current_speed(), 0.0);
    EXPECT_LE(*heavy->current_speed(), 1.0);
    EXPECT_DOUBLE_EQ(*alone->current_speed(), 1.0);
    heavy->detach();
    medium->detach();
    alone->detach();
    fs::remove_all(pattern);
}

}  // namespace
}  // namespace carma::device
