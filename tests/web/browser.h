#pragma once
// A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
// commands on the browser's fd 3, answers and events on its fd 4, each message a JSON text
// ended by a NUL byte). No WebSocket, no library: enough to load a page, read its DOM with
// Runtime.evaluate, collect console errors and take screenshots.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace carma::test_support {

// The chromium executable: $CARMA_CHROMIUM, else `chromium` on PATH; empty when there is none.
inline std::string find_chromium() {
    if (const char* given = std::getenv("CARMA_CHROMIUM"); given && *given) {
        return given;
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', start), dirs.size());
        for (const char* name : {"chromium", "chromium-browser"}) {
            const std::filesystem::path p = std::filesystem::path(dirs.substr(start, end - start)) / name;
            if (::access(p.c_str(), X_OK) == 0) {
                return p.string();
            }
        }
        start = end + 1;
    }
    return {};
}

inline std::vector<unsigned char> base64_decode(const std::string& text) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    std::vector<unsigned char> out;
    int bits = 0;
    unsigned buffer = 0;
    for (char c : text) {
        const int v = value(c);
        if (v < 0) {
            continue;  // padding or line breaks
        }
        buffer = (buffer << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<unsigned char>((buffer >> bits) & 0xFF));
        }
    }
    return out;
}

class Browser {
public:
    // Starts the browser with a private profile under `profile_dir`; its own messages go to
    // `log_path`. Throws with the reason when it cannot start.
    Browser(const std::string& chromium, const std::string& profile_dir,
            const std::string& log_path) {
        int to_browser[2];
        int from_browser[2];
        if (::pipe2(to_browser, O_CLOEXEC) != 0 || ::pipe2(from_browser, O_CLOEXEC) != 0) {
            throw std::runtime_error("pipe2 failed");
        }
        std::vector<std::string> args = {chromium,
                                         "--headless",
                                         "--no-sandbox",  // runs as root in CI
                                         "--disable-gpu",
                                         "--no-first-run",
                                         "--no-default-browser-check",
                                         "--disable-extensions",
                                         "--disable-background-networking",
                                         "--hide-scrollbars",
                                         "--remote-debugging-pipe",
                                         "--user-data-dir=" + profile_dir,
                                         "--window-size=1280,1800",
                                         "about:blank"};
        std::vector<char*> argv;
        for (std::string& a : args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                         0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        posix_spawn_file_actions_adddup2(&fa, to_browser[0], 3);
        posix_spawn_file_actions_adddup2(&fa, from_browser[1], 4);
        const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        ::close(to_browser[0]);
        ::close(from_browser[1]);
        to_ = to_browser[1];
        from_ = from_browser[0];
        if (rc != 0) {
            pid_ = 0;
            throw std::runtime_error("cannot start " + chromium);
        }
    }

    ~Browser() {
        if (pid_ > 0) {
            try {
                call("Browser.close", nlohmann::json::object(), "", std::chrono::seconds(10));
            } catch (const std::exception&) {
            }
            int status = 0;
            for (int i = 0; i < 100 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
                ::usleep(50000);
            }
            if (::waitpid(pid_, &status, WNOHANG) == 0) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
            }
        }
        ::close(to_);
        ::close(from_);
    }

    Browser(const Browser&) = delete;
    Browser& operator=(const Browser&) = delete;

    // Sends a command and waits for its answer's `result`; events that arrive meanwhile are
    // kept in events(). Throws with the protocol's error message.
    nlohmann::json call(const std::string& method, const nlohmann::json& params,
                        const std::string& session = "",
                        std::chrono::seconds limit = std::chrono::seconds(60)) {
        const int id = next_id_++;
        nlohmann::json message = {{"id", id}, {"method", method}, {"params", params}};
        if (!session.empty()) {
            message["sessionId"] = session;
        }
        std::string text = message.dump();
        text.push_back('\0');
        for (std::size_t sent = 0; sent < text.size();) {
            const ssize_t n = ::write(to_, text.data() + sent, text.size() - sent);
            if (n <= 0) {
                throw std::runtime_error("the browser closed its command pipe (" + method + ")");
            }
            sent += static_cast<std::size_t>(n);
        }
        const auto until = std::chrono::steady_clock::now() + limit;
        while (true) {
            nlohmann::json reply = next_message(until, method);
            if (reply.contains("id") && reply["id"] == id) {
                if (reply.contains("error")) {
                    throw std::runtime_error(method + ": " + reply["error"].dump());
                }
                return reply.value("result", nlohmann::json::object());
            }
            if (reply.contains("method")) {
                events_.push_back(std::move(reply));
            }
        }
    }

