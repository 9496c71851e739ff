// The agents' wire read from a sender that holds the token but not good intentions
// (cluster/wire.h): numbers out of their type's range, lists and texts beyond their bounds,
// nesting deep enough to overflow a recursion, names that are paths. Each is refused with a
// message naming the field; none crashes or reaches undefined behaviour (run under UBSan).

#include "cluster/wire.h"
#include "cluster/reports.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::cluster {
namespace {

using nlohmann::json;
using testing::HasSubstr;

AgentReport small_report() {
    AgentReport r;
    r.node = "gpu-node01.cluster_a";
    r.host = "gpu-node01";
    r.instance = "0123abcd";
    r.backend = "emulated:1xA100-40GB";
    device::GpuInfo g;
    g.index = 0;
    g.uuid = "GPU-0";
    g.name = "A100-40GB (emulated)";
    g.total_mib = 40000;
    r.gpus.push_back(g);
    device::GpuSample s;
    s.index = 0;
    s.free_mib = 30000;
    s.used_mib = 10000;
    s.smact = 0.25;
    s.processes.push_back(device::GpuProcess{100, 10000, false, 0.25});
    r.samples.push_back(s);
    AttemptReport a = ended_attempt();
    a.logs.push_back(LogChunk{false, 0, "hello\n", false});
    r.attempts.push_back(a);
    r.absent = {"13-2"};
    r.replies.push_back(LaunchReply{9, true, 77, "/state/attempts/12-1", "", false});
    return r;
}

// The error of reading `j` as a report ("" when it was read).
std::string report_error(const json& j) {
    auto r = report_from_json(j);
    return r ? "" : r.error().message;
}

std::string commands_error(const json& j) {
    auto c = commands_from_json(j);
    return c ? "" : c.error().message;
}

// This test verifies that the report this file starts from is read, so that each refusal below
// is the one change's doing.
TEST(WireTest, TheBaseReportIsRead) {
    EXPECT_EQ(report_error(to_json(small_report())), "");
}

// This test verifies that a number outside its field's type or range is refused with the field's
// path: nlohmann's get<int>() of 1e300 is undefined behaviour and get<unsigned>() of -1 wraps;
// an infinite double is refused too.
TEST(WireTest, OutOfRangeNumbersNameTheField) {
    struct Case {
        json::json_pointer where;
        json value;
        std::string path;
    };
    // Not from text: nlohmann refuses "1e999" (out_of_range.406); a value built in code can be.
    const json huge = std::numeric_limits<double>::infinity();
    const std::vector<Case> cases = {
        {json::json_pointer("/gpus/0/index"), 1e300, "report.gpus[0].index"},
        {json::json_pointer("/gpus/0/index"), -1e300, "report.gpus[0].index"},
        {json::json_pointer("/gpus/0/index"), 64, "report.gpus[0].index"},
        {json::json_pointer("/gpus/0/index"), 2000000000, "report.gpus[0].index"},
        {json::json_pointer("/gpus/0/index"), 0.5, "report.gpus[0].index"},
        {json::json_pointer("/gpus/0/total_mib"), 9223372036854775808ULL, "report.gpus[0].total_mib"},
        {json::json_pointer("/gpus/0/total_mib"), -1, "report.gpus[0].total_mib"},
        {json::json_pointer("/samples/0/free_mib"), 1e19, "report.samples[0].free_mib"},
        {json::json_pointer("/samples/0/smact"), huge, "report.samples[0].smact"},
        {json::json_pointer("/samples/0/age_s"), huge, "report.samples[0].age_s"},
        {json::json_pointer("/samples/0/processes/0/pid"), -5, "report.samples[0].processes[0].pid"},
        {json::json_pointer("/samples/0/processes/0/pid"), 4294967296LL,
         "report.samples[0].processes[0].pid"},
        {json::json_pointer("/uid"), -1, "report.uid"},
        {json::json_pointer("/uid"), 4294967295LL, "report.uid"},
        {json::json_pointer("/uid"), 1e300, "report.uid"},
        {json::json_pointer("/version"), 1e300, "report.version"},
        {json::json_pointer("/attempts/0/shim_pid"), -0.5, "report.attempts[0].shim_pid"},
        {json::json_pointer("/attempts/0/shim_pid"), -1, "report.attempts[0].shim_pid"},
        {json::json_pointer("/attempts/0/members/1"), 0, "report.attempts[0].members[1]"},
        {json::json_pointer("/attempts/0/members/1"), 1e300, "report.attempts[0].members[1]"},
        {json::json_pointer("/attempts/0/logs/0/offset"), -1, "report.attempts[0].logs[0].offset"},
        {json::json_pointer("/attempts/0/logs/0/offset"), 18446744073709551615ULL,
         "report.attempts[0].logs[0].offset"},
        {json::json_pointer("/attempts/0/exit/exit_code"), 1e300, "report.attempts[0].exit"},
        {json::json_pointer("/attempts/0/exit/ended_at"), huge, "report.attempts[0].exit"},
        {json::json_pointer("/replies/0/id"), -1, "report.replies[0].id"},
        {json::json_pointer("/replies/0/shim_pid"), 1e300, "report.replies[0].shim_pid"},
    };
    for (const Case& c : cases) {
        json j = to_json(small_report());
        j[c.where] = c.value;
        EXPECT_THAT(report_error(j), HasSubstr(c.path)) << c.where << " = " << c.value.dump();
    }
    // Integral values written as floats are still integers.
    json j = to_json(small_report());
    j["gpus"][0]["index"] = 0.0;
    j["uid"] = 1000.0;
    EXPECT_EQ(report_error(j), "");
}

// This test verifies that the answer's numbers are range-checked too.
TEST(WireTest, OutOfRangeNumbersInAnswersNameTheField) {
    const json logs = {{"version", kWireVersion},
                       {"commands",
                        {{{"type", "logs"}, {"name", "12-1"}, {"stdout_offset", -1},
                          {"stderr_offset", 0}}}}};
    EXPECT_THAT(commands_error(logs), HasSubstr("answer.commands[0].stdout_offset"));
    json launch = {{"version", kWireVersion},
                   {"commands", {{{"type", "launch"}, {"id", 1e300}, {"name", "12-1"}}}}};
    EXPECT_THAT(commands_error(launch), HasSubstr("answer.commands[0].id"));
    json version = {{"version", 1e300}, {"commands", json::array()}};
    EXPECT_THAT(commands_error(version), HasSubstr("answer.version"));
}

// This test verifies that a launch request and an exit record (exec/launch.h, also the shim's
// files) refuse numbers that nlohmann would convert with undefined behaviour.
TEST(WireTest, LaunchRequestAndExitRecordRefuseOutOfRangeNumbers) {
    exec::LaunchRequest req;
    req.argv = {"true"};
    req.workdir = "/";
    req.attempt_dir = "12-1";
    req.groups = {10, 20};
    auto text = exec::request_to_json(req);
    ASSERT_TRUE(text) << text.error().message;
    ASSERT_TRUE(exec::request_from_json(*text));
    for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
             {"uid", 1e300}, {"uid", -1}, {"uid", 4294967295LL}, {"gid", 0.5},
             {"kill_grace_s", -1}, {"kill_grace_s", std::numeric_limits<double>::infinity()}}) {
        json j = json::parse(*text);
        j[key] = value;
        auto r = exec::request_from_json(j.dump());
        ASSERT_FALSE(r) << key << " = " << value.dump();
        EXPECT_THAT(r.error().message, HasSubstr(key));
    }
    json j = json::parse(*text);
    j["groups"] = {1, -7};
    EXPECT_THAT(exec::request_from_json(j.dump()).error().message, HasSubstr("groups"));

    const std::string exit = exec::exit_to_json(exec::ExitRecord{true, 3, 9, false, 1.5, ""});
    ASSERT_TRUE(exec::exit_from_json(exit));
    for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
             {"exit_code", 1e300}, {"exit_code", 2147483648LL}, {"signal", -1e300},
             {"ended_at", std::numeric_limits<double>::infinity()}}) {
        json e = json::parse(exit);
        e[key] = value;
        auto r = exec::exit_from_json(e.dump());
        ASSERT_FALSE(r) << key << " = " << value.dump();
        EXPECT_THAT(r.error().message, HasSubstr(key));
    }
}

