// The workload catalog (data/workloads.csv, embedded) and the GPU-set notation.

#include "model/catalog.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_need.h"
#include "model/constants.h"
#include "model/gpu_type.h"
#include "sim/trace.h"

namespace carma::model {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

const char* const kHeader = "task_name,gpus,t_solo_s,m_peak_mib,gpu_util,smact,smocc,drama\n";

// This test verifies that the embedded catalog knows every task name used by the built-in traces
// (the paper's four and the demo's), so the simulator never falls back to a class default.
TEST(CatalogTest, EmbeddedCatalogCoversEveryTraceTask) {
    const Catalog& catalog = Catalog::embedded();
    const std::vector<std::string> names = sim::builtin_trace_names();
    ASSERT_EQ(names.size(), 5u);
    std::set<std::string> distinct;
    for (const std::string& name : names) {
        auto trace = sim::builtin_trace(name);
        ASSERT_TRUE(trace) << name << ": " << trace.error().message;
        EXPECT_FALSE(trace->entries.empty()) << name;
        for (const sim::TraceEntry& e : trace->entries) {
            EXPECT_NE(catalog.find(e.task_name), nullptr)
                << "trace " << name << " task " << e.task_name << " has no catalog profile";
            distinct.insert(e.task_name);
        }
    }
    // data/README.md: the paper's four traces together use 50 distinct tasks (the demo trace
    // uses a subset of them); the catalog has 51 rows.
    EXPECT_EQ(distinct.size(), 50u);
    EXPECT_EQ(catalog.profiles().size(), 51u);
    EXPECT_EQ(catalog.find("no_such_task"), nullptr);
}

// This test verifies that every embedded profile is physically sensible: positive duration,
// start-up within the run, fractions in [0, 1], a peak that fits an A100-40GB.
TEST(CatalogTest, EmbeddedProfilesAreInRange) {
    for (const WorkloadProfile& p : Catalog::embedded().profiles()) {
        SCOPED_TRACE(p.name);
        EXPECT_FALSE(p.name.empty());
        EXPECT_TRUE(p.gpus == 1 || p.gpus == 2) << p.gpus;
        EXPECT_GT(p.t_solo_s, 0.0);
        EXPECT_GE(p.t_start_s, 0.0);
        EXPECT_LE(p.t_start_s, 0.5 * p.t_solo_s);
        for (double fraction : {p.util, p.smact, p.smocc, p.drama}) {
            EXPECT_GE(fraction, 0.0);
            EXPECT_LE(fraction, 1.0);
        }
        EXPECT_GT(p.m_peak_mib, 0);
        EXPECT_LT(p.m_peak_mib, kA100_40GB_UsableMiB);
    }
}

// This test verifies that a known row is read field by field (BERT_base: the first data row of
// data/workloads.csv).
TEST(CatalogTest, EmbeddedRowIsReadFieldByField) {
    const WorkloadProfile* p = Catalog::embedded().find("BERT_base");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->model, "BERT_base");
    EXPECT_EQ(p->gpus, 1);
    EXPECT_DOUBLE_EQ(p->t_solo_s, 895.2);
    EXPECT_DOUBLE_EQ(p->t_start_s, 15.38);
    EXPECT_EQ(p->m_peak_mib, 19828);
    EXPECT_EQ(p->horus_mib, 17457);
    EXPECT_EQ(p->faketensor_mib, 40000);
    EXPECT_EQ(p->gpumemnet_mib, 32000);
    EXPECT_FALSE(p->descriptor);  // single batch size: P and A cannot be derived
    EXPECT_DOUBLE_EQ(p->util, 0.9367);
    EXPECT_DOUBLE_EQ(p->smact, 0.8993);
    EXPECT_DOUBLE_EQ(p->smocc, 0.2706);
    EXPECT_DOUBLE_EQ(p->drama, 0.142);
    EXPECT_DOUBLE_EQ(p->power_w, 255.705);
    EXPECT_TRUE(contains(p->source, "aegis:bert_base_wiki_bs32_1gpu"));
}

// This test verifies that the rows with a Horus model descriptor reproduce their stored Horus
// value within 1 % through carma::horus_estimate_mib, i.e. the P/A inversion is consistent.
TEST(CatalogTest, HorusDescriptorsReproduceTheStoredEstimate) {
    // E.g. resnet50 bs32: P = 25,559,040, A = 31,837,038:
    //   4 (32*31,837,038 + 25,559,040 + 32*25,559,040) / 2^20 + 800
    //   = 4 * 1,862,231,296 / 1,048,576 + 800 = 7,103.9 + 800 = 7,903.9 -> 7,904 (stored 7,904).
    int checked = 0;
    for (const WorkloadProfile& p : Catalog::embedded().profiles()) {
        if (!p.descriptor) {
            continue;
        }
        SCOPED_TRACE(p.name);
        ASSERT_TRUE(p.horus_mib) << "a descriptor without a stored Horus value";
        const MiB estimate = horus_estimate_mib(*p.descriptor);
        EXPECT_LE(std::abs(static_cast<double>(estimate - *p.horus_mib)),
                  0.01 * static_cast<double>(*p.horus_mib))
            << "estimate " << estimate << " vs stored " << *p.horus_mib;
        ++checked;
    }
    // data/README.md: descriptors for 9 training scripts (5 ImageNet CNNs x 3 tasks, 4 CIFAR
    // CNNs x 6 tasks): 5*3 + 4*6 = 39 rows.
    EXPECT_EQ(checked, 39);
}

