#include "sim/trace.h"

#include <gtest/gtest.h>

namespace carma::sim {
namespace {

// This test verifies that the four shipped traces load with the task counts of spec §4.3.
TEST(TraceTest, BuiltinTraces) {
    struct Case {
        const char* name;
        std::size_t tasks;
        int two_gpu;
    };
    const Case cases[] = {{"t1", 60, 3}, {"t2", 60, 3}, {"mix-90", 90, 6}, {"heavy-60", 60, 3}};
    for (const Case& c : cases) {
        auto t = builtin_trace(c.name);
        ASSERT_TRUE(t) << c.name << ": " << t.error().message;
        EXPECT_EQ(t->entries.size(), c.tasks) << c.name;
        int two = 0;
        for (const TraceEntry& e : t->entries) {
            two += e.gpus.value_or(1) == 2 ? 1 : 0;
        }
        EXPECT_EQ(two, c.two_gpu) << c.name;
        EXPECT_EQ(t->entries.front().submit_s, 0.0);
    }
    auto missing = builtin_trace("t9");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("t1, t2, mix-90, heavy-60, demo"), std::string::npos);
}

// This test verifies that a minimal custom trace parses, is sorted by submit time, and that an
// unknown task gets a class default profile with the trace's duration and memory.
TEST(TraceTest, CustomTraceAndProfiles) {
    auto t = parse_trace(
        "submit_offset_s,task_name,gpus,standalone_minutes,memory_gb,class\n"
        "60,mystery,1,10,12.5,heavy\n"
        "0,resnet3,,,,\n",
        "custom.csv");
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_EQ(t->entries.size(), 2u);
    EXPECT_EQ(t->entries[0].task_name, "resnet3");
    model::WorkloadProfile known = resolve_profile(t->entries[0], model::Catalog::embedded());
    EXPECT_EQ(known.m_peak_mib, 13236);  // the catalog's oracle MiB
    model::WorkloadProfile unknown = resolve_profile(t->entries[1], model::Catalog::embedded());
    EXPECT_EQ(unknown.t_solo_s, 600.0);
    EXPECT_EQ(unknown.m_peak_mib, 12500);
    EXPECT_GT(unknown.util, 0.9);  // heavy class
}

// This test verifies that bad traces get errors naming the line and the problem.
TEST(TraceTest, BadTraces) {
    struct Case {
        const char* text;
        const char* want;
    };
    const Case cases[] = {
        {"task_name\nx\n", "needs columns submit_offset_s and task_name"},
        {"submit_offset_s,task_name\nsoon,x\n", "line 2: column 'submit_offset_s' must be a number"},
        {"submit_offset_s,task_name\n-5,x\n", "must be >= 0"},
        {"submit_offset_s,task_name,gpus\n0,x,1.5\n", "gpus must be a whole number"},
        {"submit_offset_s,task_name,standalone_minutes\n0,x,0\n", "standalone_minutes must be > 0"},
        {"submit_offset_s,task_name\n0,\n", "task_name is empty"},
    };
    for (const Case& c : cases) {
        auto t = parse_trace(c.text, "bad.csv");
        ASSERT_FALSE(t) << c.text;
        EXPECT_NE(t.error().message.find(c.want), std::string::npos) << t.error().message;
    }
}

// This test verifies the trace values the fuzz tests (tests/fuzz) found accepted though absurd:
// gpus of 1e300 became INT_MIN through an undefined double-to-int cast, a negative memory_gb a
// negative need, and huge times infinities in the simulator. Each is refused with its limit.
TEST(TraceTest, FuzzRegressionOutOfRangeValuesAreRefused) {
    struct Case {
        const char* text;
        const char* want;
    };
    const Case cases[] = {
        {"submit_offset_s,task_name,gpus\n0,x,1e300\n", "gpus must be a whole number from 0"},
        {"submit_offset_s,task_name,gpus\n0,x,1025\n", "(CPU only) to 1024"},
        {"submit_offset_s,task_name,gpus\n0,x,-1\n", "(CPU only) to 1024"},
        {"submit_offset_s,task_name,memory_gb\n0,x,-5\n", "memory_gb must be from 0 to"},
        {"submit_offset_s,task_name,memory_gb\n0,x,1e300\n", "(16 TiB per GPU)"},
        {"submit_offset_s,task_name,standalone_minutes\n0,x,1e308\n", "at most 1000000"},
        {"submit_offset_s,task_name\n1e308,x\n", "at most 1000000000"},
    };
    for (const Case& c : cases) {
        auto t = parse_trace(c.text, "bad.csv");
        ASSERT_FALSE(t) << c.text;
        EXPECT_NE(t.error().message.find(c.want), std::string::npos) << t.error().message;
    }
    auto edge = parse_trace("submit_offset_s,task_name,gpus,memory_gb\n0,x,1024,16777.216\n", "e");
    ASSERT_TRUE(edge) << edge.error().message;
    EXPECT_EQ(edge->entries[0].gpus, 1024);
    EXPECT_EQ(edge->entries[0].memory_mib, kMaxMemoryMib);
}

// This test verifies that generated traces are deterministic per seed.
TEST(TraceTest, GeneratedIsDeterministic) {
    const auto& cat = model::Catalog::embedded();
    Trace a = generate_trace(cat, 100, 60, 7);
    Trace b = generate_trace(cat, 100, 60, 7);
    Trace c = generate_trace(cat, 100, 60, 8);
    ASSERT_EQ(a.entries.size(), 100u);
    bool same = true, differs = false;
    for (std::size_t i = 0; i < 100; ++i) {
        same = same && a.entries[i].task_name == b.entries[i].task_name &&
               a.entries[i].submit_s == b.entries[i].submit_s;
        differs = differs || a.entries[i].task_name != c.entries[i].task_name;
    }
    EXPECT_TRUE(same);
    EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace carma::sim
