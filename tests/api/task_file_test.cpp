#include "api/task_file.h"
#include "api/rad_sample.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carma::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TaskFileContext yaml_context() {
    return TaskFileContext{"exp/task.yaml", "task", "/home/alice/exp", "/home/alice"};
}

Result<SubmitRequest> parse_yaml(const std::string& text) {
    return parse_yaml_task(text, yaml_context());
}

std::string yaml_error(const std::string& text) {
    auto r = parse_yaml(text);
    return r ? std::string("(parsed)") : r.error().message;
}

// This test verifies that a file using every field turns into the request it describes, with
// the relative workdir resolved against the file's directory and memory units converted to MiB.
TEST(TaskFileTest, YamlWithEveryField) {
    auto r = parse_yaml(
        "name: resnet3\n"
        "command: [python, resnet50.py, --batch_size, \"128\"]\n"
        "gpus: 2\n"
        "memory: 13GiB\n"
        "profiled_memory: 13236\n"
        "estimates: {horus: 28923, faketensor: 10666MiB, gpumemnet: 24 GB}\n"
        "workdir: runs/../out\n"
        "env: {EPOCHS: 3, MODE: fast}\n"
        "max_attempts: 5\n"
        "workload: resnet3\n");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->name, "resnet3");
    EXPECT_THAT(r->command, ElementsAre("python", "resnet50.py", "--batch_size", "128"));
    EXPECT_EQ(r->gpus, 2);
    EXPECT_EQ(r->memory.declared_mib, 13 * 1024);  // 13GiB = 13,312 MiB
    EXPECT_EQ(r->memory.profiled_mib, 13236);      // a bare number is MiB
    EXPECT_EQ(r->memory.horus_mib, 28923);
    EXPECT_EQ(r->memory.faketensor_mib, 10666);
    EXPECT_EQ(r->memory.gpumemnet_mib, 24000);  // GB = 1000 MiB, as the paper's tables
    EXPECT_EQ(r->workdir, "/home/alice/exp/out");
    EXPECT_EQ(r->env.at("EPOCHS"), "3");
    EXPECT_EQ(r->env.at("MODE"), "fast");
    EXPECT_EQ(r->max_attempts, 5);
    EXPECT_EQ(r->workload, "resnet3");

    const nlohmann::json body = request_body(*r);
    EXPECT_EQ(body["memory"]["declared_mib"], 13312);
    EXPECT_EQ(body["memory"]["gpumemnet_mib"], 24000);
    EXPECT_EQ(body["workdir"], "/home/alice/exp/out");
    EXPECT_EQ(body["env"]["EPOCHS"], "3");
}

// This test verifies that only a command is required: the name is the file's stem, the workdir
// the current directory, and the unset fields stay out of the body so the daemon's defaults apply.
TEST(TaskFileTest, YamlMinimalLeavesDefaultsToTheDaemon) {
    auto r = parse_yaml("command: python train.py\n");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->name, "task");
    EXPECT_EQ(r->workdir, "/home/alice");
    const nlohmann::json body = request_body(*r);
    EXPECT_EQ(body, nlohmann::json::parse(R"({"command": ["python", "train.py"],
                                              "workdir": "/home/alice", "name": "task"})"));
}

// This test verifies that a command written as a string is split on whitespace with quotes
// keeping spaces, and that an absolute workdir is kept as written.
TEST(TaskFileTest, YamlCommandStringAndAbsoluteWorkdir) {
    auto r = parse_yaml(
        "command: python train.py --note 'two words' --tag \"a \\\"b\\\"\"\n"
        "workdir: /data/run\n");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_THAT(r->command,
                ElementsAre("python", "train.py", "--note", "two words", "--tag", "a \"b\""));
    EXPECT_EQ(r->workdir, "/data/run");
}

