#pragma once
// A fake daemon for the CLI's tests: an httplib server on a temporary Unix socket that records
// every request and answers what each test scripts (by default 200 with {}).

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace carma::test_support {

inline std::filesystem::path make_temp_dir() {
    char tmpl[] = "/tmp/carma-client-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    return tmpl;
}

struct Seen {
    std::string method;
    std::string target;  // path, then the query parameters in order
    std::string body;
};

using Responder = std::function<void(const httplib::Request&, httplib::Response&)>;

// A fake daemon: records each request, then lets the test's responder answer it.
class FakeDaemon {
public:
    FakeDaemon() : dir_(make_temp_dir()), socket_((dir_ / "carma.sock").string()) {
        server_.set_address_family(AF_UNIX);
        auto handler = [this](const httplib::Request& req, httplib::Response& res) {
            handle(req, res);
        };
        server_.Get(".*", handler);
        server_.Post(".*", handler);
        server_.Delete(".*", handler);
        if (!server_.bind_to_port(socket_, 80)) {
            throw std::runtime_error("cannot bind " + socket_);
        }
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        for (int i = 0; i < 500 && !server_.is_running(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    ~FakeDaemon() {
        server_.stop();
        thread_.join();
        std::filesystem::remove_all(dir_);
    }

    const std::string& socket() const { return socket_; }

    void respond(Responder r) {
        std::lock_guard lock(mutex_);
        responder_ = std::move(r);
    }

    std::vector<Seen> seen() const {
        std::lock_guard lock(mutex_);
        return seen_;
    }

    std::vector<std::string> targets() const {
        std::vector<std::string> out;
        for (const Seen& s : seen()) {
            out.push_back(s.method + " " + s.target);
        }
        return out;
    }

private:
    void handle(const httplib::Request& req, httplib::Response& res) {
        Responder responder;
        {
            std::lock_guard lock(mutex_);
            std::string target = req.path;
            char sep = '?';
            for (const auto& [key, value] : req.params) {
                target += sep + key + "=" + value;
                sep = '&';
            }
            seen_.push_back({req.method, target, req.body});
            responder = responder_;
        }
        if (responder) {
            responder(req, res);
        } else {
            res.status = 200;
            res.set_content("{}", "application/json");
        }
    }

    std::filesystem::path dir_;
    std::string socket_;
    httplib::Server server_;
    std::thread thread_;
    mutable std::mutex mutex_;
    Responder responder_;
    std::vector<Seen> seen_;
};

}  // namespace carma::test_support