// This test verifies that a message nested 100,000 deep is refused with a message, by the
// parser the hub uses and by the readers given a value parsed without it (copying or dumping
// such a value recurses once per level and overflowed the stack).
TEST(WireTest, DeepNestingIsRefusedWithoutACrash) {
    constexpr std::size_t kDeep = 100000;
    const std::string arrays = std::string(kDeep, '[') + std::string(kDeep, ']');
    auto parsed = parse_wire_json(arrays);
    ASSERT_FALSE(parsed);
    EXPECT_THAT(parsed.error().message, HasSubstr("deeper than 64"));

    std::string exit_bomb = to_json(small_report()).dump();
    const std::string key = "\"exit\":";
    const auto at = exit_bomb.find(key);
    ASSERT_NE(at, std::string::npos);
    std::string objects;
    for (std::size_t i = 0; i < kDeep; ++i) {
        objects += "{\"a\":";
    }
    objects += "1" + std::string(kDeep, '}');
    exit_bomb.insert(at + key.size(), objects + ",\"was\":");
    EXPECT_THAT(parse_wire_json(exit_bomb).error().message, HasSubstr("deeper than 64"));
    // Through nlohmann's own parser (iterative, as is its destructor), straight to the reader.
    const json deep = json::parse(exit_bomb);
    EXPECT_THAT(report_error(deep), HasSubstr("nested deeper than 64"));
    EXPECT_THAT(commands_error(json::parse(arrays)), HasSubstr("nested deeper than 64"));

    // Exactly 64 is fine; brackets inside strings do not count.
    const std::string at_limit = std::string(64, '[') + std::string(64, ']');
    EXPECT_TRUE(parse_wire_json(at_limit));
    EXPECT_TRUE(parse_wire_json("{\"s\":\"" + std::string(1000, '[') + "\\\"[\"}"));
    EXPECT_FALSE(parse_wire_json(std::string(65, '[') + std::string(65, ']')));
}