// This test verifies the splitting rules one by one.
TEST(TaskFileTest, SplitCommand) {
    struct Case {
        const char* line;
        std::vector<std::string> want;
    };
    const Case cases[] = {
        {"  a   b\tc ", {"a", "b", "c"}},
        {"echo ''", {"echo", ""}},            // an empty argument survives
        {"a'b c'd", {"ab cd"}},               // quoted parts join the word around them
        {"say it\\ now", {"say", "it now"}},  // backslash escapes outside quotes
        {"'$HOME \\n'", {"$HOME \\n"}},       // single quotes keep everything
        {"", {}},
    };
    for (const Case& c : cases) {
        auto argv = split_command(c.line);
        ASSERT_TRUE(argv) << c.line << ": " << argv.error().message;
        EXPECT_EQ(*argv, c.want) << c.line;
    }
    auto open = split_command("python 'oops");
    ASSERT_FALSE(open);
    EXPECT_THAT(open.error().message, HasSubstr("unclosed single quote"));
}

// This test verifies that a misspelt field is refused with the file, the line, a suggestion and
// the list of fields that exist.
TEST(TaskFileTest, YamlUnknownField) {
    const std::string e = yaml_error("command: python x.py\ngpu: 2\n");
    EXPECT_THAT(e, HasSubstr("exp/task.yaml:2:"));
    EXPECT_THAT(e, HasSubstr("unknown field 'gpu'"));
    EXPECT_THAT(e, HasSubstr("did you mean 'gpus'?"));
    EXPECT_THAT(e, HasSubstr("known fields: name, command, gpus, memory, profiled_memory, "
                             "estimates, workdir, env, max_attempts, workload"));
    EXPECT_THAT(yaml_error("command: x\nestimates: {horus: 1, oracle: 2}\n"),
                HasSubstr("unknown estimate 'oracle'; known estimates: horus, faketensor, "
                          "gpumemnet"));
}

// This test verifies that broken YAML is reported with the file and yaml-cpp's line and column
// (1-based, as editors count).
TEST(TaskFileTest, YamlMalformed) {
    const std::string e = yaml_error("name: a\ncommand: [python, x.py\ngpus: 1\n");
    EXPECT_THAT(e, HasSubstr("exp/task.yaml:"));
    EXPECT_THAT(e, HasSubstr("malformed YAML"));
    const std::string tabs = yaml_error("name: a\n  command: x\n");
    EXPECT_THAT(tabs, HasSubstr("exp/task.yaml:2:"));
    EXPECT_THAT(tabs, HasSubstr("malformed YAML"));
}

// This test verifies that GPU counts other than a whole number of at least zero (a CPU-only
// task) are refused, naming the field and the value; and that cores and host memory are read.
TEST(TaskFileTest, YamlGpusMustBeAPositiveInteger) {
    for (const char* bad : {"-1", "1.5", "two", "[1]", "99999999999"}) {
        const std::string e = yaml_error(std::string("command: x\ngpus: ") + bad + "\n");
        EXPECT_THAT(e, HasSubstr("exp/task.yaml:2: gpus:")) << bad;
        EXPECT_THAT(e, ::testing::AnyOf(HasSubstr("must be an integer of at least 0"),
                                        HasSubstr("not a list")))
            << bad;
    }
    const SubmitRequest cpu_only =
        *parse_yaml("command: x\ngpus: 0\ncpus_per_task: 4\nhost_memory: 8GiB\n");
    EXPECT_EQ(cpu_only.gpus, 0);
    EXPECT_EQ(cpu_only.cpus, 4);
    EXPECT_EQ(cpu_only.host_mem_mib, 8192);
    EXPECT_THAT(yaml_error("command: x\ncpus_per_task: 0\n"),
                HasSubstr("cpus_per_task: must be an integer from 1 to 4096 (got '0')"));
}