// This test verifies that the task spec built from a profile carries all its memory knowledge.
TEST(CatalogTest, TaskSpecCarriesTheProfileMemoryKnowledge) {
    const WorkloadProfile* p = Catalog::embedded().find("BERT_base");
    ASSERT_NE(p, nullptr);
    const TaskSpec spec = task_spec_for(*p);
    EXPECT_EQ(spec.name, "BERT_base");
    EXPECT_EQ(spec.workload, "BERT_base");
    EXPECT_EQ(spec.gpus, 1);
    EXPECT_EQ(spec.memory.profiled_mib, 19828);
    EXPECT_EQ(spec.memory.horus_mib, 17457);
    EXPECT_EQ(spec.memory.faketensor_mib, 40000);
    EXPECT_EQ(spec.memory.gpumemnet_mib, 32000);
    EXPECT_FALSE(spec.memory.declared_mib);
}

// This test verifies that a minimal catalog parses, optional columns default (t_start = 8.2 s
// capped at half the run, no estimates) and a descriptor needs all three of its columns.
TEST(CatalogTest, ParseMinimalCatalogUsesDefaults) {
    auto c = Catalog::parse(std::string(kHeader) +
                                "a,1,100,5000,0.5,0.4,0.2,0.1\n"
                                "b,2,10,800,0.9,0.8,0.3,0.2\n",
                            "test.csv");
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_EQ(c->profiles().size(), 2u);
    const WorkloadProfile* a = c->find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_DOUBLE_EQ(a->t_start_s, 8.2);  // min(8.2, 0.5 * 100)
    EXPECT_FALSE(a->horus_mib);
    EXPECT_FALSE(a->descriptor);
    EXPECT_EQ(a->power_w, 0.0);
    const WorkloadProfile* b = c->find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->gpus, 2);
    EXPECT_DOUBLE_EQ(b->t_start_s, 5.0);  // min(8.2, 0.5 * 10)
}

struct ParseErrorCase {
    const char* what;
    std::string csv;
    std::vector<std::string> message_parts;
};

// This test verifies that malformed catalogs are rejected with a message naming the source, the
// line (for row errors) and the offending column or name.
TEST(CatalogTest, ParseErrorsNameTheLineAndTheProblem) {
    const std::string h = kHeader;
    const std::vector<ParseErrorCase> table = {
        {"required column missing from the header",
         "task_name,gpus,t_solo_s,m_peak_mib,smact,smocc,drama\na,1,100,5000,0.4,0.2,0.1\n",
         {"cat.csv", "missing column 'gpu_util'"}},
        {"row with a missing field (line 3)",
         h + "a,1,100,5000,0.5,0.4,0.2,0.1\nb,1,100,5000,0.5,0.4,0.2\n",
         {"cat.csv line 3", "7 fields", "8"}},
        {"non-number in a required column (line 3)",
         h + "a,1,100,5000,0.5,0.4,0.2,0.1\nb,1,abc,5000,0.5,0.4,0.2,0.1\n",
         {"cat.csv line 3", "'t_solo_s'", "'abc'"}},
        {"empty required field (line 2)",
         h + "a,1,100,5000,0.5,,0.2,0.1\n",
         {"cat.csv line 2", "'smact'", "''"}},
        {"non-number in an optional column (line 2)",
         "task_name,gpus,t_solo_s,m_peak_mib,gpu_util,smact,smocc,drama,horus_mib\n"
         "a,1,100,5000,0.5,0.4,0.2,0.1,lots\n",
         {"cat.csv line 2", "'horus_mib'", "'lots'"}},
        {"duplicate name (line 4, a comment line counted)",
         h + "a,1,100,5000,0.5,0.4,0.2,0.1\n# comment\na,1,200,6000,0.5,0.4,0.2,0.1\n",
         {"cat.csv line 4", "duplicate profile 'a'"}},
        {"zero GPUs (line 2)",
         h + "a,0,100,5000,0.5,0.4,0.2,0.1\n",
         {"cat.csv line 2", "gpus >= 1"}},
        {"zero duration (line 2)",
         h + "a,1,0,5000,0.5,0.4,0.2,0.1\n",
         {"cat.csv line 2", "t_solo_s > 0"}},
        {"empty name (line 2)",
         h + ",1,100,5000,0.5,0.4,0.2,0.1\n",
         {"cat.csv line 2", "needs a name"}},
    };
    for (const ParseErrorCase& c : table) {
        SCOPED_TRACE(c.what);
        auto parsed = Catalog::parse(c.csv, "cat.csv");
        ASSERT_FALSE(parsed);
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
        for (const std::string& part : c.message_parts) {
            EXPECT_TRUE(contains(parsed.error().message, part))
                << "'" << part << "' not in: " << parsed.error().message;
        }
    }
}

