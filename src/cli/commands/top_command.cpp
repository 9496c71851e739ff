// `carma top`: polls GET /v1/view and draws cli/views/top_view's frame on the alternate screen.
//
// The terminal is put back on every way out: q or Q, ctrl-C (SIGINT), SIGTERM and SIGHUP, an
// exception, and ctrl-Z (put back while stopped, taken again on fg). The poll runs on its own
// thread so a daemon slow to answer never keeps q, a resize or a signal waiting; the screen
// thread sleeps in poll() on the keyboard and one pipe that the poller and the signal handlers
// write to.

#include "cli/commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/common/local_time.h"
#include "cli/views/top_view.h"
#include "core/text.h"

namespace carma::cli {

namespace {

using nlohmann::json;

constexpr double kMinInterval = 0.1;   // seconds; faster only loads the daemon
constexpr double kMaxInterval = 3600;
constexpr std::size_t kPipeWidth = 100;  // --once to a pipe, unless COLUMNS says otherwise
constexpr std::size_t kFallbackWidth = 80;
constexpr std::size_t kFallbackHeight = 24;

struct TopOptions {
    std::string socket;
    double interval_s = 1;
    bool once = false;
};

// no-color.org: colour unless NO_COLOR is set to something; never into a pipe or a file.
bool colour_wanted() {
    const char* no_colour = std::getenv("NO_COLOR");
    return ::isatty(STDOUT_FILENO) != 0 && (no_colour == nullptr || no_colour[0] == '\0');
}

std::pair<std::size_t, std::size_t> terminal_size() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        return {ws.ws_col, ws.ws_row};
    }
    return {kFallbackWidth, kFallbackHeight};
}

void write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;  // a terminal that went away (SIGHUP follows): nothing left to show
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

// ---- one frame: --once, or stdout not a terminal ------------------------------------------

std::size_t pipe_width() {
    const char* env = std::getenv("COLUMNS");
    if (env != nullptr) {
        char* end = nullptr;
        const long n = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && n > 0 && n < 10'000) {
            return static_cast<std::size_t>(n);
        }
    }
    return kPipeWidth;
}