// This test verifies the other validation messages: each names the file, line and field.
TEST(TaskFileTest, YamlInvalidValues) {
    struct Case {
        const char* text;
        const char* want;
    };
    const Case cases[] = {
        {"", "exp/task.yaml: the task file is empty"},
        {"- a\n- b\n", "a task file is a mapping of fields"},
        {"name: a\n", "no command"},
        {"command: []\n", "command: is empty"},
        {"command: \"\"\n", "command: is empty"},
        {"command: [a, [b]]\n", "command: must be a single value, not a list"},
        {"command: x\nmemory: lots\n", "exp/task.yaml:2: memory: memory 'lots' does not start"},
        {"command: x\nmemory: 12 parsecs\n", "unknown unit 'parsecs'"},
        {"command: x\nmemory:\n", "memory: has no value"},
        {"command: x\nmax_attempts: 101\n", "max_attempts: must be an integer from 1 to 100"},
        {"command: x\nenv: [A]\n", "env: must be a mapping"},
        {"command: x\nenv: {A: }\n", "env.A: has no value"},
        {"command: x\nenv: {A: [1]}\n", "env.A: must be a single value"},
        {"command: x\nname: \"  \"\n", "name: must not be empty"},
        {"command: x\ncommand: y\n", "field 'command' appears twice"},
        {"command: python 'x\n", "unclosed single quote"},
        {"command: x\n---\ncommand: y\n", "exp/task.yaml:3: a task file holds one task"},
    };
    for (const Case& c : cases) {
        EXPECT_THAT(yaml_error(c.text), HasSubstr(c.want)) << c.text;
    }
}

using test_support::kResnet3Rad;

TaskFileContext rad_context(const char* stem) {
    return TaskFileContext{std::string(stem) + ".rad", stem, "/jobs", "/home/alice/exp"};
}