struct ClassCase {
    const char* task_class;
    double util, smact, smocc, drama;
    const char* label;
};

// This test verifies the class defaults for a trace row without a catalog entry: the activity of
// the class (medium for anything else), the row's duration and memory, and t_start capped at half
// the run.
TEST(CatalogTest, ProfileFromClassUsesClassDefaults) {
    const std::vector<ClassCase> table = {
        {"light", 0.35, 0.19, 0.08, 0.05, "light"}, {"medium", 0.80, 0.70, 0.36, 0.40, "medium"},
        {"heavy", 0.95, 0.91, 0.29, 0.16, "heavy"}, {"", 0.80, 0.70, 0.36, 0.40, "medium"},
        {"odd", 0.80, 0.70, 0.36, 0.40, "odd"},
    };
    for (const ClassCase& c : table) {
        SCOPED_TRACE(std::string("class '") + c.task_class + "'");
        const WorkloadProfile p = profile_from_class("x", c.task_class, 2, 600.0, 12000);
        EXPECT_EQ(p.name, "x");
        EXPECT_EQ(p.model, "unknown");
        EXPECT_EQ(p.gpus, 2);
        EXPECT_DOUBLE_EQ(p.t_solo_s, 600.0);
        EXPECT_DOUBLE_EQ(p.t_start_s, 8.2);  // min(8.2, 300)
        EXPECT_EQ(p.m_peak_mib, 12000);
        EXPECT_DOUBLE_EQ(p.util, c.util);
        EXPECT_DOUBLE_EQ(p.smact, c.smact);
        EXPECT_DOUBLE_EQ(p.smocc, c.smocc);
        EXPECT_DOUBLE_EQ(p.drama, c.drama);
        EXPECT_EQ(p.source, std::string("class default (") + c.label + ")");
        EXPECT_FALSE(p.horus_mib);
    }
    // A 10 s task starts after min(8.2, 0.5 * 10) = 5 s.
    EXPECT_DOUBLE_EQ(profile_from_class("y", "light", 1, 10.0, 500).t_start_s, 5.0);
}

// This test verifies that well-formed GPU sets parse (count, type, limits) and print back.
TEST(CatalogTest, ParseGpuSetAcceptsCountTimesKnownType) {
    auto set = parse_gpu_set("4xA100-40GB");
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_EQ(set->count, 4);
    EXPECT_EQ(set->type.name, "A100-40GB");
    EXPECT_EQ(set->type.usable_mib, 40441);
    EXPECT_DOUBLE_EQ(set->type.idle_power_w, 50.0);
    EXPECT_DOUBLE_EQ(set->type.max_power_w, 400.0);
    EXPECT_EQ(set->text(), "4xA100-40GB");

    auto lower = parse_gpu_set("2xa100-40gb");  // the type name is case-insensitive
    ASSERT_TRUE(lower) << lower.error().message;
    EXPECT_EQ(lower->count, 2);
    EXPECT_EQ(lower->text(), "2xA100-40GB");

    for (const GpuType& t : known_gpu_types()) {
        auto one = parse_gpu_set("1x" + t.name);
        ASSERT_TRUE(one) << t.name;
        EXPECT_EQ(one->type.name, t.name);
        EXPECT_EQ(one->type.usable_mib, t.usable_mib);
    }
    EXPECT_EQ(parse_gpu_set("1024xH100-80GB")->count, 1024);
}

struct GpuSetErrorCase {
    const char* text;
    std::vector<std::string> message_parts;
};

// This test verifies that malformed GPU sets are rejected with a message that quotes the input
// and says what is wrong (count range, unknown type with the known ones, missing 'x').
TEST(CatalogTest, ParseGpuSetErrorsNameTheProblem) {
    const std::vector<GpuSetErrorCase> table = {
        {"0xA100-40GB", {"'0xA100-40GB'", "1..1024"}},
        {"1025xA100-40GB", {"'1025xA100-40GB'", "1..1024"}},
        {"-1xA100-40GB", {"1..1024"}},
        {"fourxA100-40GB", {"1..1024"}},
        {"4xB200", {"'4xB200'", "unknown GPU type 'B200'", "A100-40GB", "H100-80GB"}},
        {"4x", {"unknown GPU type ''"}},
        {"A100", {"'A100'", "4xA100-40GB", "A100-40GB"}},
        {"", {"4xA100-40GB"}},
        {"x100", {"4xA100-40GB"}},
    };
    for (const GpuSetErrorCase& c : table) {
        SCOPED_TRACE(std::string("'") + c.text + "'");
        auto parsed = parse_gpu_set(c.text);
        ASSERT_FALSE(parsed);
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
        for (const std::string& part : c.message_parts) {
            EXPECT_TRUE(contains(parsed.error().message, part))
                << "'" << part << "' not in: " << parsed.error().message;
        }
    }
}

}  // namespace
}  // namespace carma::model