int run_once(const TopOptions& o) {
    api::ApiClient client(api::resolve_socket_path(o.socket));
    auto view = client.view();
    if (!view) {
        throw std::runtime_error(view.error().message);
    }
    TopScreen screen;
    screen.width = ::isatty(STDOUT_FILENO) != 0 ? terminal_size().first : pipe_width();
    screen.height = std::numeric_limits<std::size_t>::max();  // a script gets every line
    screen.colour = colour_wanted();
    screen.now = now_epoch();
    std::string text;
    for (const std::string& line : top_lines(*view, screen)) {
        text += line + "\n";
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

// ---- signals ------------------------------------------------------------------------------

std::atomic<int> g_wake_fd{-1};          // the pipe the screen thread polls
volatile std::sig_atomic_t g_quit_signal = 0;
volatile std::sig_atomic_t g_resized = 0;
volatile std::sig_atomic_t g_suspend = 0;

void wake(int fd) {
    if (fd >= 0) {
        const char c = 'w';
        [[maybe_unused]] const ssize_t n = ::write(fd, &c, 1);  // a full pipe is awake already
    }
}

extern "C" void on_top_signal(int sig) {
    const int saved_errno = errno;
    if (sig == SIGWINCH) {
        g_resized = 1;
    } else if (sig == SIGTSTP) {
        g_suspend = 1;
    } else {
        g_quit_signal = sig;
    }
    wake(g_wake_fd.load());
    errno = saved_errno;
}

constexpr std::array<int, 5> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP};

// Our handlers while the screen is ours; the previous ones again after.
class SignalHandlers {
public:
    SignalHandlers() {
        struct sigaction sa {};
        sa.sa_handler = on_top_signal;
        sigemptyset(&sa.sa_mask);
        for (std::size_t i = 0; i < kSignals.size(); ++i) {
            ::sigaction(kSignals[i], &sa, &previous_[i]);
        }
    }
    ~SignalHandlers() {
        for (std::size_t i = 0; i < kSignals.size(); ++i) {
            ::sigaction(kSignals[i], &previous_[i], nullptr);
        }
    }
    SignalHandlers(const SignalHandlers&) = delete;
    SignalHandlers& operator=(const SignalHandlers&) = delete;

private:
    std::array<struct sigaction, kSignals.size()> previous_{};
};

// ---- the terminal -------------------------------------------------------------------------

// Keys without Enter and without echo (signals from ctrl-C and ctrl-Z still come), the alternate
// screen, no cursor; all of it undone by leave() and the destructor.
class RawTerminal {
public:
    RawTerminal() { enter(); }
    ~RawTerminal() { leave(); }
    RawTerminal(const RawTerminal&) = delete;
    RawTerminal& operator=(const RawTerminal&) = delete;

    void enter() {
        have_termios_ = ::isatty(STDIN_FILENO) != 0 && ::tcgetattr(STDIN_FILENO, &saved_) == 0;
        if (have_termios_) {
            termios raw = saved_;
            raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
            raw.c_cc[VMIN] = 1;
            raw.c_cc[VTIME] = 0;
            ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        }
        write_all(STDOUT_FILENO, "\033[?1049h\033[?25l\033[H\033[2J");
        active_ = true;
    }

    void leave() {
        if (!active_) {
            return;
        }
        write_all(STDOUT_FILENO, "\033[0m\033[?25h\033[?1049l");
        if (have_termios_) {
            ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
        }
        active_ = false;
    }

private:
    termios saved_{};
    bool have_termios_ = false;
    bool active_ = false;
};

// Each line is erased, then written; after the last one the rest of the screen is cleared. No
// erase after a line's text: a line as wide as the screen leaves the cursor on its last column,
// where erasing to the end would take that character.
void draw(const std::vector<std::string>& lines, std::size_t height) {
    std::string out = "\033[H";
    for (std::size_t i = 0; i < lines.size(); ++i) {
        out += (i == 0 ? "" : "\r\n");
        out += "\033[2K";
        out += lines[i];
    }
    if (lines.size() < height) {
        out += lines.empty() ? "\033[J" : "\r\n\033[J";
    }
    write_all(STDOUT_FILENO, out);
}

// ---- the poller ---------------------------------------------------------------------------

struct PollState {
    std::mutex mutex;
    std::condition_variable cv;
    bool stop = false;
    bool busy = false;     // inside a request
    bool refresh = false;  // poll now instead of at the interval
    std::optional<Result<json>> latest;  // the newest answer, until the screen takes it
    int wake_fd = -1;
};

// Polls on its own thread until stopped. Stopped while inside a request, it is let go rather
// than waited for (the request may take the client's whole read timeout); what it touches is
// its own, kept alive by the shared state.
class Poller {
public:
    Poller(api::ApiClient client, double interval_s, int wake_fd)
        : state_(std::make_shared<PollState>()) {
        state_->wake_fd = wake_fd;
        thread_ = std::thread(
            [state = state_, client = std::move(client), interval = std::chrono::duration<double>(
                                                             interval_s)]() mutable {
                std::unique_lock lock(state->mutex);
                while (!state->stop) {
                    state->busy = true;
                    lock.unlock();
                    Result<json> answer = client.view();
                    lock.lock();
                    state->busy = false;
                    state->latest = std::move(answer);
                    wake(state->wake_fd);
                    state->cv.wait_for(lock, interval,
                                       [&] { return state->stop || state->refresh; });
                    state->refresh = false;
                }
            });
    }

    ~Poller() { stop(); }
    Poller(const Poller&) = delete;
    Poller& operator=(const Poller&) = delete;

    // Whether the thread was let go inside a request (it may still write to the wake pipe).
    bool stop() {
        if (!thread_.joinable()) {
            return let_go_;
        }
        bool busy = false;
        {
            std::lock_guard lock(state_->mutex);
            state_->stop = true;
            busy = state_->busy;
        }
        state_->cv.notify_all();
        if (busy) {
            thread_.detach();
            let_go_ = true;
        } else {
            thread_.join();
        }
        return let_go_;
    }

    void refresh() {
        {
            std::lock_guard lock(state_->mutex);
            state_->refresh = true;
        }
        state_->cv.notify_all();
    }

    std::optional<Result<json>> take() {
        std::lock_guard lock(state_->mutex);
        return std::exchange(state_->latest, std::nullopt);
    }

private:
    std::shared_ptr<PollState> state_;
    std::thread thread_;
    bool let_go_ = false;
};

// ---- the live screen ----------------------------------------------------------------------

struct Outcome {
    int code = 0;
    std::string message;  // printed on stderr once the terminal is back
};

Outcome screen_loop(const TopOptions& o, Poller& poller, int wake_read_fd) {
    RawTerminal terminal;
    const bool colour = colour_wanted();
    bool keys = ::isatty(STDIN_FILENO) != 0;
    json view;  // null until the first answer
    std::string error;
    bool dirty = true;
    while (true) {
        if (dirty) {
            const auto [width, height] = terminal_size();
            TopScreen screen;
            screen.width = width;
            screen.height = height;
            screen.colour = colour;
            screen.now = now_epoch();
            screen.status = fmt::format("every {:g}s, q quits", o.interval_s);
            if (!error.empty()) {
                screen.error = fmt::format("{}; retrying every {:g}s", error, o.interval_s);
            }
            draw(top_lines(view, screen), height);
            dirty = false;
        }
        std::array<pollfd, 2> fds = {pollfd{wake_read_fd, POLLIN, 0},
                                     pollfd{keys ? STDIN_FILENO : -1, POLLIN, 0}};
        if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
            return {1, fmt::format("carma top: waiting for input failed: {}",
                                   std::error_code(errno, std::generic_category()).message())};
        }
        char drain[64];
        while (::read(wake_read_fd, drain, sizeof drain) > 0) {
        }
        if (g_quit_signal != 0) {
            return {128 + static_cast<int>(g_quit_signal), ""};
        }
        if (g_suspend != 0) {
            // ctrl-Z: the shell gets its screen back while we are stopped.
            g_suspend = 0;
            terminal.leave();
            ::signal(SIGTSTP, SIG_DFL);
            ::raise(SIGTSTP);
            struct sigaction sa {};
            sa.sa_handler = on_top_signal;
            sigemptyset(&sa.sa_mask);
            ::sigaction(SIGTSTP, &sa, nullptr);
            terminal.enter();
            dirty = true;
        }
        if (g_resized != 0) {
            g_resized = 0;
            dirty = true;
        }
        if (std::optional<Result<json>> answer = poller.take()) {
            if (*answer) {
                view = std::move(**answer);
                error.clear();
            } else {
                error = answer->error().message;
            }
            dirty = true;
        }
        if (keys && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            char buf[64];
            const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                keys = false;  // the keyboard is gone; signals still end it
            }
            for (ssize_t i = 0; i < n; ++i) {
                if (buf[i] == 'q' || buf[i] == 'Q') {
                    // The alternate screen takes the daemon's error away with it: say it again.
                    return error.empty() ? Outcome{0, ""} : Outcome{1, error};
                }
                if (buf[i] == 'r' || buf[i] == ' ') {
                    poller.refresh();
                }
            }
        }
    }
}

