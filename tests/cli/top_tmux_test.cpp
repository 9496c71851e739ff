// `carma top` in a real terminal: tmux (a private server, 120x40) runs the built `carma` against a
// fake daemon that serves a canned GET /v1/view answer, and the test reads the screen back with
// capture-pane: the GPUs and task owners appear, a change of the answer shows up, a resize
// redraws, q / ctrl-C / SIGTERM end it with the terminal given back (main screen, cursor shown,
// the same stty settings), a daemon that goes away is shown and waited for. And --once.
//
// Nothing here is timed: every wait polls the screen until a generous deadline.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/canned_view.h"
#include "cli/fake_daemon.h"

namespace carma::test_support {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr auto kPollEvery = std::chrono::milliseconds(100);

struct Ran {
    int status = -1;  // the exit status, -1 when it did not exit normally
    std::string output;
};

Ran run(const std::string& command) {
    Ran r;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) {
        return r;
    }
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) {
        r.output.append(buf, n);
    }
    const int status = ::pclose(pipe);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// The view the fake daemon serves: two GPUs; alice's resnet on GPU 0 and dave's bert on GPU 1;
// bob's vgg waiting. `dave_done`: bert has finished and erin's gpt waits too.
json canned_view(bool dave_done) {
    const double now = 1764600000.5;
    json running = {{{"id", 7}, {"user", "alice"}, {"name", "resnet"}, {"gpus", {0}},
                     {"run_s", 1000.5}, {"memory_mib", 12000}}};
    json queue = {{{"id", 9}, {"user", "bob"}, {"name", "vgg"}, {"state", "queued"}, {"gpus", 1},
                   {"need_mib", 14000}, {"wait_s", 100.5}, {"reason", "waits for memory"}}};
    json gpu1_tasks = json::array();
    if (dave_done) {
        queue.push_back({{"id", 10}, {"user", "erin"}, {"name", "gpt"}, {"state", "queued"},
                         {"gpus", 1}, {"need_mib", 30000}, {"wait_s", 3}, {"reason", "waits"}});
    } else {
        running.push_back({{"id", 8}, {"user", "dave"}, {"name", "bert"}, {"gpus", {1}},
                           {"run_s", 50}, {"memory_mib", 12000}});
        gpu1_tasks.push_back({{"id", 8}, {"user", "dave"}, {"name", "bert"}, {"used_mib", 12000}});
    }
    return {{"now", now},
            {"policy", "carma"},
            {"backend", "emulated"},
            {"time_scale", 1},
            {"viewer", "alice"},
            {"risk_thresholds", {{"smact", 0.6}, {"smocc", 0.5}, {"drama", 0.5}}},
            {"gpus", {canned_gpu(0, {{{"id", 7}, {"user", "alice"}, {"name", "resnet"},
                                      {"used_mib", 12000}}}),
                      canned_gpu(1, gpu1_tasks)}},
            {"queue", queue},
            {"running", running},
            {"recent", json::array()}};
}

// A fake daemon whose /v1/view answer the test can change while `carma top` polls it.
class ViewDaemon {
public:
    ViewDaemon() {
        set(canned_view(false));
        daemon_.respond([this](const httplib::Request& req, httplib::Response& res) {
            if (req.path != "/v1/view") {
                res.status = 404;
                res.set_content(R"({"error": "no such endpoint"})", "application/json");
                return;
            }
            std::lock_guard lock(mutex_);
            res.set_content(body_, "application/json");
        });
    }
    void set(const json& view) {
        std::lock_guard lock(mutex_);
        body_ = view.dump();
    }
    const std::string& socket() const { return daemon_.socket(); }

private:
    FakeDaemon daemon_;
    std::mutex mutex_;
    std::string body_;
};

// A private tmux server (its own socket in a temporary folder, no configuration) with one 120x40 session running
// `carma top` from a script that records the terminal's settings before and after, and the exit
// status, then keeps the pane open.
class TopInTmux {
public:
    TopInTmux(const std::string& socket, const std::string& extra_args = "")
        : dir_(make_temp_dir()),
          server_((dir_ / "tmux.sock").string()) {
        const fs::path script = dir_ / "run.sh";
        std::ofstream(script) << fmt::format(
            "trap : INT\n"  // ctrl-C is for carma, not for this script
            "stty -g > {dir}/stty.before\n"
            "{carma} top --socket {socket} --interval 0.2 {extra}\n"
            "echo carma-exited rc=$?\n"
            "stty -g > {dir}/stty.after\n"
            "exec sleep 600\n",
            fmt::arg("dir", quote(dir_.string())), fmt::arg("carma", quote(CARMA_BIN)),
            fmt::arg("socket", quote(socket)), fmt::arg("extra", extra_args));
        started_ = tmux("new-session -d -s top -x 120 -y 40 " + quote("sh " + script.string()));
    }

