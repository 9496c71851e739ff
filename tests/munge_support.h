#pragma once
// A private munged for tests: its own key, socket, log and seed under a fresh directory, so a
// test touches neither /etc/munge nor a munged already running, and two of them (two keys) can
// run at once. Needs root or the munge user's rights only for what munged checks itself (the key
// is owned by whoever runs the test). The way tests/slurm/lab.sh starts its munged.
//
//   carma::test_support::PrivateMunged munged;
//   ASSERT_TRUE(munged.start()) << munged.error();   // fails, with munged's log, never skips
//   ... munged.socket() ...
//   // stopped (SIGTERM, waited for) and its directory removed at destruction

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>

#include "support.h"

namespace carma::test_support {

class PrivateMunged {
public:
    PrivateMunged() = default;
    PrivateMunged(const PrivateMunged&) = delete;
    PrivateMunged& operator=(const PrivateMunged&) = delete;
    ~PrivateMunged() { stop(); }

    // Creates a key with mungekey and runs munged in the foreground (its pid is ours to stop)
    // until its socket accepts a connection. False with error() saying why.
    bool start(const std::string& origin = "127.0.0.1") {
        namespace fs = std::filesystem;
        std::string pattern = (fs::temp_directory_path() / "carma-munged-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            return failed("mkdtemp " + pattern + " failed");
        }
        dir_ = pattern;
        // munged insists that everyone may traverse to its socket and that only its user can
        // read the key and write the log's directory.
        std::error_code ec;
        fs::create_directory(dir_ + "/private", ec);
        if (ec || ::chmod(dir_.c_str(), 0755) != 0 ||
            ::chmod((dir_ + "/private").c_str(), 0700) != 0) {
            return failed("cannot prepare " + dir_);
        }
        const std::string key = dir_ + "/private/munge.key";
        const std::string mungekey = find_program("mungekey");
        const std::string munged = find_program("munged");
        if (mungekey.empty() || munged.empty()) {
            return failed("mungekey or munged not found in /usr/sbin, /sbin or PATH: install "
                          "munge (scripts/setup)");
        }
        const pid_t keygen = spawn_logged({mungekey, "--create", "--keyfile=" + key},
                                          dir_ + "/start.log");
        int status = 0;
        if (keygen < 0 || ::waitpid(keygen, &status, 0) != keygen || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0 || ::chmod(key.c_str(), 0600) != 0) {
            return failed("mungekey could not create " + key + ": " +
                          read_text(dir_ + "/start.log"));
        }
        socket_ = dir_ + "/munge.socket";
        pid_ = spawn_logged({munged, "--foreground", "--socket=" + socket_, "--key-file=" + key,
                             "--log-file=" + dir_ + "/private/munged.log",
                             "--pid-file=" + dir_ + "/munged.pid",
                             "--seed-file=" + dir_ + "/private/munged.seed",
                             "--origin=" + origin},
                            dir_ + "/start.log");
        if (pid_ < 0) {
            return failed("cannot run " + munged);
        }
        const bool up = eventually([this] { return exited() || accepts(); },
                                   std::chrono::seconds(30));
        if (!up || exited() || !accepts()) {
            std::string why = "munged did not come up on " + socket_ + ": " +
                              read_text(dir_ + "/start.log") +
                              read_text(dir_ + "/private/munged.log");
            stop();
            return failed(std::move(why));
        }
        return true;
    }

    void stop() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            int status = 0;
            ::waitpid(pid_, &status, 0);
            pid_ = -1;
        }
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
            dir_.clear();
        }
    }

    const std::string& socket() const { return socket_; }
    const std::string& error() const { return error_; }

private:
    static std::string find_program(const std::string& name) {
        for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
            const std::string path = std::string(dir) + "/" + name;
            if (::access(path.c_str(), X_OK) == 0) {
                return path;
            }
        }
        return {};
    }

    bool failed(std::string why) {
        error_ = std::move(why);
        return false;
    }

    bool exited() {
        if (pid_ <= 0) {
            return true;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return true;
        }
        return false;
    }

    bool accepts() const {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) {
            return false;
        }
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        socket_.copy(addr.sun_path, sizeof addr.sun_path - 1);
        const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
        ::close(fd);
        return ok;
    }

    std::string dir_;
    std::string socket_;
    std::string error_;
    pid_t pid_ = -1;
};

}  // namespace carma::test_support