// This test verifies that a real .rad file reads as the original server reads it: the python
// line is the command, line 8 the GPUs, and lines 9-12 memory, truncated like int(float(x)).
TEST(TaskFileTest, RadResnet3) {
    auto r = parse_rad_task(kResnet3Rad, rad_context("resnet3"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->name, "resnet3");
    EXPECT_THAT(r->command,
                ElementsAre("python", "/home/user/workloads/resnet50.py", "--batch_size", "128"));
    EXPECT_EQ(r->gpus, 1);
    EXPECT_EQ(r->memory.profiled_mib, 13236);
    EXPECT_EQ(r->memory.horus_mib, 28923);       // int(28923.25)
    EXPECT_EQ(r->memory.faketensor_mib, 10666);  // int(10666.00724)
    EXPECT_EQ(r->memory.gpumemnet_mib, 24000);
    EXPECT_FALSE(r->memory.declared_mib);
    EXPECT_EQ(r->workdir, "/home/alice/exp");
    EXPECT_EQ(r->conda, "tf");  // line 2, `conda activate tf`: the CLI resolves it at submit
}

// This test verifies that gpt2_xl.rad, which stops after the GPU count, still parses (without
// memory knowledge), that CRLF line ends are fine, and that shell syntax runs through /bin/sh.
TEST(TaskFileTest, RadShortFileAndShellLine) {
    auto r = parse_rad_task(
        "# c\r\nconda activate tf\r\npython gpt2_xl_on_wiki.py\r\nm\r\nwiki\r\n"
        "2\r\nexclusive\r\n1\r\n",
        rad_context("gpt2_xl"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_THAT(r->command, ElementsAre("python", "gpt2_xl_on_wiki.py"));
    EXPECT_EQ(r->gpus, 1);
    EXPECT_FALSE(r->memory.profiled_mib);
    EXPECT_FALSE(r->memory.horus_mib);

    auto shell =
        parse_rad_task("#\nenv\ncd /x && python t.py > out.txt\nm\nd\n1\ne\n2\n", rad_context("s"));
    ASSERT_TRUE(shell) << shell.error().message;
    EXPECT_THAT(shell->command, ElementsAre("/bin/sh", "-c", "cd /x && python t.py > out.txt"));
    EXPECT_EQ(shell->conda, "") << "line 2 is not an activation";
    EXPECT_EQ(shell->gpus, 2);
}

// This test verifies what a .rad file says that CARMA does not read: a second block pasted after
// the twelve lines, other lines past them, and missing memory figures; a whole file has none.
TEST(TaskFileTest, RadWarnings) {
    auto whole = parse_rad_task(kResnet3Rad, rad_context("resnet3"));
    ASSERT_TRUE(whole);
    EXPECT_TRUE(whole->warnings.empty());
    auto twice = parse_rad_task(std::string(kResnet3Rad) + "\n" + kResnet3Rad, rad_context("x"));
    ASSERT_TRUE(twice) << twice.error().message;
    ASSERT_EQ(twice->warnings.size(), 1u);
    EXPECT_EQ(twice->warnings[0], "x.rad:14: a second block (its command on line 16) after the "
                                  "12 lines of a .rad file is not read; put each task in its own "
                                  ".rad file");
    EXPECT_EQ(twice->memory.profiled_mib, 13236) << "the first block is read as before";
    auto extra = parse_rad_task(std::string(kResnet3Rad) + "note\n", rad_context("x"));
    ASSERT_TRUE(extra);
    EXPECT_THAT(extra->warnings, ElementsAre("x.rad:13: lines after the 12 of a .rad file are "
                                             "not read"));
    auto short_file =
        parse_rad_task("#\nconda activate tf\npython g.py\nm\nd\n2\nexclusive\n1\n",
                       rad_context("gpt2_xl"));
    ASSERT_TRUE(short_file);
    ASSERT_EQ(short_file->warnings.size(), 1u);
    EXPECT_THAT(short_file->warnings[0], HasSubstr("gpt2_xl.rad: no memory figures"));
    EXPECT_EQ(request_body(*short_file)["warnings"], nlohmann::json(short_file->warnings));
}

// This test verifies the .rad error messages: each names the file and, where there is one, the
// 1-based line.
TEST(TaskFileTest, RadErrors) {
    struct Case {
        const char* text;
        const char* want;
    };
    const Case cases[] = {
        {"#\npython x.py\nno command here\n", "bad.rad: no command"},  // line 2 is not searched
        {"#\n\npython x.py\nm\nd\n1\ne\n", "bad.rad:8: the GPU count"},
        {"#\n\npython x.py\nm\nd\n1\ne\n0\n", "must be a number of at least 1"},
        {"#\n\npython x.py\nm\nd\n1\ne\ntwo\n", "bad.rad:8: expected the GPU count"},
        {"#\n\npython x.py\nm\nd\n1\ne\n1\n-5\n", "bad.rad:9: expected the oracle MiB"},
        {"#\n\npython x.py\nm\nd\n1\ne\n1\n5\nnan\n", "bad.rad:10: expected the Horus"},
        {"#\n\npython 'x.py\nm\nd\n1\ne\n1\n", "bad.rad:3: command"},
    };
    for (const Case& c : cases) {
        auto r = parse_rad_task(c.text, rad_context("bad"));
        ASSERT_FALSE(r) << c.text;
        EXPECT_THAT(r.error().message, HasSubstr(c.want)) << c.text;
    }
}

// This test verifies the task files the fuzz tests (tests/fuzz) found mishandled. A stray ','
// outside a flow collection sent yaml-cpp's LoadAll into an endless loop that took all memory
// (jbeder/yaml-cpp#1040); it is now a malformed-YAML error at the comma. A .rad estimate up to
// 1e15 MiB was accepted; memory is now held to 16 TiB per GPU and the GPU count to 1024.
TEST(TaskFileTest, FuzzRegressionStrayCommaAndAbsurdNumbersAreRefused) {
    const struct {
        const char* text;
        const char* want;
    } yaml_cases[] = {
        {",", "exp/task.yaml:1:1: malformed YAML: unexpected ','"},
        {"- a\n,", "exp/task.yaml:2:1: malformed YAML: unexpected ','"},
        {"{command: x},", "exp/task.yaml:1:13: malformed YAML: unexpected ','"},
        {"command: x\n---\n,\n", "malformed YAML: unexpected ','"},
        {"command: x\nprofiled_memory: 9223372036854775807\n", "at most 16 TiB"},
        {"command: x\nestimates: {horus: 17TiB}\n", "estimates.horus: memory '17TiB' is too large"},
    };
    for (const auto& c : yaml_cases) {
        EXPECT_THAT(yaml_error(c.text), HasSubstr(c.want)) << c.text;
    }
    // A second document after a valid one is still named as such, at its first node.
    EXPECT_THAT(yaml_error("command: x\n---\ncommand: y\n"),
                HasSubstr("exp/task.yaml:3: a task file holds one task"));

    const std::string head = "#\n\npython x.py\nm\nd\n1\ne\n";
    const struct {
        std::string text;
        const char* want;
    } rad_cases[] = {
        {head + "1\n1e15\n", "bad.rad:9: the oracle MiB is 1e15; it must be at most 16 TiB"},
        {head + "1\n5\n16777217\n", "bad.rad:10: the Horus estimate (MiB) is 16777217"},
        {head + "1025\n", "bad.rad:8: the GPU count is 1025; it must be at most 1024"},
    };
    for (const auto& c : rad_cases) {
        auto r = parse_rad_task(c.text, rad_context("bad"));
        ASSERT_FALSE(r) << c.text;
        EXPECT_THAT(r.error().message, HasSubstr(c.want)) << c.text;
    }
    auto edge = parse_rad_task(head + "1024\n16777216\n", rad_context("edge"));
    ASSERT_TRUE(edge) << edge.error().message;
    EXPECT_EQ(edge->gpus, 1024);
    EXPECT_EQ(edge->memory.profiled_mib, 16777216);
}

// This test verifies that the loader picks the format by extension, names the task after the
// file, resolves a relative workdir against the file's directory, and reports unreadable files.
TEST(TaskFileTest, LoadFromDisk) {
    char dir_template[] = "/tmp/carma-taskfile-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::filesystem::path dir(dir_template);
    std::ofstream(dir / "resnet3.rad") << kResnet3Rad;
    std::ofstream(dir / "train.yml") << "command: python train.py\nworkdir: sub\n";

    auto rad = load_task_file(dir / "resnet3.rad", "/somewhere");
    ASSERT_TRUE(rad) << rad.error().message;
    EXPECT_EQ(rad->name, "resnet3");
    EXPECT_EQ(rad->workdir, "/somewhere");
    EXPECT_EQ(rad->memory.profiled_mib, 13236);

    auto yaml = load_task_file("train.yml", dir);  // relative to the current directory
    ASSERT_TRUE(yaml) << yaml.error().message;
    EXPECT_EQ(yaml->name, "train");
    EXPECT_EQ(yaml->workdir, (dir / "sub").string());

    auto missing = load_task_file(dir / "nope.yaml", dir);
    ASSERT_FALSE(missing);
    EXPECT_THAT(missing.error().message, HasSubstr("cannot read task file"));
    EXPECT_THAT(missing.error().message, HasSubstr("nope.yaml"));

    EXPECT_TRUE(is_task_file_name("a/b.yaml"));
    EXPECT_TRUE(is_task_file_name("B.YML"));
    EXPECT_TRUE(is_task_file_name("x.rad"));
    EXPECT_FALSE(is_task_file_name("train.py"));
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace carma::api

namespace carma::api {
namespace {

// This test verifies the YAML fields for Python environments: conda by name or path (resolved by
// the CLI), venv relative to the task file, both carried in the request body.
TEST(TaskFileTest, YamlPythonEnvironments) {
    const TaskFileContext ctx{"t.yaml", "t", "/jobs", "/home/alice"};
    auto conda = parse_yaml_task("command: python train.py\nconda: tf\n", ctx);
    ASSERT_TRUE(conda) << conda.error().message;
    EXPECT_EQ(conda->conda, "tf");
    EXPECT_EQ(request_body(*conda)["conda"], "tf");
    auto venv = parse_yaml_task("command: python train.py\nvenv: .venv\n", ctx);
    ASSERT_TRUE(venv) << venv.error().message;
    EXPECT_EQ(venv->venv, "/jobs/.venv");
    EXPECT_FALSE(request_body(*venv).contains("conda"));
    EXPECT_FALSE(parse_yaml_task("command: python train.py\nconda: \"\"\n", ctx));
}

}  // namespace
}  // namespace carma::api

namespace carma::api {
namespace {

// This test verifies the scheduling controls of a YAML task file and that they reach the body.
TEST(TaskFileTest, YamlSchedulingControls) {
    auto r = parse_yaml_task("command: python train.py\ntime_limit: 1h30m\nafter: [3, 4_2]\n"
                             "hold: yes\narray: 0-9:3\ndependency: afterany:5,afternotok:6_*\n"
                             "output: o-%A_%a.log\nerror: e-%j.log\nmail_type: END\n"
                             "mail_user: alice@lab\nrequeue: true\n",
                             TaskFileContext{"t.yaml", "t", "/w", "/w"});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->time_limit_s, 5400);
    EXPECT_TRUE(r->requeue);
    EXPECT_EQ(r->dependencies,
              (std::vector<Dependency>{{DependencyType::AfterOk, TaskRef::of(3)},
                                       {DependencyType::AfterOk, *parse_task_ref("4_2")},
                                       {DependencyType::AfterAny, TaskRef::of(5)},
                                       {DependencyType::AfterNotOk, *parse_task_ref("6_*")}}));
    EXPECT_EQ(r->output, "o-%A_%a.log");
    EXPECT_EQ(r->error, "e-%j.log");
    EXPECT_EQ(r->mail_type, "END");
    EXPECT_EQ(r->mail_user, "alice@lab");
    EXPECT_TRUE(r->hold);
    EXPECT_EQ(r->array, "0-9:3");
    const nlohmann::json body = request_body(*r);
    EXPECT_EQ(body["time_limit_s"], 5400);
    EXPECT_EQ(body["dependencies"][1], (nlohmann::json{{"type", "afterok"}, {"task", "4_2"}}));
    EXPECT_EQ(body["dependencies"].size(), 4u);
    EXPECT_EQ(body["output"], "o-%A_%a.log");
    EXPECT_EQ(body["mail_type"], "END");
    EXPECT_EQ(body["hold"], true);
    EXPECT_EQ(body["array"], "0-9:3");
    EXPECT_EQ(body["requeue"], true);
    auto single = parse_yaml_task("command: x\nafter: 7\n", TaskFileContext{"t.yaml", "t", "/w", "/w"});
    ASSERT_TRUE(single);
    EXPECT_EQ(single->dependencies,
              (std::vector<Dependency>{{DependencyType::AfterOk, TaskRef::of(7)}}));
    auto minutes = parse_yaml_task("command: x\ntime_limit: 90\n",
                                   TaskFileContext{"t.yaml", "t", "/w", "/w"});
    ASSERT_TRUE(minutes) << minutes.error().message;
    EXPECT_EQ(minutes->time_limit_s, 5400) << "a bare number is minutes, as sbatch reads it";
    for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
             {"command: x\ntime_limit: 1.5\n", "MINUTES"},
             {"command: x\nafter: [0]\n", "after"},
             {"command: x\ndependency: singleton:3\n", "singleton"},
             {"command: x\noutput: o-%N\n", "%N"},
             {"command: x\nmail_type: OFTEN\n", "OFTEN"},
             {"command: x\nmail_user: a b\n", "mail_user"},
             {"command: x\nhold: maybe\n", "true or false"},
             {"command: x\nrequeue: 2\n", "true or false"},
             {"command: x\narray: 9-1\n", "ends before it starts"}}) {
        auto bad = parse_yaml_task(text, TaskFileContext{"t.yaml", "t", "/w", "/w"});
        ASSERT_FALSE(bad) << text;
        EXPECT_NE(bad.error().message.find(why), std::string::npos) << bad.error().message;
    }
}

// This test verifies `gpu_share:` in a task file: a fraction becomes the body's `gpu_share`, and
// what is not a share of one GPU is refused with the file, the line and what to write.
TEST(TaskFileTest, YamlGpuShare) {
    const SubmitRequest r = *parse_yaml("command: x\ngpu_share: 0.25\n");
    ASSERT_TRUE(r.gpu_share_milli);
    EXPECT_EQ(*r.gpu_share_milli, 250);
    EXPECT_EQ(request_body(r)["gpu_share"], 0.25);
    const std::string e = yaml_error("command: x\ngpu_share: 2\n");
    EXPECT_THAT(e, HasSubstr("exp/task.yaml:2:"));
    EXPECT_THAT(e, HasSubstr("GPU share '2' is not below 1"));
}

}  // namespace
}  // namespace carma::api