// This test verifies that parse_wire_json bounds the size and that its errors are printable
// whatever bytes the text has, so the hub can send them back as JSON.
TEST(WireTest, ParseWireJsonBoundsSizeAndKeepsErrorsPrintable) {
    auto big = parse_wire_json(std::string(100, ' ') + "{}", 64);
    ASSERT_FALSE(big);
    EXPECT_THAT(big.error().message, HasSubstr("more than the 64"));
    EXPECT_TRUE(parse_wire_json("  {\"a\": [1, 2.5, null]}  "));

    for (const std::string& bad : std::vector<std::string>{std::string("{\"a\":\xff\xfe}"), std::string("\xc0\x80"),
                                  std::string("{\"a\":\"\xed\xa0\x80\"}"), std::string("[1,"),
                                  std::string("{\"a\":1}trailing"), std::string("\0", 1)}) {
        auto r = parse_wire_json(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_THAT(r.error().message, HasSubstr("not JSON"));
        // Valid UTF-8 as JSON: dump() throws type_error.316 otherwise.
        const json reply = {{"error", r.error().message}};
        EXPECT_NO_THROW((void)reply.dump()) << r.error().message;
    }
}

// This test verifies that lists and texts beyond their bounds are refused, naming the field.
TEST(WireTest, BoundsAreRefused) {
    const auto with = [](const char* pointer, json value) {
        json j = to_json(small_report());
        j[json::json_pointer(pointer)] = std::move(value);
        return report_error(j);
    };
    const json gpu = to_json(small_report())["gpus"][0];
    EXPECT_THAT(with("/gpus", json(std::vector<json>(kMaxNodeGpus + 1, gpu))),
                HasSubstr("report.gpus: expected at most 64 entries"));
    const json sample = to_json(small_report())["samples"][0];
    EXPECT_THAT(with("/samples", json(std::vector<json>(kMaxSamples + 1, sample))),
                HasSubstr("report.samples"));
    const json proc = sample["processes"][0];
    EXPECT_THAT(with("/samples/0/processes", json(std::vector<json>(kMaxSampleProcesses + 1, proc))),
                HasSubstr("report.samples[0].processes"));
    EXPECT_THAT(with("/attempts", json(std::vector<json>(kMaxAttempts + 1, json::object()))),
                HasSubstr("report.attempts"));
    EXPECT_THAT(with("/attempts/0/members", json(std::vector<int>(kMaxMembers + 1, 5))),
                HasSubstr("report.attempts[0].members"));
    const json chunk = to_json(small_report())["attempts"][0]["logs"][0];
    EXPECT_THAT(with("/attempts/0/logs", json(std::vector<json>(kMaxLogChunks + 1, chunk))),
                HasSubstr("report.attempts[0].logs"));
    EXPECT_THAT(with("/attempts/0/logs/0/data", std::string(4 * (kMaxLogChunkBytes / 3 + 2), 'A')),
                HasSubstr("report.attempts[0].logs[0].data"));
    EXPECT_THAT(with("/attempts/0/stderr_tail", std::string(kMaxStderrTail + 1, 'x')),
                HasSubstr("report.attempts[0].stderr_tail"));
    EXPECT_EQ(with("/attempts/0/stderr_tail", std::string(kMaxStderrTail, 'x')), "");
    EXPECT_THAT(with("/replies", json(std::vector<json>(kMaxReplies + 1, json::object()))),
                HasSubstr("report.replies"));
    EXPECT_THAT(with("/absent", json(std::vector<std::string>(kMaxAbsent + 1, "1-1"))),
                HasSubstr("report.absent"));
    EXPECT_THAT(with("/gpus/0/uuid", std::string(kMaxShortText + 1, 'u')),
                HasSubstr("report.gpus[0].uuid"));
    EXPECT_THAT(with("/host", std::string(kMaxShortText + 1, 'h')), HasSubstr("report.host"));
    EXPECT_THAT(with("/scan_error", std::string(kMaxErrorText + 1, 'e')),
                HasSubstr("report.scan_error"));
    EXPECT_THAT(with("/replies/0/error", std::string(kMaxErrorText + 1, 'e')),
                HasSubstr("report.replies[0].error"));
    EXPECT_THAT(with("/node", std::string(kMaxNodeName + 1, 'n')), HasSubstr("report.node"));
    EXPECT_EQ(with("/node", std::string(kMaxNodeName, 'n')), "");

    json answer = {{"version", kWireVersion},
                   {"commands", std::vector<json>(kMaxCommands + 1,
                                                  {{"type", "stop"}, {"name", "1-1"}})}};
    EXPECT_THAT(commands_error(answer), HasSubstr("answer.commands: expected at most 4096"));
}

// This test verifies that a node name is a plain name: a '/', a space, a NUL or a non-ASCII
// letter is refused (it names files and log lines on the server).
TEST(WireTest, NodeNamesThatAreNotPlainNamesAreRefused) {
    for (const std::string& bad :
         std::vector<std::string>{"../etc", "a/b", "node 1", " node", std::string("n\0x", 3),
                                  "n\xc3\xa9", "n\n", ""}) {
        json j = to_json(small_report());
        j["node"] = bad;
        EXPECT_THAT(report_error(j), HasSubstr("report.node")) << bad;
    }
    json j = to_json(small_report());
    j["node"] = "A.b_c-9";
    EXPECT_EQ(report_error(j), "");
}

// This test verifies that attempt names in reports and commands are "<task>-<attempt>" and
// nothing else, and that parse_attempt_name takes no sign, space, leading zero or overflow.
TEST(WireTest, AttemptNamesAreStrict) {
    EXPECT_EQ(parse_attempt_name("12-1"), (std::pair<std::int64_t, int>{12, 1}));
    EXPECT_EQ(parse_attempt_name("0-0"), (std::pair<std::int64_t, int>{0, 0}));
    EXPECT_EQ(parse_attempt_name("9223372036854775807-2147483647"),
              (std::pair<std::int64_t, int>{INT64_MAX, INT32_MAX}));
    for (const char* bad : {"", "-", "12", "12-", "-1", " 12-1", "12- 1", "12-1 ", "+12-1",
                            "12-+1", "12--1", "-12-1", "012-1", "12-01", "1x-1", "12-1x",
                            "9223372036854775808-1", "1-2147483648", "12-1-1", "../12-1"}) {
        EXPECT_FALSE(parse_attempt_name(bad)) << bad;
    }
    json j = to_json(small_report());
    j["attempts"][0]["name"] = "../../etc";
    EXPECT_THAT(report_error(j), HasSubstr("report.attempts[0].name"));
    j = to_json(small_report());
    j["absent"] = {"12-1", "stray"};
    EXPECT_THAT(report_error(j), HasSubstr("report.absent[1]"));
    for (const char* type : {"stop", "forget", "check", "logs"}) {
        json answer = {{"version", kWireVersion},
                       {"commands", {{{"type", type}, {"name", "lost+found"}}}}};
        EXPECT_THAT(commands_error(answer), HasSubstr("answer.commands[0].name")) << type;
    }
}

// This test verifies that log bytes of every value survive the wire (base64), at their offset.
TEST(WireTest, LogChunkWithBinaryDataRoundTrips) {
    AgentReport r = small_report();
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
        bytes += static_cast<char>(b);
    }
    r.attempts[0].logs = {LogChunk{false, 1234, bytes, false}, LogChunk{true, 0, "", true},
                          LogChunk{true, 7, bytes + bytes.substr(0, 1), true}};
    const std::string text = to_json(r).dump();
    auto parsed = parse_wire_json(text);
    ASSERT_TRUE(parsed) << parsed.error().message;
    auto back = report_from_json(*parsed);
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_EQ(back->attempts[0].logs.size(), 3u);
    const LogChunk& a = back->attempts[0].logs[0];
    EXPECT_FALSE(a.stderr_stream);
    EXPECT_EQ(a.offset, 1234u);
    EXPECT_EQ(a.data, bytes);
    EXPECT_FALSE(a.eof);
    EXPECT_TRUE(back->attempts[0].logs[1].stderr_stream);
    EXPECT_EQ(back->attempts[0].logs[1].data, "");
    EXPECT_TRUE(back->attempts[0].logs[1].eof);
    EXPECT_EQ(back->attempts[0].logs[2].data, bytes + bytes.substr(0, 1));
    EXPECT_EQ(back->attempts[0].logs[2].offset, 7u);

    json j = to_json(r);
    j["attempts"][0]["logs"][0]["data"] = "not base64!";
    EXPECT_THAT(report_error(j), HasSubstr("report.attempts[0].logs[0].data"));
}

}  // namespace
}  // namespace carma::cluster
