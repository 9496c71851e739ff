// What a framework's out-of-memory error says the process held, in the wordings PyTorch prints
// (its CUDA caching allocator, releases before 2.1, 2.1 with its "capacty" typo, and later).

#include "core/oom_report.h"

#include <vector>

#include <gtest/gtest.h>

namespace carma {
namespace {

using Usage = std::map<int, MiB>;

// This test verifies PyTorch 2.x's wording: the process's own figure, on the ordinal it names,
// and not another process's ("Process 123 has ...") or PyTorch's share of it.
TEST(OomReportTest, CurrentWordingGivesTheProcessesFigureOnItsOrdinal) {
    const std::string tail =
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 88, in <module>\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a "
        "total capacity of 139.80 GiB of which 53.00 MiB is free. Process 4711 has 90.12 GiB "
        "memory in use. Including non-PyTorch memory, this process has 4.03 GiB memory in use. Of "
        "the allocated memory 3.44 GiB is allocated by PyTorch, and 0 bytes is reserved by "
        "PyTorch but unallocated.\n";
    EXPECT_EQ(reported_oom_usage(tail), (Usage{{0, 4127}}));  // 4.03 GiB = 4126.72 MiB, up
}

// This test verifies the 2.1 spelling "capacty", a second GPU's ordinal, and units below GiB.
TEST(OomReportTest, TyposOrdinalsAndSmallUnits) {
    const std::string tail =
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB. GPU 1 has "
        "a total capacty of 4.00 GiB of which 41.56 MiB is free. Including non-PyTorch memory, "
        "this process has 812.50 MiB memory in use. Of the allocated memory ...\n";
    EXPECT_EQ(reported_oom_usage(tail), (Usage{{1, 813}}));
    EXPECT_EQ(reported_oom_usage("this process has 512.00 KiB memory in use"),
              (Usage{{kUnknownOrdinal, 1}}));
    EXPECT_EQ(reported_oom_usage("this process has 0 bytes memory in use"),
              (Usage{{kUnknownOrdinal, 0}}));
}

// This test verifies PyTorch's wording before 2.1: what it had reserved in total.
TEST(OomReportTest, OldWordingGivesWhatPyTorchReserved) {
    const std::string tail =
        "RuntimeError: CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total "
        "capacity; 781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by "
        "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb\n";
    EXPECT_EQ(reported_oom_usage(tail), (Usage{{0, 1270}}));  // 1.24 GiB = 1269.76 MiB, up
}

// This test verifies that several ranks' messages keep the most per ordinal, each on its own.
TEST(OomReportTest, SeveralMessagesKeepTheMostPerOrdinal) {
    const std::string tail =
        "[rank0] torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 80.00 "
        "GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 70.00 GiB "
        "memory in use.\n"
        "[rank1] torch.OutOfMemoryError: CUDA out of memory. GPU 1 has a total capacity of 80.00 "
        "GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 79.00 GiB "
        "memory in use.\n"
        "[rank0] torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 80.00 "
        "GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 72.50 GiB "
        "memory in use.\n";
    EXPECT_EQ(reported_oom_usage(tail), (Usage{{0, 74240}, {1, 80896}}));
}

// This test verifies that text that only looks like the message gives nothing: no figure, a
// broken size, another unit, an unclosed old-style parenthesis.
TEST(OomReportTest, LookalikesGiveNothing) {
    for (const char* text : {
             "",
             "CUDA error: out of memory",
             "this process has lots of memory in use",
             "this process has 4.03 GB memory in use",
             "this process has -4.00 GiB memory in use",
             "this process has 4.03 GiB memory free",
             "this process has 1e400 GiB memory in use",
             "(GPU 0; 6.00 GiB total capacity; 1.24 GiB reserved in total by PyTorch",
             "(GPU x; 1.24 GiB reserved in total by PyTorch)",
         }) {
        EXPECT_TRUE(reported_oom_usage(text).empty()) << text;
    }
}

// This test verifies that a huge figure is capped at the largest memory CARMA represents.
TEST(OomReportTest, HugeFiguresAreCapped) {
    EXPECT_EQ(reported_oom_usage("this process has 99999999.00 TiB memory in use"),
              (Usage{{kUnknownOrdinal, kMaxMemoryMib}}));
}

// This test verifies how reported figures map onto an attempt's GPUs: by CUDA ordinal in the
// order of its GPUs, raising (never lowering) what was sampled; an unknown ordinal only for an
// attempt on one GPU; an ordinal beyond its GPUs nowhere.
TEST(OomReportTest, ReportedFiguresRaiseThePeaksOfTheirGpus) {
    const std::vector<int> two = {3, 1};  // ordinal 0 is GPU 3, ordinal 1 is GPU 1
    EXPECT_EQ(raise_by_reported({{3, 14}}, two, {{0, 4127}, {1, 500}}),
              (Usage{{3, 4127}, {1, 500}}));
    EXPECT_EQ(raise_by_reported({{3, 9000}}, two, {{0, 4127}}), (Usage{{3, 9000}}));
    EXPECT_EQ(raise_by_reported({}, two, {{kUnknownOrdinal, 4127}, {2, 100}}), Usage{});
    const std::vector<int> one = {2};
    EXPECT_EQ(raise_by_reported({}, one, {{kUnknownOrdinal, 4127}}), (Usage{{2, 4127}}));
    EXPECT_EQ(raise_by_reported({{2, 0}}, one, {{0, 64}}), (Usage{{2, 64}}));
}

}  // namespace
}  // namespace carma
