// Fuzz tests for the parsers of untrusted text: task files (YAML and .rad), the JSON body of
// POST /v1/tasks, the API's query parameters, trace CSVs, memory sizes, the MPS memory limit
// variable, and the cluster wire (an agent's report, the server's answer). Each target runs a
// fixed number of deterministic mutations (tests/fuzz/mutator.h) of real inputs; the property is
// that the parser never crashes, never lets an exception escape (errors are Results), trips no
// sanitizer, and that whatever it accepts is sane (memory within 0..16 TiB, gpus >= 1, names
// present). CARMA_FUZZ_RUNS raises the number of inputs per target for a longer local run;
// CARMA_FUZZ_SEED draws a different sequence. CARMA_FUZZ_LAST_INPUT=FILE writes each input to
// FILE before it is parsed, so the input of a crash or a hang can be read afterwards.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/query.h"
#include "api/rad_sample.h"
#include "api/task_file.h"
#include "cluster/wire.h"
#include "core/csv.h"
#include "core/mps_limit.h"
#include "core/units.h"
#include "daemon/task_json.h"
#include "fuzz/mutator.h"
#include "model/catalog.h"
#include "sim/trace.h"

namespace carma::fuzz {
namespace {


std::string read_file(const std::filesystem::path& path, std::size_t max_lines = 0) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << "missing seed file " << path;
    std::string out;
    std::string line;
    for (std::size_t n = 0; std::getline(in, line) && (max_lines == 0 || n < max_lines); ++n) {
        out += line + "\n";
    }
    return out;
}

const std::filesystem::path kSource = CARMA_SOURCE_DIR;

enum class Verdict { Rejected, Accepted };

// Runs `check` on `runs()` inputs. `check` parses one input and asserts the invariants of what
// was accepted; an exception out of it is a failure (the parsers return errors as Results). The
// loop stops at the first failing input, whose escaped text is in the failure message.
void fuzz(const char* target, std::uint64_t seed, std::vector<std::string> seeds,
          std::vector<std::string> tokens, const std::function<Verdict(const std::string&)>& check,
          std::size_t max_size = 16 * 1024) {
    Mutator mutator(seed_for(seed), std::move(seeds), std::move(tokens), max_size);
    const std::size_t n = runs();
    std::size_t accepted = 0;
    const char* last_input = std::getenv("CARMA_FUZZ_LAST_INPUT");
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
        const std::string input = mutator.next();
        if (last_input != nullptr) {
            std::ofstream(last_input, std::ios::binary | std::ios::trunc) << input;
        }
        try {
            if (check(input) == Verdict::Accepted) {
                ++accepted;
                mutator.keep(input);
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << target << ": exception escaped on input " << i << ": " << e.what()
                          << "\ninput: " << escaped(input);
        } catch (...) {
            ADD_FAILURE() << target << ": unknown exception escaped on input " << i
                          << "\ninput: " << escaped(input);
        }
        if (::testing::Test::HasFailure()) {
            std::cerr << target << ": failed on input " << i << ": " << escaped(input) << "\n";
            return;
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Printed so a CI log shows the depth of each run: a target whose inputs are all rejected
    // tests only the first lines of its parser.
    std::cout << target << ": " << n << " inputs, " << accepted << " accepted, " << seconds
              << " s\n";
    EXPECT_GT(accepted, 0u) << target << ": no input was accepted; the seeds are broken";
}

// A memory amount that got past a parser: an integer MiB a GPU could have.
void expect_sane_mib(const std::optional<MiB>& mib, const char* what, const std::string& input) {
    if (mib) {
        EXPECT_GE(*mib, 0) << what << " for " << escaped(input);
        EXPECT_LE(*mib, kMaxMemoryMib) << what << " for " << escaped(input);
    }
}

void expect_sane_memory(const MemoryInfo& m, const std::string& input) {
    expect_sane_mib(m.declared_mib, "declared_mib", input);
    expect_sane_mib(m.profiled_mib, "profiled_mib", input);
    expect_sane_mib(m.horus_mib, "horus_mib", input);
    expect_sane_mib(m.faketensor_mib, "faketensor_mib", input);
    expect_sane_mib(m.gpumemnet_mib, "gpumemnet_mib", input);
}

// What every accepted task file gives: a command, a name, a workdir, sane numbers, and a body
// the client can send (request_body().dump() throws on text that is not UTF-8).
void expect_sane_request(const api::SubmitRequest& r, const std::string& input) {
    EXPECT_FALSE(r.command.empty()) << escaped(input);
    EXPECT_FALSE(r.name.empty()) << escaped(input);
    EXPECT_FALSE(r.workdir.empty()) << escaped(input);
    if (r.gpus) {
        EXPECT_GE(*r.gpus, 0) << escaped(input);  // 0: a CPU-only task
    }
    if (r.cpus) {
        EXPECT_GE(*r.cpus, 1) << escaped(input);
    }
    if (r.max_attempts) {
        EXPECT_GE(*r.max_attempts, 1) << escaped(input);
        EXPECT_LE(*r.max_attempts, 100) << escaped(input);
    }
    expect_sane_memory(r.memory, input);
    (void)api::request_body(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const api::TaskFileContext kContext{"fuzz/task.yaml", "task", "/jobs/fuzz", "/home/alice"};

// ---- task files -----------------------------------------------------------------------------

std::vector<std::string> yaml_seeds() {
    return {read_file(kSource / "examples/task.yaml"),
            "name: resnet3\n"
            "command: python resnet50.py --batch_size 128\n"
            "gpus: 1\n"
            "memory: 13GiB\n"
            "profiled_memory: 13236\n"
            "estimates: {horus: 28923, faketensor: 10666, gpumemnet: 24000}\n"
            "workdir: exp\n"
            "env: {EPOCHS: \"3\"}\n"
            "max_attempts: 3\n"
            "workload: resnet3\n",
            "command: [python, train.py, \"--lr\", '0.1']\ngpus: 2\nmemory: 20 GB\n",
            "command:\n  - /bin/sh\n  - -c\n  - echo \"hi there\" && sleep 1\n"
            "estimates:\n  horus: 1.5GiB\n  gpumemnet: 900MiB\nworkdir: /abs/dir\n",
            "command: python 'a b.py' \"c\\\"d\" e\\ f\nenv:\n  A: \"\"\n  B: x\n"
            "memory: 1TiB\nprofiled_memory: 0\n"};
}

std::vector<std::string> yaml_tokens() {
    return {": ",           "- ",        "[",          "]",         "{",
            "}",            ",",         "&a ",        "*a",        "!!str ",
            "!!int ",       "!!map ",    "---\n",      "...\n",     "|\n  ",
            ">-\n  ",       "# ",        "? ",         "<<: *a\n",  "~",
            "null",         "true",      "%YAML 1.2\n", "%TAG ! !x\n", "\n  ",
            "name",         "command",   "gpus",       "memory",    "profiled_memory",
            "estimates",    "horus",     "faketensor", "gpumemnet", "workdir",
            "env",          "max_attempts", "workload", "GiB",      "MiB",
            "GB",           "TiB",       "gpus: 9223372036854775807\n",
            "memory: 9223372036854775807\n", "max_attempts: 101\n",
            "estimates: {horus: 9223372036854775807}\n", "memory: 1e309GiB\n",
            "command: []\n", "command: ''\n", "workdir: ../../..\n"};
}

TEST(FuzzTaskFile, YamlTaskFileNeverThrowsAndAcceptsOnlySaneTasks) {
    // 4 KiB inputs: yaml-cpp scans about 2 MB/s, and real task files are a few hundred bytes.
    fuzz(
        "yaml task file", 1, yaml_seeds(), yaml_tokens(),
        [](const std::string& input) {
            auto r = api::parse_yaml_task(input, kContext);
            if (!r) {
                EXPECT_FALSE(r.error().message.empty()) << escaped(input);
                return Verdict::Rejected;
            }
            expect_sane_request(*r, input);
            return Verdict::Accepted;
        },
        4 * 1024);
}

// The twelve lines of resnet3.rad (api/rad_sample.h) and shorter variants.
std::vector<std::string> rad_seeds() {
    return {test_support::kResnet3Rad,
            "#\nconda activate hf\npython gpt2.py --model gpt2-xl\nm\nd\n8\ne\n4\n",
            "#\nenv\ncd /x && python t.py > out.txt\nm\nd\n1\ne\n2\n\n\n1e3\n",
            "#\r\n\r\npython 'x y.py'\r\nm\r\nd\r\n1\r\ne\r\n+2.0\r\n5\r\n6\r\n7\r\n8\r\n"};
}

TEST(FuzzTaskFile, RadTaskFileNeverThrowsAndAcceptsOnlySaneTasks) {
    fuzz("rad task file", 2, rad_seeds(),
         {"python", "python ", "\n", "\r\n", "|", "&&", ";", "$(", "`", "> out", "1e15",
          "999999999999999", "1e16", "2.5", "+", "-", "e5"},
         [](const std::string& input) {
             auto r = api::parse_rad_task(input, kContext);
             if (!r) {
                 EXPECT_FALSE(r.error().message.empty()) << escaped(input);
                 return Verdict::Rejected;
             }
             expect_sane_request(*r, input);
             EXPECT_TRUE(r->gpus.has_value()) << escaped(input);
             return Verdict::Accepted;
         });
}

// ---- the API's submission body ----------------------------------------------------------------

std::vector<std::string> json_seeds() {
    return {R"({"command":["python","train.py","--epochs","3"],"workdir":"/home/alice/exp"})",
            R"({"name":"resnet3","command":["carma-fakejob","--profile","resnet3"],"gpus":1,)"
            R"("memory":{"declared_mib":13236,"profiled_mib":13236,"horus_mib":28923,)"
            R"("faketensor_mib":10666,"gpumemnet_mib":24000},"workdir":"/jobs",)"
            R"("env":{"EPOCHS":"3","PATH":"/usr/bin"},"max_attempts":3,"workload":"resnet3"})",
            R"({"command":["/bin/sh","-c","echo hi"],"gpus":4,"memory_mib":40000,)"
            R"("workdir":"/","memory":null,"name":""})",
            R"({"command": ["a\u00e9\n"], "workdir": "/x", "env": {}, "memory": {}})"};
}

std::vector<std::string> json_tokens() {
    return {"{",  "}", "[", "]", ":", ",", "null", "true", "false", "\"\"", "\"\\u0000\"",
            "\"\\ud800\"", "\"\\\"", "1e400", "-0.0", "[[[[[[[[", "{\"a\":{\"a\":",
            "\"command\"", "\"gpus\"", "\"memory_mib\"", "\"memory\"", "\"declared_mib\"",
            "\"profiled_mib\"", "\"horus_mib\"", "\"faketensor_mib\"", "\"gpumemnet_mib\"",
            "\"workdir\"", "\"env\"", "\"max_attempts\"", "\"workload\"", "\"name\"",
            "\"horus_mib\":9223372036854775807", "\"gpus\":18446744073709551615",
            "\"max_attempts\":1e2", "\"workdir\":\"/\\u0000x\"", "\"memory_mib\":-1"};
}

TEST(FuzzTaskJson, SubmissionBodyNeverThrowsAndAcceptsOnlySaneTasks) {
    // 4 KiB bodies: real ones are a few hundred bytes, and nlohmann::json in a Debug+ASan build
    // is slow enough that 16 KiB bodies took the run past a minute.
    fuzz("task submission json", 3, json_seeds(), json_tokens(), [](const std::string& input) {
        // As the server reads a body: malformed JSON is answered 400 before the daemon sees it.
        const nlohmann::json body = nlohmann::json::parse(input, nullptr, false);
        if (body.is_discarded()) {
            return Verdict::Rejected;
        }
        auto t = daemon::task_from_submission(body);
        if (!t) {
            EXPECT_TRUE(t.error().status == 400 || t.error().status == 422) << escaped(input);
            EXPECT_FALSE(t.error().message.empty()) << escaped(input);
            return Verdict::Rejected;
        }
        EXPECT_FALSE(t->spec.command.empty()) << escaped(input);
        EXPECT_FALSE(t->spec.command.front().empty()) << escaped(input);
        EXPECT_FALSE(t->spec.name.empty()) << escaped(input);
        EXPECT_LE(t->spec.name.size(), 200u) << escaped(input);
        EXPECT_GE(t->spec.gpus, 1) << escaped(input);
        EXPECT_LE(t->spec.gpus, 1024) << escaped(input);
        EXPECT_GE(t->max_attempts, 0) << escaped(input);
        EXPECT_LE(t->max_attempts, 100) << escaped(input);
        EXPECT_TRUE(!t->workdir.empty() && t->workdir.front() == '/') << escaped(input);
        // Strings that reach exec(), chdir() or SQLite as C strings must not be cut short by NUL.
        const auto no_nul = [](const std::string& s) { return s.find('\0') == std::string::npos; };
        EXPECT_TRUE(std::all_of(t->spec.command.begin(), t->spec.command.end(), no_nul))
            << escaped(input);
        EXPECT_TRUE(no_nul(t->workdir)) << escaped(input);
        EXPECT_TRUE(no_nul(t->spec.name)) << escaped(input);
        EXPECT_TRUE(no_nul(t->spec.workload)) << escaped(input);
        for (const auto& [k, v] : t->env) {
            EXPECT_TRUE(!k.empty() && no_nul(k) && no_nul(v)) << escaped(input);
        }
        expect_sane_memory(t->spec.memory, input);
        (void)daemon::task_to_json(*t).dump(-1, ' ', false,
                                            nlohmann::json::error_handler_t::replace);
        return Verdict::Accepted;
    }, 4 * 1024);
}

// ---- traces and CSV ---------------------------------------------------------------------------

std::vector<std::string> trace_seeds() {
    std::vector<std::string> seeds;
    for (const auto& entry : std::filesystem::directory_iterator(kSource / "data/traces")) {
        if (entry.path().extension() == ".csv") {
            seeds.push_back(read_file(entry.path(), 12));
        }
    }
    std::sort(seeds.begin(), seeds.end());  // directory order is not deterministic
    seeds.push_back("submit_offset_s,task_name\n0,resnet3\n5,bert\n");
    seeds.push_back(
        "task_name , submit_offset_s,gpus,memory_gb,standalone_minutes,class\r\n"
        "# a comment\r\nunknown_job, 1.5e1, 2, 0.5, 1e-3, heavy\r\n\r\n");
    return seeds;
}

std::vector<std::string> csv_tokens() {
    return {",", ",,", "\n", "\r\n", "#", "\"", " ", "submit_offset_s", "task_name", "gpus",
            "standalone_minutes", "memory_gb", "class", "light", "medium", "heavy", "1e308",
            "-0", "0.000001"};
}

TEST(FuzzTrace, TraceCsvNeverThrowsAndAcceptsOnlySaneEntries) {
    const model::Catalog& catalog = model::Catalog::embedded();
    fuzz("trace csv", 4, trace_seeds(), csv_tokens(), [&](const std::string& input) {
        auto trace = sim::parse_trace(input, "fuzz.csv");
        if (!trace) {
            EXPECT_FALSE(trace.error().message.empty()) << escaped(input);
            return Verdict::Rejected;
        }
        double last = 0;
        for (const sim::TraceEntry& e : trace->entries) {
            EXPECT_TRUE(std::isfinite(e.submit_s) && e.submit_s >= last) << escaped(input);
            last = e.submit_s;
            EXPECT_FALSE(e.task_name.empty()) << escaped(input);
            if (e.gpus) {
                EXPECT_GE(*e.gpus, 1) << escaped(input);
            }
            if (e.standalone_s) {
                EXPECT_TRUE(std::isfinite(*e.standalone_s) && *e.standalone_s > 0)
                    << escaped(input);
            }
            expect_sane_mib(e.memory_mib, "memory_gb", input);
            // What the simulator does next with each entry.
            const model::WorkloadProfile p = sim::resolve_profile(e, catalog);
            EXPECT_GE(p.gpus, 1) << escaped(input);
        }
        return Verdict::Accepted;
    });
}

TEST(FuzzCsv, CsvReaderNeverThrowsAndKeepsRowsRectangular) {
    fuzz("csv", 5, trace_seeds(), csv_tokens(), [](const std::string& input) {
        auto table = parse_csv(input, "fuzz.csv");
        if (!table) {
            EXPECT_FALSE(table.error().message.empty()) << escaped(input);
            return Verdict::Rejected;
        }
        EXPECT_FALSE(table->header.empty()) << escaped(input);
        EXPECT_EQ(table->rows.size(), table->line_numbers.size()) << escaped(input);
        EXPECT_TRUE(std::is_sorted(table->line_numbers.begin(), table->line_numbers.end()))
            << escaped(input);
        for (std::size_t r = 0; r < table->rows.size(); ++r) {
            EXPECT_EQ(table->rows[r].size(), table->header.size()) << escaped(input);
            for (std::size_t c = 0; c < table->header.size(); ++c) {
                auto v = csv_number(*table, r, static_cast<int>(c), "fuzz.csv");
                if (v) {
                    EXPECT_TRUE(std::isfinite(*v)) << escaped(input);
                }
            }
        }
        return Verdict::Accepted;
    });
}

// ---- memory sizes ---------------------------------------------------------------------------

TEST(FuzzUnits, ParseMemoryNeverThrowsAndStaysWithinAGpu) {
    fuzz("parse_memory", 6,
         {"12GiB", "12000MiB", "12 GB", "40000", "1.5 TiB", " 7 mi ", "0", "16TiB", "0.5g"},
         {"GiB", "MiB", "GB", "MB", "TiB", "g", "m", "e", "E", ".", "-"},
         [](const std::string& input) {
             auto mib = parse_memory(input);
             if (!mib) {
                 EXPECT_FALSE(mib.error().message.empty()) << escaped(input);
                 return Verdict::Rejected;
             }
             expect_sane_mib(*mib, "parse_memory", input);
             return Verdict::Accepted;
         },
         512);
}

TEST(FuzzQuery, QueryParametersNeverThrowAndStayInRange) {
    fuzz("query parameters", 8,
         {"0", "100", "10000", "-5", "9223372036854775807", "18446744073709551611", "stderr",
          "1", "true"},
         {"-", "+", "0", "9", "e", "x", " ", "stdout", "stderr", "yes"},
         [](const std::string& input) {
             auto limit = api::integer_param("limit", input, 1, 10000, 100);
             auto offset = api::integer_param("offset", input, 0,
                                              std::numeric_limits<std::int64_t>::max(), 0);
             auto stream = api::word_param("stream", input, {"stdout", "stderr"}, "stdout");
             auto all = api::flag_param("all", input);
             if (limit) {
                 EXPECT_TRUE(*limit >= 1 && *limit <= 10000) << escaped(input);
             }
             if (offset) {
                 EXPECT_GE(*offset, 0) << escaped(input);
                 const std::string digits = input.starts_with('-') ? input.substr(1) : input;
                 EXPECT_TRUE(!digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
                     return c >= '0' && c <= '9';
                 })) << "only plain digits are numbers: " << escaped(input);
             }
             if (stream) {
                 EXPECT_TRUE(*stream == "stdout" || *stream == "stderr") << escaped(input);
             }
             for (const Error* e : {limit ? nullptr : &limit.error(),
                                    offset ? nullptr : &offset.error(),
                                    stream ? nullptr : &stream.error(),
                                    all ? nullptr : &all.error()}) {
                 if (e != nullptr) {
                     EXPECT_NE(e->message.find("query parameter"), std::string::npos);
                 }
             }
             return limit || offset || stream || all ? Verdict::Accepted : Verdict::Rejected;
         },
         64);
}

// GET /v1/acct's parameters: since is a finite number in range, user text without control
// characters, state a list of non-empty items; every refusal names the parameter.
TEST(FuzzQuery, AcctParametersNeverThrowAndStayInRange) {
    fuzz("acct query parameters", 12,
         {"1764441600", "1764441600.25", "alice", "failed,cancelled", "0", "1e12"},
         {"-", "+", ".", "0", "9", "e", ",", " ", "\x01", "nan", "inf", "succeeded"},
         [](const std::string& input) {
             auto since = api::number_param("since", input, 0, 1e11, 0);
             auto user = api::text_param("user", input, 256);
             auto states = api::list_param("state", input);
             if (since) {
                 EXPECT_TRUE(std::isfinite(*since) && *since >= 0 && *since <= 1e11)
                     << escaped(input);
             }
             if (user) {
                 EXPECT_TRUE(!user->empty() && user->size() <= 256) << escaped(input);
                 EXPECT_TRUE(std::none_of(user->begin(), user->end(), [](char c) {
                     return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                 })) << escaped(input);
             }
             if (states) {
                 for (const std::string& s : *states) {
                     EXPECT_TRUE(!s.empty() && s.find(',') == std::string::npos) << escaped(input);
                 }
             }
             for (const Error* e : {since ? nullptr : &since.error(),
                                    user ? nullptr : &user.error(),
                                    states ? nullptr : &states.error()}) {
                 if (e != nullptr) {
                     EXPECT_NE(e->message.find("query parameter"), std::string::npos);
                 }
             }
             return since || user || states ? Verdict::Accepted : Verdict::Rejected;
         },
         64);
}

TEST(FuzzMpsLimit, PinnedMemLimitNeverThrowsAndRoundTrips) {
    fuzz("parse_pinned_mem_limit", 7,
         {"0=12000M", "GPU-a=12000M,GPU-b=8000M", "0=12G, 1=8GiB ,2=512MB",
          "MIG-GPU-1/2/0=1mib", "GPU-8f1c5b7e-2a44-4c1e-9d0b-6f1e2d3c4b5a=40960M"},
         {"=", ",", "GPU-", "MIG-", "M", "G", "MB", "GB", "MiB", "GiB", "T"},
         [](const std::string& input) {
             auto limits = parse_pinned_mem_limit(input);
             if (!limits) {
                 EXPECT_FALSE(limits.error().message.empty()) << escaped(input);
                 return Verdict::Rejected;
             }
             EXPECT_FALSE(limits->empty()) << escaped(input);
             for (std::size_t i = 0; i < limits->size(); ++i) {
                 const MpsMemLimit& l = (*limits)[i];
                 EXPECT_FALSE(l.device.empty()) << escaped(input);
                 expect_sane_mib(l.limit_mib, "limit", input);
                 for (std::size_t j = 0; j < i; ++j) {
                     EXPECT_NE((*limits)[j].device, l.device) << escaped(input);
                 }
             }
             // What the daemon writes, the emulated GPUs must read back as the same limits.
             std::vector<MpsMemLimit> positive;
             std::copy_if(limits->begin(), limits->end(), std::back_inserter(positive),
                          [](const MpsMemLimit& l) { return l.limit_mib > 0; });
             if (!positive.empty()) {
                 auto again = parse_pinned_mem_limit(format_pinned_mem_limit(positive));
                 EXPECT_TRUE(again && *again == positive) << escaped(input);
             }
             return Verdict::Accepted;
         },
         512);
}

// ---- the cluster wire -------------------------------------------------------------------------

std::string binary_bytes() {
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
        bytes += static_cast<char>(b);
    }
    return bytes;
}

// Copies of `seeds` (JSON texts) with one number changed to a value beyond some field's range,
// for every number in them, and with one value replaced by nesting past the depth bound: the
// byte mutations alone rarely leave valid JSON with a number in a place that matters.
std::vector<std::string> with_edge_values(std::vector<std::string> seeds) {
    const std::vector<nlohmann::json> edges = {
        1e300, -1e300, 9223372036854775808ULL, -0.5, nlohmann::json::parse("18446744073709551616"),
        -1, 4294967295LL, 2147483648LL, 64, 0};
    nlohmann::json deep = 1;
    for (int i = 0; i < 70; ++i) {
        deep = i % 2 ? nlohmann::json::array({deep}) : nlohmann::json{{"a", deep}};
    }
    const std::size_t n = seeds.size();
    for (std::size_t k = 0; k < n; ++k) {
        const nlohmann::json j = nlohmann::json::parse(seeds[k]);
        const nlohmann::json leaves = j.flatten();  // items() refers to it: keep it alive
        std::size_t e = 0;
        for (const auto& [where, value] : leaves.items()) {
            const nlohmann::json::json_pointer at(where);
            if (value.is_number()) {
                for (int twice = 0; twice < 2; ++twice) {
                    nlohmann::json changed = j;
                    changed[at] = edges[e++ % edges.size()];
                    seeds.push_back(changed.dump());
                }
            } else if (e++ % 4 == 0) {
                nlohmann::json changed = j;
                changed[at] = deep;
                seeds.push_back(changed.dump());
            }
        }
    }
    return seeds;
}

std::vector<std::string> report_seeds() {
    using namespace cluster;
    AgentReport r;
    r.node = "node-1.a_b";
    r.host = "node-1";
    r.instance = "00ff00ff00ff00ff";
    r.slurm_job = "417";
    r.uid = 1000;
    r.backend = "emulated:2xA100-40GB";
    for (int i = 0; i < 2; ++i) {
        device::GpuInfo g;
        g.index = i;
        g.uuid = "GPU-" + std::to_string(i);
        g.name = "A100-40GB (emulated)";
        g.total_mib = 40000;
        r.gpus.push_back(g);
        device::GpuSample s;
        s.index = i;
        s.free_mib = 30000;
        s.used_mib = 10000;
        s.util = 0.5;
        s.smact = 0.25;
        s.power_w = 250.5;
        s.energy_j = 1e6;
        s.age_s = 0.5;
        s.sources = MetricSources::all(MetricSource::Emulated);
        s.processes.push_back(device::GpuProcess{100 + i, 10000, i == 1, 0.25});
        r.samples.push_back(s);
    }
    AttemptReport running;
    running.name = "12-1";
    running.dir = "/state/attempts/12-1";
    running.shim_pid = 77;
    running.members = {78, 79};
    running.logs.push_back(LogChunk{false, 0, "epoch 1\n", false});
    running.logs.push_back(LogChunk{true, 4096, binary_bytes(), false});
    AttemptReport ended;
    ended.name = "13-2";
    ended.dir = "/state/attempts/13-2";
    ended.state = AttemptReport::State::Ended;
    ended.exit = exec::ExitRecord{true, 1, 9, true, 1700000000.25, "killed"};
    ended.stderr_tail = "CUDA out of memory";
    ended.logs.push_back(LogChunk{true, 10, "", true});
    AttemptReport vanished;
    vanished.name = "14-1";
    vanished.state = AttemptReport::State::Vanished;
    r.attempts = {running, ended, vanished};
    r.absent = {"15-1", "16-3"};
    r.replies.push_back(LaunchReply{9, true, 77, "/state/attempts/12-1", "", false});
    r.replies.push_back(LaunchReply{10, false, 0, "", "no such user", true});

    std::vector<std::string> seeds = {to_json(r).dump()};
    AgentReport lost = r;
    lost.attempts.clear();
    lost.scan_error = "cannot read /state/attempts: Stale file handle";
    lost.ending = true;
    seeds.push_back(to_json(lost).dump(2));
    AgentReport bare;
    bare.node = "n";
    seeds.push_back(to_json(bare).dump());
    return with_edge_values(std::move(seeds));
}

std::vector<std::string> answer_seeds() {
    using namespace cluster;
    exec::LaunchRequest req;
    req.argv = {"python", "train.py", "--lr", "0.1"};
    req.workdir = "/home/u";
    req.env = {{"PATH", "/usr/bin"}, {"CUDA_VISIBLE_DEVICES", "GPU-0"}};
    req.uid = 1000;
    req.gid = 1000;
    req.groups = {27, 1000};
    req.switch_user = true;
    req.attempt_dir = "12-1";
    req.kill_grace_s = 10;
    req.files = {exec::TaskFile{"/var/lib/carma/emulator", "CARMA_EMULATOR_FD"}};
    Command launch;
    launch.kind = Command::Kind::Launch;
    launch.id = 9;
    launch.name = "12-1";
    launch.request_json = *exec::request_to_json(req);
    const auto command = [](Command::Kind kind, const char* name) {
        Command c;
        c.kind = kind;
        c.name = name;
        return c;
    };
    const Command stop = command(Command::Kind::Stop, "11-1");
    const Command forget = command(Command::Kind::Forget, "10-4");
    Command logs = command(Command::Kind::Logs, "12-1");
    logs.stdout_offset = 4096;
    logs.stderr_offset = 9223372036854775807ULL;
    const Command check = command(Command::Kind::Check, "9-1");
    return with_edge_values({to_json(std::vector<Command>{launch, stop, forget, logs, check}).dump(),
                             to_json(std::vector<Command>{launch}).dump(1),
                             to_json(std::vector<Command>{}).dump()});
}

// JSON structure, the wire's field names and values, numbers beyond every field's range, and
// nesting past the reader's depth bound.
std::vector<std::string> wire_tokens() {
    std::string deep_objects;
    for (int i = 0; i < 70; ++i) {
        deep_objects += "{\"a\":";
    }
    deep_objects += "1" + std::string(70, '}');
    return {"{", "}", "[", "]", ":", ",", "\"", "null", "true", "false", "{}", "[]", "\"\"",
            "1e300", "-1e300", "9223372036854775808", "-9223372036854775809", "-0.5", "0.5",
            "1e999", "-1e-300", "4294967295", "4294967294", "65535", "63", "64", "2000000000",
            "\"index\"", "\"gpus\"", "\"samples\"", "\"processes\"", "\"pid\"", "\"attempts\"",
            "\"members\"", "\"exit\"", "\"exit_code\"", "\"signal\"", "\"ended_at\"", "\"logs\"",
            "\"offset\"", "\"data\"", "\"stream\"", "\"stderr\"", "\"absent\"", "\"replies\"",
            "\"node\"", "\"uid\"", "\"version\"", "\"commands\"", "\"type\"", "\"launch\"",
            "\"logs\"", "\"check\"", "\"name\"", "\"request\"", "\"argv\"", "\"groups\"",
            "\"kill_grace_s\"", "\"stdout_offset\"", "\"12-1\"", "\"012-1\"", "\"-1-1\"",
            "\"../x\"", "\"a/b\"", "\"n 1\"", "\"AAAA\"", "\"A===\"", "\"////\"", "\\u0000",
            "\\ud800", "\\\"", std::string(65, '['), std::string(65, ']'), deep_objects,
            "\"exit\":" + deep_objects, "\"members\":[" + std::string(70, '[')};
}

// Whether `j` nests more than `depth` arrays and objects (recursing at most `depth` levels).
bool deeper_than(const nlohmann::json& j, std::size_t depth) {
    if (!j.is_structured()) {
        return false;
    }
    if (depth == 0) {
        return true;
    }
    return std::any_of(j.begin(), j.end(),
                       [&](const nlohmann::json& child) { return deeper_than(child, depth - 1); });
}

// What every refusal of the wire must be: an error with a message the hub can send back as
// JSON (nlohmann's dump() throws on invalid UTF-8).
void expect_sendable(const Error& e, const std::string& input) {
    EXPECT_FALSE(e.message.empty()) << escaped(input);
    const nlohmann::json reply = {{"error", e.message}};
    EXPECT_NO_THROW((void)reply.dump()) << escaped(e.message) << " for " << escaped(input);
}

// The wire's reader on `input` both ways the hub may get it: through parse_wire_json, and
// through nlohmann's own parser (the reader then bounds the depth itself). Returns the parsed
// value when parse_wire_json took it.
std::optional<nlohmann::json> parse_both_ways(
    const std::string& input, const std::function<bool(const nlohmann::json&)>& accepts) {
    auto parsed = cluster::parse_wire_json(input);
    const nlohmann::json raw = nlohmann::json::parse(input, nullptr, false);
    if (!parsed) {
        expect_sendable(parsed.error(), input);
        // Refused for its depth (the only thing nlohmann accepts and this does not): the reader
        // refuses the value too, if it is that deep (a duplicate key may have dropped the deep
        // part: nlohmann keeps the last).
        if (!raw.is_discarded()) {
            EXPECT_NE(parsed.error().message.find("deeper than"), std::string::npos)
                << escaped(input);
            if (deeper_than(raw, cluster::kMaxWireDepth)) {
                EXPECT_FALSE(accepts(raw)) << escaped(input);
            }
        }
        return std::nullopt;
    }
    EXPECT_FALSE(raw.is_discarded()) << escaped(input);
    return std::move(*parsed);
}

TEST(FuzzWire, AgentReportNeverThrowsAndAcceptsOnlyBoundedReports) {
    using namespace cluster;
    fuzz("agent report", 13, report_seeds(), wire_tokens(), [](const std::string& input) {
        const auto accepts = [](const nlohmann::json& j) { return report_from_json(j).has_value(); };
        const std::optional<nlohmann::json> body = parse_both_ways(input, accepts);
        if (!body) {
            return Verdict::Rejected;
        }
        auto r = report_from_json(*body);
        if (!r) {
            expect_sendable(r.error(), input);
            return Verdict::Rejected;
        }
        EXPECT_TRUE(!r->node.empty() && r->node.size() <= kMaxNodeName) << escaped(input);
        EXPECT_EQ(r->node.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789._-"),
                  std::string::npos)
            << escaped(input);
        EXPECT_NE(r->uid, static_cast<uid_t>(-1)) << escaped(input);
        EXPECT_LE(r->gpus.size(), static_cast<std::size_t>(kMaxNodeGpus)) << escaped(input);
        for (const device::GpuInfo& g : r->gpus) {
            EXPECT_TRUE(g.index >= 0 && g.index < kMaxNodeGpus && g.total_mib >= 0)
                << escaped(input);
        }
        EXPECT_LE(r->samples.size(), kMaxSamples) << escaped(input);
        for (const device::GpuSample& s : r->samples) {
            EXPECT_TRUE(s.index >= 0 && s.index < kMaxNodeGpus) << escaped(input);
            EXPECT_TRUE(s.free_mib >= 0 && s.used_mib >= 0 && std::isfinite(s.age_s))
                << escaped(input);
            for (const std::optional<double>& v :
                 {s.util, s.smact, s.smocc, s.drama, s.power_w, s.energy_j}) {
                EXPECT_TRUE(!v || std::isfinite(*v)) << escaped(input);
            }
            EXPECT_LE(s.processes.size(), kMaxSampleProcesses) << escaped(input);
            for (const device::GpuProcess& p : s.processes) {
                EXPECT_TRUE(p.pid >= 0 && p.used_mib >= 0) << escaped(input);
            }
        }
        EXPECT_LE(r->attempts.size(), kMaxAttempts) << escaped(input);
        for (const AttemptReport& a : r->attempts) {
            EXPECT_TRUE(parse_attempt_name(a.name)) << escaped(input);
            EXPECT_GE(a.shim_pid, 0) << escaped(input);
            EXPECT_TRUE(a.state != AttemptReport::State::Ended || a.exit) << escaped(input);
            EXPECT_TRUE(!a.exit || std::isfinite(a.exit->ended_at)) << escaped(input);
            EXPECT_LE(a.members.size(), kMaxMembers) << escaped(input);
            EXPECT_TRUE(a.members.empty() || *a.members.begin() > 0) << escaped(input);
            EXPECT_LE(a.stderr_tail.size(), kMaxStderrTail) << escaped(input);
            EXPECT_LE(a.logs.size(), kMaxLogChunks) << escaped(input);
            for (const LogChunk& c : a.logs) {
                EXPECT_TRUE(c.data.size() <= kMaxLogChunkBytes && c.offset <= kMaxLogOffset)
                    << escaped(input);
            }
        }
        EXPECT_LE(r->absent.size(), kMaxAbsent) << escaped(input);
        for (const std::string& name : r->absent) {
            EXPECT_TRUE(parse_attempt_name(name)) << escaped(input);
        }
        EXPECT_LE(r->replies.size(), kMaxReplies) << escaped(input);
        // What was accepted is written and read back the same way.
        auto again = parse_wire_json(to_json(*r).dump());
        EXPECT_TRUE(again && report_from_json(*again)) << escaped(input);
        return Verdict::Accepted;
    }, 4 * 1024);
}

TEST(FuzzWire, ServerAnswerNeverThrowsAndAcceptsOnlyValidCommands) {
    using namespace cluster;
    fuzz("server answer", 14, answer_seeds(), wire_tokens(), [](const std::string& input) {
        const auto accepts = [](const nlohmann::json& j) {
            return commands_from_json(j).has_value();
        };
        const std::optional<nlohmann::json> body = parse_both_ways(input, accepts);
        if (!body) {
            return Verdict::Rejected;
        }
        auto commands = commands_from_json(*body);
        if (!commands) {
            expect_sendable(commands.error(), input);
            return Verdict::Rejected;
        }
        EXPECT_LE(commands->size(), kMaxCommands) << escaped(input);
        for (const Command& c : *commands) {
            EXPECT_TRUE(parse_attempt_name(c.name)) << escaped(input);
            EXPECT_TRUE(c.stdout_offset <= kMaxLogOffset && c.stderr_offset <= kMaxLogOffset)
                << escaped(input);
            if (c.kind == Command::Kind::Launch) {
                EXPECT_TRUE(std::isfinite(c.request.kill_grace_s) && c.request.kill_grace_s >= 0)
                    << escaped(input);
                EXPECT_NE(c.request.uid, static_cast<uid_t>(-1)) << escaped(input);
                EXPECT_NE(c.request.gid, static_cast<gid_t>(-1)) << escaped(input);
                EXPECT_TRUE(exec::request_from_json(c.request_json)) << escaped(input);
            }
        }
        auto again = parse_wire_json(to_json(*commands).dump());
        EXPECT_TRUE(again && commands_from_json(*again)) << escaped(input);
        return Verdict::Accepted;
    }, 4 * 1024);
}

}  // namespace
}  // namespace carma::fuzz