int run_live(const TopOptions& o) {
    std::array<int, 2> pipe_fds{};
    if (::pipe2(pipe_fds.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
        throw std::runtime_error(fmt::format(
            "carma top: cannot create a pipe: {}",
            std::error_code(errno, std::generic_category()).message()));
    }
    g_quit_signal = 0;
    g_resized = 0;
    g_suspend = 0;
    g_wake_fd.store(pipe_fds[1]);
    Outcome outcome;
    bool let_go = false;
    {
        SignalHandlers handlers;
        Poller poller(api::ApiClient(api::resolve_socket_path(o.socket)), o.interval_s,
                      pipe_fds[1]);
        const auto close_pipe = [&] {
            g_wake_fd.store(-1);
            let_go = poller.stop();
            // A poller let go inside a request still writes to the pipe when it ends: with the
            // read end closed, that write would kill the process with SIGPIPE (exit 141 instead
            // of 143 after SIGTERM, seen under ASan's slower exit). Exit closes both ends then.
            if (!let_go) {
                ::close(pipe_fds[0]);
                ::close(pipe_fds[1]);
            }
        };
        try {
            outcome = screen_loop(o, poller, pipe_fds[0]);
        } catch (...) {
            close_pipe();
            throw;  // the terminal is back already: screen_loop's RawTerminal is gone
        }
        close_pipe();
    }
    if (!outcome.message.empty()) {
        fmt::print(stderr, "carma: {}\n", printable(outcome.message, true));
    }
    return outcome.code;
}

int run_top(const TopOptions& o) {
    if (!std::isfinite(o.interval_s) || o.interval_s < kMinInterval || o.interval_s > kMaxInterval) {
        throw std::runtime_error(fmt::format(
            "--interval {:g}: give the seconds between refreshes, {:g} to {:g}", o.interval_s,
            kMinInterval, kMaxInterval));
    }
    if (o.once || ::isatty(STDOUT_FILENO) == 0) {
        return run_once(o);
    }
    return run_live(o);
}

}  // namespace

Action add_top_command(CLI::App& app) {
    auto o = std::make_shared<TopOptions>();
    CLI::App* cmd = app.add_subcommand(
        "top", "The daemon's live view, full-screen: GPUs with memory and activity bars, the "
               "running tasks and the queue (q quits, r refreshes)");
    cmd->add_option("--interval", o->interval_s, "Seconds between refreshes (default 1)");
    cmd->add_flag("--once", o->once,
                  "Print one frame as plain text and exit (also when stdout is not a terminal)");
    cmd->add_option(
        "--socket", o->socket,
        api::socket_option_help());
    return [o] { return run_top(*o); };
}

}  // namespace carma::cli