    // A page of its own (a target attached in flat mode); returns its session id.
    std::string open_page() {
        const nlohmann::json target =
            call("Target.createTarget", {{"url", "about:blank"}});
        const nlohmann::json attached = call(
            "Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}});
        const std::string session = attached["sessionId"];
        for (const char* domain : {"Runtime.enable", "Log.enable", "Page.enable"}) {
            call(domain, nlohmann::json::object(), session);
        }
        return session;
    }

    // The value of a JavaScript expression (awaited when it is a promise).
    nlohmann::json evaluate(const std::string& session, const std::string& expression) {
        const nlohmann::json r = call("Runtime.evaluate",
                                      {{"expression", expression},
                                       {"returnByValue", true},
                                       {"awaitPromise", true}},
                                      session);
        if (r.contains("exceptionDetails")) {
            throw std::runtime_error("evaluating `" + expression + "` threw " +
                                     r["exceptionDetails"].dump());
        }
        return r["result"].value("value", nlohmann::json());
    }

    void screenshot(const std::string& session, const std::string& path) {
        const nlohmann::json shot = call("Page.captureScreenshot",
                                         {{"format", "png"}, {"captureBeyondViewport", true}},
                                         session);
        const std::vector<unsigned char> png = base64_decode(shot["data"].get<std::string>());
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
    }

    // Everything the page reported as an error: uncaught exceptions, console.error, and the
    // browser's own log entries of level error (a failed resource load, a CSP violation).
    std::vector<std::string> errors() const {
        std::vector<std::string> out;
        for (const nlohmann::json& e : events_) {
            const std::string method = e.value("method", "");
            const nlohmann::json& p = e.contains("params") ? e["params"] : nlohmann::json();
            if (method == "Runtime.exceptionThrown") {
                out.push_back("exception: " + p.dump());
            } else if (method == "Runtime.consoleAPICalled" &&
                       (p.value("type", "") == "error" || p.value("type", "") == "assert")) {
                out.push_back("console." + p.value("type", "") + ": " + p["args"].dump());
            } else if (method == "Log.entryAdded" && p.contains("entry") &&
                       p["entry"].value("level", "") == "error") {
                out.push_back("log: " + p["entry"].dump());
            }
        }
        return out;
    }

    // Lets queued events in (errors() reads only what has arrived).
    void drain() { call("Browser.getVersion", nlohmann::json::object()); }

private:
    nlohmann::json next_message(std::chrono::steady_clock::time_point until,
                                const std::string& waiting_for) {
        while (true) {
            if (const std::size_t end = buffer_.find('\0'); end != std::string::npos) {
                std::string text = buffer_.substr(0, end);
                buffer_.erase(0, end + 1);
                return nlohmann::json::parse(text);
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                throw std::runtime_error("no answer from the browser to " + waiting_for);
            }
            pollfd p{from_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) <= 0) {
                continue;
            }
            char chunk[65536];
            const ssize_t n = ::read(from_, chunk, sizeof chunk);
            if (n <= 0) {
                throw std::runtime_error("the browser exited while waiting for " + waiting_for);
            }
            buffer_.append(chunk, static_cast<std::size_t>(n));
        }
    }

    pid_t pid_ = 0;
    int to_ = -1;
    int from_ = -1;
    int next_id_ = 1;
    std::string buffer_;
    std::vector<nlohmann::json> events_;
};

}  // namespace carma::test_support