    ~TopInTmux() {
        tmux("kill-server");
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    const Ran& started() const { return started_; }

    // tmux started, and `carma top` in it drew its first screen (alice's task on it). Its
    // failures are fatal: call it inside ASSERT_NO_FATAL_FAILURE.
    void assert_first_screen() const {
        ASSERT_EQ(started_.status, 0) << started_.output;
        const std::string screen = wait_for_text("alice");
        ASSERT_THAT(screen, HasSubstr("alice"));
    }

    Ran tmux(const std::string& args) const {
        return run(fmt::format("env -u TMUX tmux -S {} -f /dev/null {}", quote(server_), args));
    }

    std::string screen() const { return tmux("capture-pane -p -t top").output; }

    // "1 0": the alternate screen is on and the cursor hidden (while carma top runs).
    std::string terminal_modes() const {
        return tmux("display-message -p -t top " + quote("#{alternate_on} #{cursor_flag}")).output;
    }

    // Polls the screen until `ok` holds or the deadline passes; returns the last screen.
    std::string wait_for(const std::function<bool(const std::string&)>& ok) const {
        const auto deadline = std::chrono::steady_clock::now() + kDeadline;
        std::string last = screen();
        while (!ok(last) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(kPollEvery);
            last = screen();
        }
        return last;
    }

    std::string wait_for_text(const std::string& text) const {
        return wait_for([&](const std::string& s) { return s.find(text) != std::string::npos; });
    }

    std::string file(const std::string& name) const {
        std::ifstream in(dir_ / name);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    // The pid of `carma top`: the child of the pane's shell.
    pid_t carma_pid() const {
        const std::string shell = tmux("display-message -p -t top '#{pane_pid}'").output;
        const long shell_pid = std::strtol(shell.c_str(), nullptr, 10);
        for (const auto& entry : fs::directory_iterator("/proc")) {
            std::ifstream stat(entry.path() / "stat");
            std::string line;
            if (!std::getline(stat, line)) {
                continue;
            }
            // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
            std::istringstream rest(line.substr(line.rfind(')') + 1));
            std::string state;
            long ppid = 0;
            rest >> state >> ppid;
            if (ppid == shell_pid && line.find("(carma)") != std::string::npos) {
                return static_cast<pid_t>(std::stol(line));
            }
        }
        return -1;
    }

    // The terminal after carma ended: the main screen, the cursor shown, stty as before.
    void expect_terminal_given_back(const std::string& screen_text) const {
        EXPECT_EQ(terminal_modes(), "0 1\n") << screen_text;
        EXPECT_THAT(screen_text, ::testing::Not(HasSubstr("GPU 0"))) << "the alternate screen is gone";
        const std::string before = file("stty.before");
        EXPECT_FALSE(before.empty());
        EXPECT_EQ(file("stty.after"), before) << "stty settings differ after carma top";
    }

private:
    fs::path dir_;
    std::string server_;  // the private server's socket, removed with the folder
    Ran started_;
};

// A missing tmux fails the test with the reason (scripts/setup installs it).
void require_tmux() {
    const Ran v = run("tmux -V");
    ASSERT_EQ(v.status, 0) << "tmux is needed to test `carma top` in a terminal and did not run ("
                           << v.output << "); install it (scripts/setup lists it)";
}

bool has_all(const std::string& s, std::initializer_list<const char*> parts) {
    for (const char* p : parts) {
        if (s.find(p) == std::string::npos) {
            return false;
        }
    }
    return true;
}

// This test verifies the live screen end to end: the GPUs and owners appear on the alternate
// screen with the cursor hidden, a finished task leaves it and a new one appears, a resize
// redraws, and q ends it with the terminal as it was.
TEST(TopTmuxTest, DrawsUpdatesResizesAndQuitsOnQ) {
    ASSERT_NO_FATAL_FAILURE(require_tmux());
    ViewDaemon daemon;
    TopInTmux top(daemon.socket());
    ASSERT_EQ(top.started().status, 0) << top.started().output;

    std::string screen = top.wait_for([](const std::string& s) {
        return has_all(s, {"GPU 0", "GPU 1", "alice", "dave", "bob", "RUNNING 2"});
    });
    ASSERT_TRUE(has_all(screen, {"GPU 0", "GPU 1", "alice", "dave", "bob", "RUNNING 2"})) << screen;
    EXPECT_THAT(screen, HasSubstr("policy carma"));
    EXPECT_THAT(screen, HasSubstr("8 dave bert 12,000 MiB"));  // on GPU 1's memory bar
    EXPECT_EQ(top.terminal_modes(), "1 0\n") << "alternate screen on, cursor hidden";

    daemon.set(canned_view(true));
    screen = top.wait_for([](const std::string& s) {
        return s.find("dave") == std::string::npos && s.find("erin") != std::string::npos;
    });
    EXPECT_THAT(screen, ::testing::Not(HasSubstr("dave"))) << screen;
    EXPECT_THAT(screen, HasSubstr("erin"));
    EXPECT_THAT(screen, HasSubstr("RUNNING 1"));
    EXPECT_THAT(screen, HasSubstr("QUEUE 2"));

    // Smaller than the view: SIGWINCH, redrawn to the new size with the rest counted.
    ASSERT_EQ(top.tmux("resize-window -t top -x 70 -y 12").status, 0);
    screen = top.wait_for_text("more");
    EXPECT_THAT(screen, HasSubstr("more")) << screen;

    ASSERT_EQ(top.tmux("send-keys -t top q").status, 0);
    screen = top.wait_for_text("carma-exited");
    EXPECT_THAT(screen, HasSubstr("carma-exited rc=0")) << screen;
    top.expect_terminal_given_back(screen);
}

// This test verifies that ctrl-C ends it with the terminal given back (exit status 130).
TEST(TopTmuxTest, CtrlCGivesTheTerminalBack) {
    ASSERT_NO_FATAL_FAILURE(require_tmux());
    ViewDaemon daemon;
    TopInTmux top(daemon.socket());
    ASSERT_NO_FATAL_FAILURE(top.assert_first_screen());
    ASSERT_EQ(top.tmux("send-keys -t top C-c").status, 0);
    std::string screen = top.wait_for_text("carma-exited");
    EXPECT_THAT(screen, HasSubstr("carma-exited rc=130")) << screen;
    top.expect_terminal_given_back(screen);
}

// This test verifies that SIGTERM ends it with the terminal given back (exit status 143).
TEST(TopTmuxTest, SigtermGivesTheTerminalBack) {
    ASSERT_NO_FATAL_FAILURE(require_tmux());
    ViewDaemon daemon;
    TopInTmux top(daemon.socket());
    ASSERT_NO_FATAL_FAILURE(top.assert_first_screen());
    const pid_t pid = top.carma_pid();
    ASSERT_GT(pid, 0) << "no carma process under the pane's shell";
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    std::string screen = top.wait_for_text("carma-exited");
    EXPECT_THAT(screen, HasSubstr("carma-exited rc=143")) << screen;
    top.expect_terminal_given_back(screen);
}

// This test verifies a daemon that goes away: the error is shown on the screen and carma top
// keeps going; q then ends it, repeating the error on the main screen (exit status 1).
TEST(TopTmuxTest, DaemonGoneIsShownUntilQ) {
    ASSERT_NO_FATAL_FAILURE(require_tmux());
    auto daemon = std::make_unique<ViewDaemon>();
    const std::string socket = daemon->socket();
    TopInTmux top(socket);
    ASSERT_NO_FATAL_FAILURE(top.assert_first_screen());

    daemon.reset();
    std::string screen = top.wait_for_text("cannot reach");
    EXPECT_THAT(screen, HasSubstr("carma: cannot reach the CARMA daemon")) << screen;
    EXPECT_THAT(screen, HasSubstr("the last answer"));
    EXPECT_EQ(top.terminal_modes(), "1 0\n") << "still running on the alternate screen";

    ASSERT_EQ(top.tmux("send-keys -t top q").status, 0);
    screen = top.wait_for_text("carma-exited");
    EXPECT_THAT(screen, HasSubstr("carma-exited rc=1")) << screen;
    EXPECT_THAT(screen, HasSubstr("carma: cannot reach the CARMA daemon"));
    EXPECT_EQ(top.terminal_modes(), "0 1\n");
    EXPECT_EQ(top.file("stty.after"), top.file("stty.before"));
}

// This test verifies --once into a pipe: one plain frame, everything in it, exit status 0; and
// without a daemon, the reason and exit status 1.
TEST(TopOnceTest, PrintsOneFrameOrTheReason) {
    ViewDaemon daemon;
    const Ran once = run(fmt::format("NO_COLOR= {} top --once --socket {}", quote(CARMA_BIN),
                                     quote(daemon.socket())));
    EXPECT_EQ(once.status, 0) << once.output;
    EXPECT_THAT(once.output, HasSubstr("GPU 0"));
    EXPECT_THAT(once.output, HasSubstr("GPU 1"));
    EXPECT_THAT(once.output, HasSubstr("7 alice resnet 12,000 MiB"));
    EXPECT_THAT(once.output, HasSubstr("QUEUE 1"));
    EXPECT_EQ(once.output.find('\033'), std::string::npos) << "no escapes into a pipe";

    const Ran gone = run(fmt::format("{} top --once --socket /nonexistent/carma.sock",
                                     quote(CARMA_BIN)));
    EXPECT_EQ(gone.status, 1) << gone.output;
    EXPECT_THAT(gone.output, HasSubstr("cannot reach the CARMA daemon"));

    const Ran bad = run(fmt::format("{} top --interval 0 --socket {}", quote(CARMA_BIN),
                                    quote(daemon.socket())));
    EXPECT_NE(bad.status, 0);
    EXPECT_THAT(bad.output, HasSubstr("--interval 0"));
}

}  // namespace
}  // namespace carma::test_support
