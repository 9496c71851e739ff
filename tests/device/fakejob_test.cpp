// carma-fakejob end to end: the real binary as a process on emulated GPUs, watched through the
// backend as the daemon would. Assertions are on behaviour; waits poll with generous deadlines.

#include <signal.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "device/emulated.h"
#include "device/fakejob_runner.h"
#include "model/constants.h"

namespace carma::device {
namespace {

using fakejob_runner::eventually;
using fakejob_runner::FakeJob;

class FakeJobTest : public fakejob_runner::EmulatedFakeJobTest {};

// This test verifies a whole run at 100x: the job, named by UUID, shows its memory on that GPU
// (and only there) while it runs, reports progress, exits 0 and leaves the GPU empty.
TEST_F(FakeJobTest, ShortRunFinishesAndShowsItsMemoryWhileRunning) {
    // 400 model seconds (start-up ~15 s, then ~385 s of work) = ~4 wall seconds at 100x.
    auto job = start("short", emulated_gpu_uuid(1),
                     {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "400",
                      "--memory", "12000"});
    EXPECT_TRUE(eventually([&] { return memory_of(job->pid(), 1) == 12000; })) << job->err();
    EXPECT_EQ(memory_of(job->pid(), 0), 0);
    EXPECT_EQ(job->wait(), 0) << job->err();
    EXPECT_NE(job->out().find("progress 100%"), std::string::npos) << job->out();
    auto s = backend_->sample();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ((*s)[1].used_mib, 0);
}

// This test verifies the OOM rule end to end (§10(f) 4): with 25,000 MiB resident, a second job
// ramping to 20,000 MiB on the same GPU prints PyTorch's error and exits 1; the first goes on.
TEST_F(FakeJobTest, SecondBigJobOnOneGpuRunsOutOfMemory) {
    auto first = start("first", "0",
                       {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "1000000",
                        "--memory", "25000"});
    ASSERT_TRUE(eventually([&] { return memory_of(first->pid(), 0) == 25000; })) << first->err();

    auto second = start("second", "0",
                        {"--profile", "BERT_base", "--time-scale", "100", "--memory", "20000"});
    EXPECT_EQ(second->wait(), 1) << second->err();
    const std::string err = second->err();
    EXPECT_NE(err.find("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("GPU 0 has a total capacity of 39.49 GiB of which "), std::string::npos)
        << err;

    EXPECT_EQ(memory_of(first->pid(), 0), 25000);
    EXPECT_FALSE(first->wait(std::chrono::milliseconds(0)).has_value());  // still running
    ::kill(first->pid(), SIGTERM);
    EXPECT_EQ(first->wait(), 143);
}

// This test verifies that SIGTERM stops a job at once with 143, in start-up and while active,
// and that it gives its memory back.
TEST_F(FakeJobTest, SigtermExits143AndFreesItsMemory) {
    auto active = start("active", "1",
                        {"--profile", "BERT_base", "--time-scale", "100", "--duration-s", "1000000",
                         "--memory", "9000"});
    ASSERT_TRUE(eventually([&] { return memory_of(active->pid(), 1) == 9000; })) << active->err();
    ::kill(active->pid(), SIGTERM);
    EXPECT_EQ(active->wait(), 143);
    auto s = backend_->sample();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ((*s)[1].used_mib, 0);

    // Real time: BERT_base's 15 s start-up has barely begun when the signal comes.
    auto starting = start("starting", "0", {"--profile", "BERT_base"});
    ASSERT_TRUE(eventually([&] { return starting->out().find("carma-fakejob:") == 0; }))
        << starting->err();
    ::kill(starting->pid(), SIGTERM);
    EXPECT_EQ(starting->wait(), 143);
}

// This test verifies that a task the catalog does not know (a trace replay) runs with the
// class defaults when its run time and memory are given.
TEST_F(FakeJobTest, UnknownTaskRunsWithRunTimeAndMemoryGiven) {
    auto job = start("unknown-task", "0",
                     {"--profile", "philly_job_17", "--time-scale", "100", "--duration-s", "200",
                      "--memory", "3GiB", "--class", "heavy"});
    EXPECT_TRUE(eventually([&] { return memory_of(job->pid(), 0) == 3072; })) << job->err();
    EXPECT_EQ(job->wait(), 0) << job->err();
}

// This test verifies the usage errors: exit 2 with a message that says what to fix.
TEST_F(FakeJobTest, UsageErrorsExit2WithAHint) {
    auto unknown = start("unknown", "0", {"--profile", "NoSuchModel"});
    EXPECT_EQ(unknown->wait(), 2);
    EXPECT_NE(unknown->err().find("unknown profile 'NoSuchModel'"), std::string::npos)
        << unknown->err();
    EXPECT_NE(unknown->err().find("BERT_base"), std::string::npos) << unknown->err();

    FakeJob no_devices(dir_, "no-devices", {"--profile", "BERT_base", "--emulator", file_}, {});
    EXPECT_EQ(no_devices.wait(), 2);
    EXPECT_NE(no_devices.err().find("CUDA_VISIBLE_DEVICES"), std::string::npos) << no_devices.err();

    FakeJob no_file(dir_, "no-file", {"--profile", "BERT_base"}, {{"CUDA_VISIBLE_DEVICES", "0"}});
    EXPECT_EQ(no_file.wait(), 2);
    EXPECT_NE(no_file.err().find("CARMA_EMULATOR_FILE"), std::string::npos) << no_file.err();

    auto bad_gpu = start("bad-gpu", "7", {"--profile", "BERT_base"});
    EXPECT_EQ(bad_gpu->wait(), 2);
    EXPECT_NE(bad_gpu->err().find("CUDA_VISIBLE_DEVICES '7'"), std::string::npos) << bad_gpu->err();

    auto bad_scale = start("bad-scale", "0", {"--profile", "BERT_base", "--time-scale", "0"});
    EXPECT_EQ(bad_scale->wait(), 2);
}

}  // namespace
}  // namespace carma::device
