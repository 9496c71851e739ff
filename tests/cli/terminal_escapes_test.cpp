// Text from the daemon is other users' own (task names, commands, environments, messages,
// user names) and must never drive the reader's terminal: every command's text output holds no
// escape (ESC, BEL, C1 controls), and the hostile text still shows, its controls as '?'. JSON
// output stays exactly the daemon's. The commands run against the fake daemon (fake_daemon.h).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/fake_daemon.h"
#include "cli/main/arg_check.h"
#include "cli/run_command.h"
#include "cli/views/acct_view.h"
#include "core/text.h"

namespace carma {
namespace {

using nlohmann::json;
using test_support::FakeDaemon;
using test_support::run_command;
using ::testing::HasSubstr;

// A window title (OSC 0), a clipboard write (OSC 52), clear screen (CSI 2J), a C1 CSI (U+009B in
// UTF-8) and a right-to-left override; then what a reader sees of it.
const std::string kEvil =
    std::string("job\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[2J\xc2\x9b") + "31m\xe2\x80\xaeZ";
const std::string kShown = "job?]0;pwned??]52;c;aGk=??[2J?31m?Z";

// Whether `text` could drive a terminal: C0 controls other than a newline, DEL, C1 controls
// (U+0080..U+009F), bytes that are not UTF-8. Checked byte by byte, independently of the CLI.
::testing::AssertionResult terminal_safe(const std::string& text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if ((b < 0x20 && b != '\n') || b == 0x7F) {
            return ::testing::AssertionFailure()
                   << fmt::format("control byte 0x{:02x} at {} in:\n{}", b, i, text);
        }
        if (b < 0x80) {
            continue;
        }
        const std::size_t n = (b & 0xE0) == 0xC0   ? 2
                              : (b & 0xF0) == 0xE0 ? 3
                              : (b & 0xF8) == 0xF0 ? 4
                                                   : 0;
        if (n == 0 || i + n > text.size()) {
            return ::testing::AssertionFailure() << fmt::format(
                       "byte 0x{:02x} at {} starts no UTF-8 character in:\n{}", b, i, text);
        }
        const auto b1 = static_cast<unsigned char>(text[i + 1]);
        if (b == 0xC2 && b1 >= 0x80 && b1 <= 0x9F) {
            return ::testing::AssertionFailure()
                   << fmt::format("C1 control U+00{:02X} at {} in:\n{}", b1, i, text);
        }
        i += n - 1;
    }
    return ::testing::AssertionSuccess();
}

void answer_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

// A task whose every free-text field is hostile.
json evil_task(const std::string& state) {
    return {{"id", 12},
            {"name", kEvil},
            {"user", kEvil},
            {"uid", 1001},
            {"gid", 1001},
            {"state", state},
            {"command", {"python", kEvil}},
            {"workdir", "/home/" + kEvil},
            {"gpus", 1},
            {"env", {{"EPOCHS", kEvil}}},
            {"workload", kEvil},
            {"message", kEvil},
            {"learned", {{"need_mib", 1000}, {"basis", kEvil}}},
            {"attempts", 1},
            {"max_attempts", 3},
            {"submitted_at", 1764441600.5},
            {"attempt_list",
             {{{"number", 1}, {"gpus", {0}}, {"started_at", 1764441601.0}, {"outcome", kEvil}}}}};
}

// A fake daemon answering every request with `body`.
struct Answering : FakeDaemon {
    explicit Answering(json body, int status = 200) {
        respond([body, status](const httplib::Request&, httplib::Response& res) {
            answer_json(res, status, body);
        });
    }
};

// This test verifies that the one sanitiser replaces every C0 and C1 control, DEL, byte that is
// not UTF-8 and invisible reordering character by '?', one each, and keeps all other text
// (accents, wide characters) and, where asked, newlines.
TEST(PrintableTest, ReplacesControlsKeepsText) {
    EXPECT_EQ(printable(kEvil), kShown);
    EXPECT_EQ(printable("a\tb\nc\x7f\r"), "a?b?c??");
    EXPECT_EQ(printable("raw \x9b"
                        "1m and cut \xe2\x80"),
              "raw ?1m and cut ??");
    EXPECT_EQ(printable("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
              "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(printable("one\n\x1b[2Jtwo\n", true), "one\n?[2Jtwo\n");
}

// This test verifies the classes a red team found passing (issue 44, break 8): every Unicode
// format character (Cf) and every private-use character becomes one '?': the Arabic letter mark
// U+061C, the tag characters U+E0000-E007F, the interlinear annotations U+FFF9-FFFB, the soft
// hyphen, and private use in the BMP and planes 15-16; letters next to them stay.
TEST(PrintableTest, FormatAndPrivateUseCharactersAreReplaced) {
    const std::pair<const char*, const char*> cases[] = {
        {"a\u061Cb", "U+061C"},       {"a\U000E0041b", "tag A"},   {"a\U000E007Fb", "cancel tag"},
        {"a\U000E0001b", "language"}, {"a\uFFF9b", "U+FFF9"},      {"a\uFFFBb", "U+FFFB"},
        {"a\u00ADb", "soft hyphen"},  {"a\u2066b", "isolate"},     {"a\U0001BCA0b", "U+1BCA0"},
        {"a\uE000b", "BMP private"},  {"a\uF8FFb", "U+F8FF"},      {"a\U000F0000b", "plane 15"},
        {"a\U0010FFFDb", "plane 16"}, {"a\U0001343Fb", "U+1343F"},
    };
    for (const auto& [text, what] : cases) {
        EXPECT_EQ(printable(text), "a?b") << what;
    }
    // Not format characters: an accented letter, a CJK one, the replacement character.
    EXPECT_EQ(printable("\u00E9\u4E2D\uFFFD"), "\u00E9\u4E2D\uFFFD");
}

// This test verifies that `carma show` prints a task's name, user, command, workdir, environment,
// workload, message, basis and attempt outcome without their escapes, and --json exactly.
TEST(TerminalEscapesTest, Show) {
    Answering daemon(evil_task("running"));
    const std::string out =
        run_command(cli::add_show_command, {"show", "12", "--socket", daemon.socket()});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_THAT(out, HasSubstr("task 12 (" + kShown + ")\n"));
    EXPECT_THAT(out, HasSubstr("message     " + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr("user        " + kShown + " (uid 1001"));
    EXPECT_THAT(out, HasSubstr("command     python '" + kShown + "'\n"));
    EXPECT_THAT(out, HasSubstr("env         EPOCHS=" + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr("basis       " + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr(kShown + "  -")) << "the attempt's outcome";
    EXPECT_EQ(json::parse(run_command(cli::add_show_command,
                                      {"show", "12", "--json", "--socket", daemon.socket()})),
              evil_task("running"));
}

// This test verifies that cancel, hold and release name the task without its escapes, whether
// the task is cancelled at once or keeps its state while it stops.
TEST(TerminalEscapesTest, CancelHoldRelease) {
    Answering cancelled(evil_task("cancelled"));
    const std::string gone =
        run_command(cli::add_cancel_command, {"cancel", "12", "--socket", cancelled.socket()});
    EXPECT_TRUE(terminal_safe(gone));
    EXPECT_EQ(gone, "cancelled task 12 (" + kShown + ")\n");

    Answering stopping(evil_task(kEvil));  // even a state is the daemon's text
    const std::string stop =
        run_command(cli::add_cancel_command, {"cancel", "12", "--socket", stopping.socket()});
    EXPECT_TRUE(terminal_safe(stop));
    EXPECT_EQ(stop, "stopping task 12 (" + kShown + "); it stays " + kShown +
                        " until its processes have exited\n");

    const std::string held =
        run_command(cli::add_hold_command, {"hold", "12", "--socket", stopping.socket()});
    EXPECT_TRUE(terminal_safe(held));
    EXPECT_EQ(held, "held task 12 (" + kShown + ")\n");
    const std::string released =
        run_command(cli::add_release_command, {"release", "12", "--socket", stopping.socket()});
    EXPECT_TRUE(terminal_safe(released));
    EXPECT_EQ(released, "released task 12 (" + kShown + ")\n");
}

// This test verifies that `carma acct` shows the names and users of finished tasks, in its
// table and its totals, without their escapes, and --json exactly.
TEST(TerminalEscapesTest, Acct) {
    const json answer = {{"tasks",
                          {{{"id", 7},
                            {"name", kEvil},
                            {"user", kEvil},
                            {"state", "succeeded"},
                            {"attempts", {{{"number", 1}, {"outcome", kEvil}}}}}}},
                         {"totals", {{{"user", kEvil}, {"tasks", 1}, {"attempts", 1}}}}};
    Answering daemon(answer);
    const std::string out =
        run_command(cli::add_acct_command, {"acct", "--socket", daemon.socket()});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_THAT(out, HasSubstr("7   " + kShown + "  " + kShown + "  succeeded"));
    EXPECT_THAT(out, HasSubstr("\n" + kShown + "      1"));  // the totals' user
    EXPECT_EQ(json::parse(run_command(cli::add_acct_command,
                                      {"acct", "--json", "--socket", daemon.socket()})),
              answer);
}

// This test verifies that `carma queue` keeps C1 controls and reordering characters out too, not
// only C0 ones.
TEST(TerminalEscapesTest, Queue) {
    Answering daemon(json{{"tasks", {evil_task("queued")}}});
    const std::string out =
        run_command(cli::add_queue_command, {"queue", "--socket", daemon.socket()});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_THAT(out, HasSubstr("12  " + kShown + "  " + kShown + "  queued"));
    EXPECT_EQ(json::parse(run_command(cli::add_queue_command,
                                      {"queue", "--json", "--socket", daemon.socket()})),
              json({{"tasks", {evil_task("queued")}}}));
}

// This test verifies that `carma submit` names the task the daemon made without its escapes.
TEST(TerminalEscapesTest, Submit) {
    Answering daemon(evil_task("queued"), 201);
    const std::string out = run_command(
        cli::add_submit_command,
        {"submit", "--export", "NONE", "--socket", daemon.socket(), "--", "/bin/true", kEvil});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_EQ(out, "submitted task 12 (" + kShown + ")\n");
}

// This test verifies that `carma gpus` shows GPU names, health and risk reasons, the rule and
// the metric sources (an agent's or a driver's text) without their escapes.
TEST(TerminalEscapesTest, Gpus) {
    const json answer = {{"backend", kEvil},
                         {"gpus",
                          {{{"index", 0},
                            {"name", kEvil},
                            {"total_mib", 40960},
                            {"free_mib", 40960},
                            {"health", {{"state", kEvil}, {"reason", kEvil}}},
                            {"sources", {{"smact", kEvil}}},
                            {"risk", {{"high", true}, {"reason", "x"}, {"rule_text", kEvil}}},
                            {"tasks", {12}}}}}};
    Answering daemon(answer);
    const std::string out =
        run_command(cli::add_gpus_command, {"gpus", "--socket", daemon.socket()});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_THAT(out, HasSubstr("backend: " + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr("0    " + kShown + "  " + kShown));
    EXPECT_THAT(out, HasSubstr("GPU 0: SMACT " + kShown));
    EXPECT_THAT(out, HasSubstr("  risk rule: " + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr("  " + kShown + ": " + kShown + "\n"));
}

// This test verifies that `carma estimate` shows the command, user, family and basis it is
// answered without their escapes.
TEST(TerminalEscapesTest, Estimate) {
    const json answer = {{"user", kEvil},
                         {"command", {"python", kEvil}},
                         {"fingerprint", kEvil},
                         {"family", {{"id", kEvil}, {"program", kEvil}, {"script", kEvil}}},
                         {"history",
                          {{"runs", 1},
                           {"succeeded", 1},
                           {"newest", {{"task", 3}, {"attempt", 1}, {"outcome", kEvil}}}}},
                         {"learned", {{"basis", kEvil}}}};
    Answering daemon(answer);
    const std::string out = run_command(
        cli::add_estimate_command, {"estimate", "--socket", daemon.socket(), "--", "/bin/true"});
    EXPECT_TRUE(terminal_safe(out));
    EXPECT_THAT(out, HasSubstr("estimate for " + kShown + ": python " + kShown + " (1 GPU)\n"));
    EXPECT_THAT(out, HasSubstr("why         " + kShown + "\n"));
    EXPECT_THAT(out, HasSubstr("newest task 3 attempt 1 " + kShown));
}

// This test verifies that `carma logs` passes a task's own output through as `cat` would (only
// its owner and root read it, and programs colour their output), while the end of a followed
// log, which quotes the task's name and message, is sanitised.
TEST(TerminalEscapesTest, LogsAreRawTheirEndIsNot) {
    const std::string log = "\x1b[31mred\x1b[0m\n";
    FakeDaemon daemon;
    daemon.respond([&](const httplib::Request& req, httplib::Response& res) {
        if (req.path == "/v1/tasks/12") {
            json task = evil_task("succeeded");
            answer_json(res, 200, task);
            return;
        }
        const std::size_t offset = std::stoul("0" + req.get_param_value("offset"));
        res.set_content(log.substr(std::min(offset, log.size())), "text/plain");
        res.set_header("X-Carma-Log-Size", std::to_string(log.size()));
        res.set_header("X-Carma-Task-State", "succeeded");
    });
    ::testing::internal::CaptureStderr();
    const std::string out =
        run_command(cli::add_logs_command, {"logs", "12", "-f", "--socket", daemon.socket()});
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, log);
    EXPECT_TRUE(terminal_safe(err));
    EXPECT_EQ(err, "carma: task 12 (" + kShown + ") succeeded: " + kShown + "\n");
}

// This test verifies that an error the daemon answers, which may quote a user's text, reaches
// the terminal without its escapes, both as a command's error and as one task's of several.
TEST(TerminalEscapesTest, DaemonErrors) {
    Answering daemon(json{{"error", "task 12 (" + kEvil + ") is not yours"}}, 409);
    CLI::App app;
    std::map<std::string, std::function<int()>> actions{{"show", cli::add_show_command(app)}};
    const std::string socket = daemon.socket();
    const char* argv[] = {"carma", "show", "12", "--socket", socket.c_str()};
    ::testing::internal::CaptureStderr();
    const int rc = cli::run_subcommand(app, 5, const_cast<char**>(argv), actions);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 1);
    EXPECT_TRUE(terminal_safe(err));
    EXPECT_THAT(err, HasSubstr("task 12 (" + kShown + ") is not yours\n"));

    ::testing::internal::CaptureStderr();
    const std::string out =
        run_command(cli::add_cancel_command, {"cancel", "12", "13", "--socket", daemon.socket()});
    const std::string several = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "");
    EXPECT_TRUE(terminal_safe(several));
    EXPECT_THAT(several, HasSubstr("carma: task 13: task 12 (" + kShown + ") is not yours\n"));
}

}  // namespace
}  // namespace carma
