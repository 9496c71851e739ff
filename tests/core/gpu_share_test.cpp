// Shares of one GPU (core/gpu_share.h, `carma submit --gpu-share`): what a share reads as, and
// the rule every policy places by — shares on a GPU add up to one GPU at most, and shares and
// whole-GPU tasks never sit on one GPU together.

#include "core/gpu_share.h"

#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "builders.h"
#include "core/scheduler.h"

namespace carma {
namespace {

using ::testing::HasSubstr;
using testing::MakeGpu;
using testing::MakeTask;

TaskSpec share_task(const std::string& name, int milli) {
    TaskSpec t = MakeTask(name).Profiled(4000).Knows(4000, 600);
    t.gpu_milli = milli;
    return t;
}

GpuView with_share(int index, int milli) {
    return MakeGpu(index).Resident(100 + index, 4000, std::nullopt).ResidentShare(milli);
}

// This test verifies how a share is read: fractions, a percentage and thousandths; and that 0, 1,
// more, finer than a thousandth and words are refused with the value and what to write.
TEST(GpuShareTest, ReadsFractionsAndRefusesWhatIsNotAShare) {
    EXPECT_EQ(*parse_gpu_share("0.5"), 500);
    EXPECT_EQ(*parse_gpu_share(".125"), 125);
    EXPECT_EQ(*parse_gpu_share("25%"), 250);
    EXPECT_EQ(*parse_gpu_share("0.001"), 1);
    EXPECT_EQ(*gpu_share_milli(0.1), 100);
    for (const char* bad : {"0", "1", "1.5", "-0.5", "0.0005", "half", "", "0.5x"}) {
        auto r = parse_gpu_share(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_THAT(r.error().message, HasSubstr(std::string("GPU share '") + bad + "'")) << bad;
        EXPECT_THAT(r.error().message, HasSubstr("such as 0.5")) << bad;
    }
    EXPECT_THAT(parse_gpu_share("1").error().message, HasSubstr("--gpus N"));
    EXPECT_EQ(format_gpu_share(500), "0.5");
    EXPECT_EQ(format_gpu_share(125), "0.125");
    EXPECT_EQ(mps_thread_percentage(500), 50);
    EXPECT_EQ(mps_thread_percentage(125), 13);  // rounded up: the share, never less
    EXPECT_EQ(mps_thread_percentage(1), 1);
}

// This test verifies that an MPS client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE reads back as the
// share of the SMs it caps, in thousandths, including what mps_thread_percentage writes, and
// that anything but a percentage above 0 and at most 100 is refused naming the variable.
TEST(GpuShareTest, AThreadPercentageReadsAsThousandthsOfTheSms) {
    EXPECT_EQ(*parse_active_thread_percentage("50"), 500);
    EXPECT_EQ(*parse_active_thread_percentage("12.5"), 125);
    EXPECT_EQ(*parse_active_thread_percentage("100"), 1000);
    EXPECT_EQ(*parse_active_thread_percentage(std::to_string(mps_thread_percentage(125))), 130);
    for (const char* bad : {"0", "-5", "100.5", "1e9", "nan", "half", " 50", ""}) {
        auto r = parse_active_thread_percentage(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_THAT(r.error().message,
                    HasSubstr(std::string("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='") + bad + "'"));
    }
}

// This test verifies the rule on one GPU: a share joins shares while they fit in one GPU, never a
// whole-GPU task or another program's processes; a whole-GPU task never joins shares.
TEST(GpuShareTest, SharesFillOneGpuAndNeverMixWithWholeTasks) {
    const TaskSpec half = share_task("half", 500);
    const TaskSpec whole = MakeTask("whole").Profiled(4000).Knows(4000, 600);
    EXPECT_FALSE(share_refusal(half, MakeGpu(0)));
    EXPECT_FALSE(share_refusal(half, with_share(0, 500)));
    EXPECT_EQ(reserved_share_milli(with_share(0, 600)), 600);
    const auto full = share_refusal(half, with_share(0, 600));
    ASSERT_TRUE(full);
    EXPECT_THAT(*full, HasSubstr("0.6 of it is reserved by other shares; 0.5 more would pass"));
    const auto beside_whole =
        share_refusal(half, MakeGpu(0).Resident(7, 4000, std::nullopt));
    ASSERT_TRUE(beside_whole);
    EXPECT_THAT(*beside_whole, HasSubstr("a whole-GPU task runs there"));
    GpuView foreign = MakeGpu(0);
    foreign.has_processes = true;
    foreign.foreign_mib = 2000;
    EXPECT_TRUE(share_refusal(half, foreign));
    const auto whole_beside = share_refusal(whole, with_share(0, 300));
    ASSERT_TRUE(whole_beside);
    EXPECT_THAT(*whole_beside, HasSubstr("0.3 of it is reserved by --gpu-share tasks"));
    EXPECT_FALSE(share_refusal(whole, MakeGpu(0).Resident(7, 4000, std::nullopt)));
    // share_blocks, which the policies ask for every GPU, agrees with the reasons.
    EXPECT_FALSE(share_blocks(half, with_share(0, 500)));
    EXPECT_TRUE(share_blocks(half, with_share(0, 600)));
    EXPECT_TRUE(share_blocks(half, MakeGpu(0).Resident(7, 4000, std::nullopt)));
    EXPECT_TRUE(share_blocks(half, foreign));
    EXPECT_TRUE(share_blocks(whole, with_share(0, 300)));
    EXPECT_FALSE(share_blocks(whole, MakeGpu(0).Resident(7, 4000, std::nullopt)));
    EXPECT_TRUE(shared_by_shares(half, with_share(0, 500)));
    EXPECT_FALSE(shared_by_shares(half, MakeGpu(0)));
    EXPECT_TRUE(shares_conflict(half, whole, MakeGpu(0)));
    EXPECT_TRUE(shares_conflict(half, share_task("b", 600), MakeGpu(0)));
    EXPECT_FALSE(shares_conflict(half, share_task("b", 500), MakeGpu(0)));
    EXPECT_TRUE(shares_conflict(half, share_task("b", 300), with_share(0, 300)));
}

// This test verifies the paper's policies: a half goes beside a half, and not beside 0.6 or a
// whole-GPU task; the reason names the shares.
TEST(GpuShareTest, PaperPoliciesPlaceSharesByTheirSum) {
    const PolicySpec p = *find_policy("oracle-FF");
    const PlacementConfig pc;
    const std::vector<GpuView> gpus = {MakeGpu(0).Resident(7, 4000, std::nullopt),
                                       with_share(1, 600), with_share(2, 500)};
    const Selection sel = select_gpus(p, share_task("half", 500), gpus, pc, 0);
    EXPECT_EQ(sel.gpus, std::vector<int>{2});
    const std::vector<GpuView> none_fits = {gpus[0], gpus[1]};
    const Selection waits = select_gpus(p, share_task("half", 500), none_fits, pc, 0);
    EXPECT_TRUE(waits.gpus.empty());
    EXPECT_THAT(waits.pending_reason, HasSubstr("a whole-GPU task runs there"));
    EXPECT_THAT(waits.pending_reason, HasSubstr("0.6 of it is reserved by other shares"));
}

// This test verifies `carma` end to end on one GPU: two halves share it (the shares stand for
// the gain rule, which may find sharing not worth it), a third half and a whole-GPU task wait,
// and the whole-GPU task starts once the halves are gone.
TEST(GpuShareTest, CarmaPutsTwoHalvesOnOneGpuAndKeepsOthersOut) {
    SchedulerConfig cfg;
    cfg.policy = *find_policy("carma");
    cfg.warmup.settle_s = 0;
    Scheduler s(cfg);
    s.enqueue(1, share_task("a", 500), 0.0);
    std::vector<GpuView> gpus = {MakeGpu(0)};
    StepResult r = s.step(gpus, 0.0);
    ASSERT_EQ(r.placed.size(), 1u);
    s.task_seen(1, 0.5);
    gpus = {with_share(0, 500)};
    gpus[0].residents[0].task = 1;
    gpus[0].residents[0].activity = 1.0;  // busy alone: sharing would gain little
    s.enqueue(2, share_task("b", 500), 1.0);
    r = s.step(gpus, 1.0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].task, 2);
    s.task_seen(2, 1.5);
    gpus[0].residents.push_back(ResidentView{2, 1.0, 4000, std::nullopt, false, {}, 500});
    s.enqueue(3, share_task("c", 500), 2.0);
    s.enqueue(4, MakeTask("whole").Profiled(4000).Knows(4000, 600), 2.0);
    r = s.step(gpus, 2.0);
    EXPECT_TRUE(r.placed.empty());
    s.cancel(3);
    s.task_exited(1);
    s.task_exited(2);
    const std::vector<GpuView> emptied = {MakeGpu(0)};
    r = s.step(emptied, 3.0);
    ASSERT_EQ(r.placed.size(), 1u);
    EXPECT_EQ(r.placed[0].task, 4);
}

}  // namespace
}  // namespace carma
