// Fuzz tests for the parsers of untrusted text: task files (YAML and .rad), the JSON body of
// POST /v1/tasks, the API's query parameters, trace CSVs, memory sizes and the MPS memory limit
// variable. Each target runs a
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
#include "api/task_file.h"
#include "core/csv.h"
#include "core/mps_limit.h"
#include "core/units.h"
#include "daemon/task_json.h"
#include "fuzz/mutator.h"
#include "model/catalog.h"
#include "sim/trace.h"

namespace carma::fuzz {
namespace {

// The least every target runs in CI; CARMA_FUZZ_RUNS may only raise it.
constexpr std::size_t kMinRuns = 20000;

std::size_t runs() {
    if (const char* env = std::getenv("CARMA_FUZZ_RUNS")) {
        return std::max<std::size_t>(kMinRuns, std::strtoull(env, nullptr, 10));
    }
    return kMinRuns;
}

std::uint64_t seed_for(std::uint64_t target) {
    std::uint64_t extra = 0;
    if (const char* env = std::getenv("CARMA_FUZZ_SEED")) {
        extra = std::strtoull(env, nullptr, 10);
    }
    return target * 0x100000001b3ULL ^ extra;
}

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
        EXPECT_GE(*r.gpus, 1) << escaped(input);
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

// The twelve lines of resnet3.rad (as in tests/api/task_file_test.cpp) and shorter variants.
std::vector<std::string> rad_seeds() {
    return {"# assumption is that model.txt file is in this directory\n"
            "conda activate tf\n"
            "python /home/user/workloads/resnet50.py --batch_size 128\n"
            "resnet50_128.model\n"
            "/raid/datasets/imagenet\n"
            "128\n"
            "exclusive\n"
            "1\n"
            "13236\n"
            "28923.25\n"
            "10666.00724\n"
            "24000\n",
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

}  // namespace
}  // namespace carma::fuzz
